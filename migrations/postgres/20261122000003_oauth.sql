-- OAuth 2.1 per tenant: each tenant's auth mode and settings, its registered clients, single-use
-- authorization codes, refresh-token families, signing keys (private halves sealed) and users.
-- Tokens and secrets are stored as SHA-256 hashes, never in clear. Every row is tenant-keyed.
ALTER TABLE tenants ADD COLUMN auth TEXT NOT NULL DEFAULT '{"mode":"none"}';

CREATE TABLE oauth_clients (
    tenant                  TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    client_id               TEXT NOT NULL,
    secret_hash             TEXT,            -- confidential clients: SHA-256 of the secret
    registration_token_hash TEXT,            -- RFC 7592 registration access token, hashed
    source                  TEXT NOT NULL,   -- 'dcr' or 'admin'
    metadata                TEXT NOT NULL,   -- JSON client metadata (RFC 7591)
    created_at              BIGINT NOT NULL,
    PRIMARY KEY (tenant, client_id)
);

CREATE TABLE oauth_codes (
    tenant     TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    code_hash  TEXT NOT NULL,
    client_id  TEXT NOT NULL,
    grant_data TEXT NOT NULL,                -- JSON: redirect URI, PKCE challenge, scope, resource, principal
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,                       -- set when redeemed; a second redemption is reuse
    PRIMARY KEY (tenant, code_hash)
);

CREATE TABLE oauth_refresh_tokens (
    tenant     TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    token_hash TEXT NOT NULL,
    family     TEXT NOT NULL,                -- every rotation of one grant shares its family
    client_id  TEXT NOT NULL,
    grant_data TEXT NOT NULL,                -- JSON: scope, resource, principal
    expires_at BIGINT NOT NULL,
    used_at    BIGINT,                       -- rotated away; presenting it again revokes the family
    revoked_at BIGINT,
    PRIMARY KEY (tenant, token_hash)
);
CREATE INDEX oauth_refresh_tokens_family ON oauth_refresh_tokens (tenant, family);

CREATE TABLE oauth_signing_keys (
    tenant      TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    kid         TEXT NOT NULL,
    alg         TEXT NOT NULL,
    public_jwk  TEXT NOT NULL,               -- JSON Web Key (public half)
    private_key TEXT NOT NULL,               -- PKCS#8, sealed (authenticated encryption)
    created_at  BIGINT NOT NULL,
    retired_at  BIGINT,                      -- no longer signs; published until tokens it signed expire
    PRIMARY KEY (tenant, kid)
);

CREATE TABLE tenant_users (
    tenant        TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    username      TEXT NOT NULL,
    password_hash TEXT NOT NULL,             -- argon2id PHC string
    display_name  TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant, username)
);

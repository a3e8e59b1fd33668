-- URL-mode elicitations: a tool asked the user for a secret (an API key, a third-party grant)
-- on the platform's own page `/t/{tenant}/elicitations/{id}`. Bound to the principal that
-- caused it (NULL on open tenants, where the unguessable id is the capability). The secret is
-- sealed (XChaCha20-Poly1305, bound to tenant and id) and cleared once handed to the tool, or
-- when the elicitation expires.
CREATE TABLE elicitations (
    tenant        TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    id            TEXT NOT NULL,      -- 256 random bits, base64url
    principal     TEXT,               -- binding "issuer\nsubject\nclient_id"; NULL: open tenant
    session       TEXT,               -- the MCP session that asked, if any
    tool          TEXT NOT NULL,
    name          TEXT NOT NULL,      -- what is asked for, e.g. github_token
    message       TEXT NOT NULL,
    status        TEXT NOT NULL,      -- pending | completed | declined | cancelled | expired
    secret_sealed TEXT,               -- sealed secret; NULL unless completed and not yet delivered
    expires_at    BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX elicitations_by_tool ON elicitations (tenant, tool, name, status);
CREATE INDEX elicitations_by_expiry ON elicitations (status, expires_at);

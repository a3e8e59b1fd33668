-- Tenants, their catalog entries, and the admin token (hashed).
CREATE TABLE tenants (
    slug         TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
    catalogs     TEXT NOT NULL,  -- JSON array of built-in catalog names
    limits       TEXT NOT NULL,  -- JSON object
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

CREATE TABLE catalog_entries (
    tenant     TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('tool', 'prompt', 'resource', 'resource_template')),
    name       TEXT NOT NULL,
    body       TEXT NOT NULL,    -- JSON definition
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, kind, name)
);

CREATE TABLE admin_tokens (
    id         TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

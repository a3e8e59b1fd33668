-- Upstream MCP servers a tenant federates (gateway mode): one row per upstream, its definition
-- as the admin API accepted it (static credentials sealed). A table of its own, so a version
-- that does not know upstreams reads the catalog as before.
CREATE TABLE upstreams (
    tenant     TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    body       TEXT NOT NULL,    -- JSON definition
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);

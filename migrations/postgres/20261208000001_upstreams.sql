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

-- Tool-definition pinning: the definition of each upstream tool as first seen (or last
-- approved), and a changed one the upstream offers since, held back until an admin approves it.
CREATE TABLE upstream_pins (
    tenant             TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    upstream           TEXT NOT NULL,
    tool               TEXT NOT NULL,
    hash               TEXT NOT NULL,
    definition         TEXT NOT NULL,
    pending_hash       TEXT,
    pending_definition TEXT,
    PRIMARY KEY (tenant, upstream, tool)
);

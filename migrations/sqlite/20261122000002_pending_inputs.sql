-- Webhook tool calls waiting for the MCP client's input (an elicitation or a sampling answer):
-- the round that asked and the endpoint's opaque state, so the call can go on from that round on
-- any replica if the one running it dies. Removed when the call ends.
CREATE TABLE pending_inputs (
    tenant     TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    session    TEXT NOT NULL,
    request_id TEXT NOT NULL,    -- the tools/call request id, as JSON
    tool       TEXT NOT NULL,
    round      BIGINT NOT NULL,  -- the round whose answer asked for input
    state      TEXT NOT NULL,    -- JSON: what the endpoint sent with its input request
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, session, request_id)
);

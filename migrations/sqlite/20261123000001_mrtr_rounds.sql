-- Multi round-trip requests (2026-07-28): a request that answered `input_required` is recorded
-- here, and the sealed `requestState` the client echoes names the row, so whichever replica gets
-- the retry goes on from it. `state` is sealed (it holds the client's earlier answers, which may
-- be what a user typed). Removed when the request completes; expired rows are swept.
CREATE TABLE mrtr_rounds (
    tenant     TEXT NOT NULL REFERENCES tenants (slug) ON DELETE CASCADE,
    id         TEXT NOT NULL,    -- random, 128 bits
    round      BIGINT NOT NULL,  -- how many times the request answered input_required
    state      TEXT NOT NULL,    -- sealed JSON: the request's identity and the answers so far
    expires_at BIGINT NOT NULL,  -- unix ms
    PRIMARY KEY (tenant, id)
);
CREATE INDEX mrtr_rounds_expiry ON mrtr_rounds (expires_at);

-- When a client registered by Dynamic Client Registration was first issued a token, or its
-- registration was vouched for (the tenant's initial access token, the admin API). Clients
-- anyone registered that are never confirmed are deleted after `auth.unused_client_ttl_secs`.
-- Clients registered before this column existed count as confirmed.
ALTER TABLE oauth_clients ADD COLUMN confirmed_at BIGINT;
UPDATE oauth_clients SET confirmed_at = created_at;
-- What the OAuth sweep looks for every minute on every replica, without reading every client.
CREATE INDEX oauth_clients_unconfirmed ON oauth_clients (created_at) WHERE confirmed_at IS NULL;

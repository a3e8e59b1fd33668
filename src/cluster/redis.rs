//! Redis shared state (many replicas): the event log as Redis Streams, snapshots, leases with
//! fencing counters, replica liveness keys, the pub/sub bus and the tenants' quotas, all under
//! one key prefix.
//!
//! Key layout (`{p}` is the prefix; tenant, session and replica ids are written with `%` and `:`
//! percent-encoded, so no id can reach into another's keys):
//!
//! - `{p}:ev:{tenant}:{session}:{stream}`: a session stream's events, a Redis Stream with ids
//!   `0-<seq>` and the data in field `d`; trimmed to `max_events`, expiring `max_age` after its
//!   last append
//! - `{p}:evs:{tenant}:{session}`: the set of that session's stream keys (same expiry)
//! - `{p}:snap:{tenant}:{session}`: the session snapshot
//! - `{p}:lease:{tenant}:{session}`: the lease, `<replica>|<token>`
//! - `{p}:fence`: the fencing counter, one for all sessions (each session's tokens still only
//!   grow); `{p}:fence:{tenant}:{session}`, the session's own counter of earlier versions, is read
//!   when its lease is taken (tokens keep growing across an upgrade) and set to the token issued,
//!   expiring a day after its lease would (a replica of an earlier version still running
//!   increments it past every token issued), and deleted with the session
//! - `{p}:replica:{id}`: a live replica's URL (expires unless its heartbeat renews it)
//! - `{p}:bus:{topic}`: the pub/sub channel of a bus topic
//! - `{p}:rate:{tenant}` and `{p}:rate:{tenant}:{principal}`: a request rate's GCRA theoretical
//!   arrival time (µs, Redis's clock), expiring once it is in the past
//! - `{p}:live:{tenant}`: the tenant's live sessions, a sorted set of session ids scored by
//!   their expiry (Unix ms); `{p}:owners:{tenant}`: a hash of the owned ones' principals
//!
//! Every write of an owner is one Lua script that checks the lease first. Commands go through a
//! [`ConnectionManager`] (it reconnects by itself) with short timeouts, so an outage fails fast
//! with [`BackendError::Unavailable`]; each bus subscription owns a pub/sub connection and
//! reconnects and resubscribes on its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::{Client, RedisError, Script};
use tokio::sync::mpsc;

use super::{
    gcra_parameters, Acquired, BackendError, Bus, BusMessage, EventId, EventLog, Lease, Leases,
    Quota, Quotas, RateScope, ReplicaInfo, Retention, SessionAdmission, SessionCaps, SessionKey,
    SnapshotStore, StoredEvent, StreamId,
};

/// How long one command may wait for its answer, and one connection attempt for the server.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// The most any operation may take, reconnection attempts included.
const OPERATION_DEADLINE: Duration = Duration::from_secs(3);
/// The pause before a lost bus subscription reconnects.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(300);

/// Appends a batch of events under a lease. KEYS: lease, the session's stream set, then each
/// stream of the batch. ARGV: expected lease value, max events, max age (ms), then per event:
/// index of its stream in KEYS, seq, data. Events at or below a stream's last seq (retries) are
/// skipped. Returns 0 when fenced, 1 otherwise.
const APPEND: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local last = {}
for i = 3, #KEYS do
  local top = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)
  last[i] = 0
  if top[1] then last[i] = tonumber(string.match(top[1][1], '^0%-(%d+)$')) or 0 end
end
for j = 4, #ARGV, 3 do
  local k = tonumber(ARGV[j])
  local seq = tonumber(ARGV[j + 1])
  if seq > last[k] then
    redis.call('XADD', KEYS[k], 'MAXLEN', ARGV[2], '0-' .. ARGV[j + 1], 'd', ARGV[j + 2])
    last[k] = seq
  end
end
for i = 3, #KEYS do
  if redis.call('PEXPIRE', KEYS[i], ARGV[3]) == 1 then redis.call('SADD', KEYS[2], KEYS[i]) end
end
if #KEYS > 2 then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return 1
";

/// The events of a stream after a seq. KEYS: the stream. ARGV: the seq. Nil when the stream is
/// unknown or the seq is beyond its last event.
const REPLAY: &str = r"
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if not top[1] then return false end
local last = tonumber(string.match(top[1][1], '^0%-(%d+)$'))
if last == nil then return redis.error_reply('unexpected stream entry id ' .. top[1][1]) end
local after = tonumber(ARGV[1])
if after > last then return false end
if after < last then
  -- Events right after `after` were already trimmed: a replay would skip them silently.
  local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
  local oldest = tonumber(string.match(first[1][1], '^0%-(%d+)$'))
  if oldest == nil or oldest > after + 1 then return false end
end
return redis.call('XRANGE', KEYS[1], '(0-' .. ARGV[1], '+')
";

/// Saves a snapshot under a lease. KEYS: lease, snapshot. ARGV: expected lease value, data, ttl
/// (ms). Returns 0 when fenced.
const SAVE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
";

/// Takes a lease if it is free or held by the expected holder. KEYS: lease, the session's own
/// fencing counter (earlier versions'), the shared one. ARGV: expected lease value ('' for
/// none), replica, ttl (ms). Returns {1, new value} or {0, current value}.
const ACQUIRE: &str = r"
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return {0, cur} end
local token = redis.call('INCR', KEYS[3])
local own = tonumber(redis.call('GET', KEYS[2]) or '0')
if token <= own then
  token = own + 1
  redis.call('SET', KEYS[3], string.format('%d', token))
end
redis.call('SET', KEYS[2], string.format('%d', token), 'PX', string.format('%d', tonumber(ARGV[3]) + 86400000))
local value = ARGV[2] .. '|' .. string.format('%d', token)
redis.call('SET', KEYS[1], value, 'PX', ARGV[3])
return {1, value}
";

/// Deletes a lease if it still has the given value. KEYS: lease. ARGV: lease value.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// One GCRA step (see `cluster::gcra`) on Redis's clock. KEYS: the rate. ARGV: emission
/// interval times the step's cost, and tolerance (µs). Returns 0 when admitted, otherwise the µs to wait.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allowed_at = tat + interval - tonumber(ARGV[2])
if allowed_at > now then return allowed_at - now end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return 0
";

/// Counts an attempt under every key, unless one holds its limit already. KEYS: the counters.
/// ARGV: window (ms), then each key's limit. Returns 0 when counted, else how long (ms) until
/// the full counter's window ends.
const COUNT_ATTEMPT: &str = r"
for i, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[i + 1]) then
    local left = redis.call('PTTL', key)
    if left < 1 then left = 1 end
    return left
  end
end
for _, key in ipairs(KEYS) do
  if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, ARGV[1]) end
end
return 0
";

/// Takes one attempt back from a counter (never below 0; its window is kept). KEYS: the counter.
const FORGIVE_ATTEMPT: &str = r"
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then redis.call('DECR', KEYS[1]) end
return 0
";

/// Counts a new session unless a cap is reached. KEYS: live set, owners hash. ARGV: now (ms),
/// its expiry (ms), session, principal ('' for none), tenant cap, principal cap (0: none), ttl
/// (ms). Returns 0 when counted, 1 when the tenant is full, 2 when the principal is.
const OPEN_SESSION: &str = r"
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, id in ipairs(expired) do redis.call('HDEL', KEYS[2], id) end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1]) end
local cap = tonumber(ARGV[5])
if cap > 0 and redis.call('ZCARD', KEYS[1]) >= cap then return 1 end
local pcap = tonumber(ARGV[6])
if pcap > 0 and ARGV[4] ~= '' then
  local held = 0
  for _, owner in ipairs(redis.call('HVALS', KEYS[2])) do
    if owner == ARGV[4] then held = held + 1 end
  end
  if held >= pcap then return 2 end
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return 0
";

/// All the backends on one Redis.
pub struct RedisCluster {
    client: Client,
    conn: ConnectionManager,
    prefix: String,
    retention: Retention,
    append: Script,
    replay: Script,
    save: Script,
    acquire: Script,
    release: Script,
    take: Script,
    open_session: Script,
    count_attempt: Script,
    forgive_attempt: Script,
}

fn unavailable(e: RedisError) -> BackendError {
    BackendError::Unavailable(format!("redis: {e}"))
}

fn corrupt(what: impl Into<String>) -> BackendError {
    BackendError::Corrupt(what.into())
}

/// Runs one Redis operation within [`OPERATION_DEADLINE`].
async fn bounded<T>(
    op: impl std::future::Future<Output = Result<T, RedisError>>,
) -> Result<T, BackendError> {
    match tokio::time::timeout(OPERATION_DEADLINE, op).await {
        Ok(result) => result.map_err(unavailable),
        Err(_) => Err(BackendError::Unavailable("redis: timed out".into())),
    }
}

/// An id as one key segment: `%` and `:` percent-encoded, everything else as is (so a tenant or
/// session id can never reach into another's keys). Public for the fuzz targets.
pub fn segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    out
}

/// A lease as stored: `<replica>|<token>` (read back by [`parse_lease`]).
pub fn lease_value(lease: &Lease) -> String {
    format!("{}|{}", lease.replica, lease.token)
}

/// A stored lease value (see [`lease_value`]).
pub fn parse_lease(value: &str) -> Result<Lease, BackendError> {
    let (replica, token) = value
        .rsplit_once('|')
        .ok_or_else(|| corrupt(format!("lease value {value:?}")))?;
    let token = token
        .parse()
        .map_err(|_| corrupt(format!("lease token in {value:?}")))?;
    Ok(Lease {
        replica: replica.into(),
        token,
    })
}

/// The seq of a stream entry id `0-<seq>`.
pub fn parse_entry_id(id: &str) -> Result<u64, BackendError> {
    id.strip_prefix("0-")
        .and_then(|seq| seq.parse().ok())
        .ok_or_else(|| corrupt(format!("stream entry id {id:?}")))
}

/// Milliseconds since the Unix epoch (live sessions' expiry scores; replicas' clocks agree far
/// better than the minutes a session lives).
fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds for PX/PEXPIRE (at least 1: Redis refuses 0).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A stream entry as XRANGE returns it: id, then field/value pairs.
type Entry = (String, Vec<Vec<u8>>);

fn entry_event(stream: StreamId, (id, fields): Entry) -> Result<StoredEvent, BackendError> {
    let seq = parse_entry_id(&id)?;
    let data = fields
        .chunks(2)
        .find(|pair| pair.len() == 2 && pair[0] == b"d")
        .map(|pair| Bytes::from(pair[1].clone()))
        .ok_or_else(|| corrupt(format!("stream entry {id} has no data field")))?;
    Ok(StoredEvent {
        id: EventId { stream, seq },
        data,
    })
}

/// What a `rediss://` connection trusts and presents beyond the defaults (PEM bytes): the CAs
/// that may sign the server's certificate (instead of the system's and Mozilla's roots), and a
/// client certificate with its key (mutual TLS).
#[derive(Debug, Clone, Default)]
pub struct RedisTls {
    pub ca: Option<Vec<u8>>,
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl RedisTls {
    /// Reads the files `redis.tls_ca_path`, `tls_cert_path` and `tls_key_path` name (empty: none).
    pub fn from_config(c: &crate::config::RedisConfig) -> Result<RedisTls, BackendError> {
        let read = |path: &str| -> Result<Option<Vec<u8>>, BackendError> {
            if path.is_empty() {
                return Ok(None);
            }
            std::fs::read(path)
                .map(Some)
                .map_err(|e| BackendError::Unavailable(format!("redis: cannot read {path}: {e}")))
        };
        let client = match (read(&c.tls_cert_path)?, read(&c.tls_key_path)?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            _ => None,
        };
        Ok(RedisTls {
            ca: read(&c.tls_ca_path)?,
            client,
        })
    }

    fn is_default(&self) -> bool {
        self.ca.is_none() && self.client.is_none()
    }
}

impl RedisCluster {
    /// Connects to Redis at `url` (`rediss://`: over TLS, trusting and presenting what `tls`
    /// says), keeping every key under `prefix`; fails with `Unavailable` when Redis cannot be
    /// reached now, or its certificate is not trusted.
    pub async fn connect(
        url: &str,
        tls: &RedisTls,
        prefix: &str,
        retention: Retention,
    ) -> Result<Arc<RedisCluster>, BackendError> {
        let client = if tls.is_default() {
            Client::open(url)
        } else {
            let certificates = redis::TlsCertificates {
                client_tls: tls.client.clone().map(|(client_cert, client_key)| {
                    redis::ClientTlsConfig {
                        client_cert,
                        client_key,
                    }
                }),
                root_cert: tls.ca.clone(),
            };
            Client::build_with_tls(url, certificates)
        }
        .map_err(|e| {
            BackendError::Unavailable(format!("invalid redis URL or certificates: {e}"))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(COMMAND_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let mut conn = bounded(client.get_connection_manager_with_config(config)).await?;
        bounded(redis::cmd("PING").query_async::<String>(&mut conn)).await?;
        Ok(Arc::new(RedisCluster {
            client,
            conn,
            prefix: prefix.to_string(),
            retention,
            append: Script::new(APPEND),
            replay: Script::new(REPLAY),
            save: Script::new(SAVE),
            acquire: Script::new(ACQUIRE),
            release: Script::new(RELEASE),
            take: Script::new(TAKE),
            open_session: Script::new(OPEN_SESSION),
            count_attempt: Script::new(COUNT_ATTEMPT),
            forgive_attempt: Script::new(FORGIVE_ATTEMPT),
        }))
    }

    fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    fn session_key(&self, kind: &str, key: &SessionKey) -> String {
        format!(
            "{}:{kind}:{}:{}",
            self.prefix,
            segment(&key.tenant),
            segment(&key.session)
        )
    }

    fn stream_key(&self, key: &SessionKey, stream: StreamId) -> String {
        format!("{}:{}", self.session_key("ev", key), stream.0)
    }

    fn replica_key(&self, replica: &str) -> String {
        format!("{}:replica:{}", self.prefix, segment(replica))
    }

    fn tenant_key(&self, kind: &str, tenant: &str) -> String {
        format!("{}:{kind}:{}", self.prefix, segment(tenant))
    }

    /// A tenant's sign-in attempt counter under `key` (an opaque id).
    fn attempt_key(&self, tenant: &str, key: &str) -> String {
        format!("{}:{}", self.tenant_key("signin", tenant), segment(key))
    }

    fn channel_prefix(&self) -> String {
        format!("{}:bus:", self.prefix)
    }
}

#[async_trait]
impl EventLog for RedisCluster {
    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis append", otel.kind = "client", db.system.name = "redis", db.operation.name = "XADD"))]
    async fn append(
        &self,
        key: &SessionKey,
        lease: &Lease,
        events: &[StoredEvent],
    ) -> Result<(), BackendError> {
        let mut call = self.append.prepare_invoke();
        call.key(self.session_key("lease", key))
            .key(self.session_key("evs", key))
            .arg(lease_value(lease))
            .arg(self.retention.max_events.max(1))
            .arg(millis(self.retention.max_age));
        // KEYS index (1-based, after the lease and the set) of each stream of the batch.
        let mut streams: HashMap<StreamId, usize> = HashMap::new();
        for event in events {
            let next = streams.len() + 3;
            let index = *streams.entry(event.id.stream).or_insert_with(|| {
                call.key(self.stream_key(key, event.id.stream));
                next
            });
            call.arg(index).arg(event.id.seq).arg(event.data.as_ref());
        }
        let mut conn = self.conn();
        match bounded(call.invoke_async::<i64>(&mut conn)).await? {
            1 => Ok(()),
            _ => Err(BackendError::Fenced),
        }
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis replay_after", otel.kind = "client", db.system.name = "redis", db.operation.name = "XRANGE"))]
    async fn replay_after(
        &self,
        key: &SessionKey,
        after: EventId,
    ) -> Result<Option<Vec<StoredEvent>>, BackendError> {
        let mut call = self.replay.prepare_invoke();
        call.key(self.stream_key(key, after.stream)).arg(after.seq);
        let mut conn = self.conn();
        let Some(entries) = bounded(call.invoke_async::<Option<Vec<Entry>>>(&mut conn)).await?
        else {
            return Ok(None);
        };
        entries
            .into_iter()
            .map(|entry| entry_event(after.stream, entry))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis last_seq", otel.kind = "client", db.system.name = "redis", db.operation.name = "XREVRANGE"))]
    async fn last_seq(
        &self,
        key: &SessionKey,
        stream: StreamId,
    ) -> Result<Option<u64>, BackendError> {
        let mut conn = self.conn();
        let top: Vec<Entry> = bounded(
            redis::cmd("XREVRANGE")
                .arg(self.stream_key(key, stream))
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query_async(&mut conn),
        )
        .await?;
        top.first().map(|(id, _)| parse_entry_id(id)).transpose()
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis remove_session", otel.kind = "client", db.system.name = "redis", db.operation.name = "DEL"))]
    async fn remove_session(&self, key: &SessionKey) -> Result<(), BackendError> {
        let set = self.session_key("evs", key);
        let mut conn = self.conn();
        let mut keys: Vec<String> =
            bounded(redis::cmd("SMEMBERS").arg(&set).query_async(&mut conn)).await?;
        keys.push(set);
        bounded(redis::cmd("DEL").arg(keys).exec_async(&mut conn)).await
    }
}

#[async_trait]
impl SnapshotStore for RedisCluster {
    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis save", otel.kind = "client", db.system.name = "redis", db.operation.name = "snapshot save"))]
    async fn save(
        &self,
        key: &SessionKey,
        lease: &Lease,
        snapshot: Bytes,
        ttl: Duration,
    ) -> Result<(), BackendError> {
        let mut call = self.save.prepare_invoke();
        call.key(self.session_key("lease", key))
            .key(self.session_key("snap", key))
            .arg(lease_value(lease))
            .arg(snapshot.as_ref())
            .arg(millis(ttl));
        let mut conn = self.conn();
        match bounded(call.invoke_async::<i64>(&mut conn)).await? {
            1 => Ok(()),
            _ => Err(BackendError::Fenced),
        }
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis load", otel.kind = "client", db.system.name = "redis", db.operation.name = "GET"))]
    async fn load(&self, key: &SessionKey) -> Result<Option<Bytes>, BackendError> {
        let mut conn = self.conn();
        let data: Option<Vec<u8>> = bounded(
            redis::cmd("GET")
                .arg(self.session_key("snap", key))
                .query_async(&mut conn),
        )
        .await?;
        Ok(data.map(Bytes::from))
    }

    async fn touch(&self, keys: &[SessionKey], ttl: Duration) -> Result<(), BackendError> {
        if keys.is_empty() {
            return Ok(());
        }
        let ttl = millis(ttl);
        let expires = unix_ms().saturating_add(ttl);
        let mut pipe = redis::pipe();
        let mut tenants = std::collections::HashSet::new();
        for key in keys {
            pipe.cmd("PEXPIRE")
                .arg(self.session_key("snap", key))
                .arg(ttl)
                .ignore()
                .cmd("PEXPIRE")
                .arg(self.session_key("lease", key))
                .arg(ttl)
                .ignore()
                .cmd("ZADD")
                .arg(self.tenant_key("live", &key.tenant))
                .arg(expires)
                .arg(&*key.session)
                .ignore();
            tenants.insert(&key.tenant);
        }
        for tenant in tenants {
            for kind in ["live", "owners"] {
                pipe.cmd("PEXPIRE")
                    .arg(self.tenant_key(kind, tenant))
                    .arg(ttl)
                    .ignore();
            }
        }
        let mut conn = self.conn();
        bounded(pipe.exec_async(&mut conn)).await
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis delete", otel.kind = "client", db.system.name = "redis", db.operation.name = "DEL"))]
    async fn delete(&self, key: &SessionKey) -> Result<(), BackendError> {
        let mut conn = self.conn();
        bounded(
            redis::pipe()
                .cmd("DEL")
                .arg(self.session_key("snap", key))
                .arg(self.session_key("lease", key))
                .arg(self.session_key("fence", key))
                .ignore()
                .cmd("ZREM")
                .arg(self.tenant_key("live", &key.tenant))
                .arg(&*key.session)
                .ignore()
                .cmd("HDEL")
                .arg(self.tenant_key("owners", &key.tenant))
                .arg(&*key.session)
                .ignore()
                .exec_async(&mut conn),
        )
        .await
    }
}

#[async_trait]
impl Leases for RedisCluster {
    async fn heartbeat(&self, replica: &ReplicaInfo, ttl: Duration) -> Result<(), BackendError> {
        let mut conn = self.conn();
        bounded(
            redis::cmd("SET")
                .arg(self.replica_key(&replica.id))
                .arg(&replica.url)
                .arg("PX")
                .arg(millis(ttl))
                .exec_async(&mut conn),
        )
        .await
    }

    async fn retire(&self, replica: &str) -> Result<(), BackendError> {
        let mut conn = self.conn();
        bounded(
            redis::cmd("DEL")
                .arg(self.replica_key(replica))
                .exec_async(&mut conn),
        )
        .await
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis replica_url", otel.kind = "client", db.system.name = "redis", db.operation.name = "GET"))]
    async fn replica_url(&self, replica: &str) -> Result<Option<String>, BackendError> {
        let mut conn = self.conn();
        bounded(
            redis::cmd("GET")
                .arg(self.replica_key(replica))
                .query_async(&mut conn),
        )
        .await
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis owner", otel.kind = "client", db.system.name = "redis", db.operation.name = "lease owner"))]
    async fn owner(&self, key: &SessionKey) -> Result<Option<Lease>, BackendError> {
        let mut conn = self.conn();
        let value: Option<String> = bounded(
            redis::cmd("GET")
                .arg(self.session_key("lease", key))
                .query_async(&mut conn),
        )
        .await?;
        value.as_deref().map(parse_lease).transpose()
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis acquire", otel.kind = "client", db.system.name = "redis", db.operation.name = "lease acquire"))]
    async fn acquire(
        &self,
        key: &SessionKey,
        replica: &str,
        expected: Option<&Lease>,
        ttl: Duration,
    ) -> Result<Acquired, BackendError> {
        let mut call = self.acquire.prepare_invoke();
        call.key(self.session_key("lease", key))
            .key(self.session_key("fence", key))
            .key(format!("{}:fence", self.prefix))
            .arg(expected.map(lease_value).unwrap_or_default())
            .arg(replica)
            .arg(millis(ttl));
        let mut conn = self.conn();
        let (granted, value): (i64, String) = bounded(call.invoke_async(&mut conn)).await?;
        let lease = parse_lease(&value)?;
        Ok(if granted == 1 {
            Acquired::Granted(lease)
        } else {
            Acquired::HeldBy(lease)
        })
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis release", otel.kind = "client", db.system.name = "redis", db.operation.name = "lease release"))]
    async fn release(&self, key: &SessionKey, lease: &Lease) -> Result<(), BackendError> {
        let mut call = self.release.prepare_invoke();
        call.key(self.session_key("lease", key))
            .arg(lease_value(lease));
        let mut conn = self.conn();
        bounded(call.invoke_async::<i64>(&mut conn))
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl Quotas for RedisCluster {
    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis take", otel.kind = "client", db.system.name = "redis", db.operation.name = "rate take"))]
    async fn take(
        &self,
        tenant: &str,
        scope: RateScope<'_>,
        per_minute: u32,
        cost: u32,
    ) -> Result<Quota, BackendError> {
        let key = match scope {
            RateScope::Tenant => self.tenant_key("rate", tenant),
            RateScope::Principal(p) => {
                format!("{}:{}", self.tenant_key("rate", tenant), segment(p))
            }
        };
        let (interval, tolerance) = gcra_parameters(per_minute, cost);
        let mut call = self.take.prepare_invoke();
        call.key(key).arg(interval).arg(tolerance);
        let mut conn = self.conn();
        let wait: u64 = bounded(call.invoke_async(&mut conn)).await?;
        Ok(match wait {
            0 => Quota::Allowed,
            us => Quota::Exceeded {
                retry_after: Duration::from_micros(us),
            },
        })
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis count_attempt", otel.kind = "client", db.system.name = "redis", db.operation.name = "attempt count"))]
    async fn count_attempt(
        &self,
        tenant: &str,
        keys: &[(&str, u32)],
        window: Duration,
    ) -> Result<Quota, BackendError> {
        let mut call = self.count_attempt.prepare_invoke();
        call.arg(millis(window).max(1));
        for (key, limit) in keys {
            call.key(self.attempt_key(tenant, key)).arg(*limit);
        }
        let mut conn = self.conn();
        Ok(match bounded(call.invoke_async::<u64>(&mut conn)).await? {
            0 => Quota::Allowed,
            ms => Quota::Exceeded {
                retry_after: Duration::from_millis(ms),
            },
        })
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis forgive_attempt", otel.kind = "client", db.system.name = "redis", db.operation.name = "attempt forgive"))]
    async fn forgive_attempt(
        &self,
        tenant: &str,
        key: &str,
        all: bool,
    ) -> Result<(), BackendError> {
        let key = self.attempt_key(tenant, key);
        let mut conn = self.conn();
        if all {
            bounded(redis::cmd("DEL").arg(key).query_async::<i64>(&mut conn)).await?;
        } else {
            let mut call = self.forgive_attempt.prepare_invoke();
            call.key(key);
            bounded(call.invoke_async::<i64>(&mut conn)).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis open_session", otel.kind = "client", db.system.name = "redis", db.operation.name = "session count"))]
    async fn open_session(
        &self,
        key: &SessionKey,
        principal: Option<&str>,
        caps: SessionCaps,
        ttl: Duration,
    ) -> Result<SessionAdmission, BackendError> {
        let now = unix_ms();
        let mut call = self.open_session.prepare_invoke();
        call.key(self.tenant_key("live", &key.tenant))
            .key(self.tenant_key("owners", &key.tenant))
            .arg(now)
            .arg(now.saturating_add(millis(ttl)))
            .arg(&*key.session)
            .arg(principal.unwrap_or(""))
            .arg(caps.per_tenant.unwrap_or(0))
            .arg(caps.per_principal.unwrap_or(0))
            .arg(millis(ttl));
        let mut conn = self.conn();
        match bounded(call.invoke_async::<i64>(&mut conn)).await? {
            0 => Ok(SessionAdmission::Opened),
            1 => Ok(SessionAdmission::TenantFull),
            _ => Ok(SessionAdmission::PrincipalFull),
        }
    }
}

/// Opens a pub/sub connection subscribed to `channels` (bounded like every operation).
async fn subscribed(client: &Client, channels: &[String]) -> Result<PubSub, BackendError> {
    bounded(async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channels).await?;
        Ok(pubsub)
    })
    .await
}

/// Forwards a subscription's messages until its receiver is dropped, reconnecting and
/// resubscribing whenever the connection is lost.
async fn pump(
    client: Client,
    channels: Vec<String>,
    prefix: String,
    mut pubsub: PubSub,
    tx: mpsc::UnboundedSender<BusMessage>,
) {
    loop {
        {
            let mut messages = pubsub.on_message();
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    msg = messages.next() => {
                        let Some(msg) = msg else { break };
                        let topic = msg.get_channel_name();
                        let topic = topic.strip_prefix(&prefix).unwrap_or(topic).to_string();
                        let payload = Bytes::copy_from_slice(msg.get_payload_bytes());
                        if tx.send(BusMessage { topic, payload }).is_err() {
                            return;
                        }
                    }
                }
            }
        }
        tracing::warn!("bus subscription lost its redis connection; resubscribing");
        pubsub = loop {
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(RESUBSCRIBE_DELAY) => {}
            }
            match subscribed(&client, &channels).await {
                Ok(pubsub) => break pubsub,
                Err(e) => tracing::debug!(error = %e, "bus resubscription failed; retrying"),
            }
        };
    }
}

#[async_trait]
impl Bus for RedisCluster {
    #[tracing::instrument(level = "debug", name = "redis", skip_all, fields(otel.name = "redis publish", otel.kind = "client", db.system.name = "redis", db.operation.name = "PUBLISH"))]
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<usize, BackendError> {
        let mut conn = self.conn();
        bounded(
            redis::cmd("PUBLISH")
                .arg(format!("{}{topic}", self.channel_prefix()))
                .arg(payload.as_ref())
                .query_async::<usize>(&mut conn),
        )
        .await
    }

    async fn subscribe(
        &self,
        topics: &[String],
    ) -> Result<mpsc::UnboundedReceiver<BusMessage>, BackendError> {
        let prefix = self.channel_prefix();
        let channels: Vec<String> = topics.iter().map(|t| format!("{prefix}{t}")).collect();
        let (tx, rx) = mpsc::unbounded_channel();
        if channels.is_empty() {
            // Nothing can ever arrive; the receiver ends at once.
            return Ok(rx);
        }
        // Subscribed (and confirmed) before returning: a publish right after this call arrives.
        let pubsub = subscribed(&self.client, &channels).await?;
        tokio::spawn(pump(self.client.clone(), channels, prefix, pubsub, tx));
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cannot_reach_into_other_keys() {
        assert_eq!(segment("acme"), "acme");
        assert_eq!(segment("a:b"), "a%3Ab");
        assert_eq!(segment("a%3Ab"), "a%253Ab");
        assert_ne!(
            format!("{}:{}", segment("a:b"), segment("c")),
            format!("{}:{}", segment("a"), segment("b:c"))
        );
    }

    #[test]
    fn lease_values_round_trip() {
        let lease = Lease {
            replica: "pod|7".into(),
            token: 42,
        };
        assert_eq!(parse_lease(&lease_value(&lease)), Ok(lease));
        assert!(matches!(parse_lease("nope"), Err(BackendError::Corrupt(_))));
        assert!(matches!(parse_lease("r|x"), Err(BackendError::Corrupt(_))));
    }

    #[test]
    fn entry_ids_carry_the_seq() {
        assert_eq!(parse_entry_id("0-17"), Ok(17));
        assert!(parse_entry_id("17-0").is_err());
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::from_secs(2)), 2000);
    }
}

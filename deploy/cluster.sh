#!/usr/bin/env bash
# A local cluster of mcp-harbor replicas behind nginx, on loopback, against the machine's
# PostgreSQL and Redis: what CI's multi-replica stage and an operator trying replicas use.
#
#   deploy/cluster.sh up [--replicas N] [--lb route|hash|round-robin] [--dir RUN]   (defaults 3, route)
#   deploy/cluster.sh kill I        kill -9 replica I (1-based)
#   deploy/cluster.sh restart I     SIGTERM replica I (it drains), wait, start it again
#   deploy/cluster.sh revive        start again every replica that is not running
#   deploy/cluster.sh status | logs I | down
#
# `up` installs Debian's nginx-light when no nginx is on the machine, creates a fresh database
# (dropped by `down`), runs the migrations once, starts the replicas (ids r1..rN, each on a free
# port, a shared Redis key prefix) and nginx, waits until each answers, and writes RUN/cluster.env
# (NGINX_URL, ADMIN_TOKEN, ports and pids). Every wait is bounded. Replica rI starts the session
# ids it creates with `rI.` (cluster.session_route): `--lb route` sends each session's requests to
# that replica (the others as backups), `hash` hashes the whole id, `round-robin` ignores it.
# Sourced (`. deploy/cluster.sh`), it only defines its functions: bench/compare.sh puts its bare
# echoes behind the same nginx (ensure_nginx, write_nginx_conf), the bench scripts use free_port.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${CLUSTER_DIR:-/tmp/mcp-harbor-cluster}
BIN=${MCP_HARBOR_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/mcp-harbor}
PG=${CLUSTER_POSTGRES:-postgres://postgres@127.0.0.1:5432}
REDIS=${CLUSTER_REDIS:-redis://127.0.0.1:6379}
GRACE=${CLUSTER_DRAIN_GRACE_SECS:-8}

say() { printf '[cluster] %s\n' "$*"; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.1 s until it succeeds.
wait_for() {
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what: not within ${secs}s"
    sleep 0.1
  done
}
healthy() { curl -fsS -m 1 "http://127.0.0.1:$1/healthz"; }
load_env() { [ -f "$RUN/cluster.env" ] || die "no cluster in $RUN (run: $0 up)"; # shellcheck disable=SC1091
  . "$RUN/cluster.env"; }

ensure_nginx() {
  NGINX=$(command -v nginx || true)
  [ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
  if [ -z "$NGINX" ]; then
    say "installing nginx-light (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq nginx-light >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null && apt-get install -y -qq nginx-light >/dev/null; }
    # The package starts a default site on :80; this cluster uses its own nginx process.
    service nginx stop >/dev/null 2>&1 || true
    NGINX=/usr/sbin/nginx
  fi
  [ -x "$NGINX" ] || die "nginx is not installed"
}

# start_replica I PORT: starts replica rI on PORT (appends to its log), records its pid.
start_replica() {
  local i=$1 port=$2
  MCP_HARBOR__SERVER__HOST=127.0.0.1 MCP_HARBOR__SERVER__PORT="$port" \
  MCP_HARBOR__SERVER__WORKERS=1 MCP_HARBOR__LOG__FILTER="${CLUSTER_LOG:-info}" \
  MCP_HARBOR__STORAGE__DATABASE_URL="$DATABASE_URL" MCP_HARBOR__STORAGE__MIGRATE_ON_START=false \
  MCP_HARBOR__ADMIN__TOKEN="$ADMIN_TOKEN" MCP_HARBOR__AUTH__SEALING_KEYS="[\"$SEALING_KEY\"]" \
  MCP_HARBOR__EGRESS__ALLOW_PRIVATE="${CLUSTER_LOOPBACK_WEBHOOKS:-true}" \
  MCP_HARBOR__REDIS__URL="$REDIS" MCP_HARBOR__REDIS__KEY_PREFIX="$REDIS_PREFIX" \
  MCP_HARBOR__CLUSTER__REPLICA_ID="r$i" MCP_HARBOR__CLUSTER__ADVERTISE_URL="http://127.0.0.1:$port" \
  MCP_HARBOR__CLUSTER__DRAIN_GRACE_SECS="$GRACE" MCP_HARBOR__CLUSTER__SESSION_ROUTE="r$i" \
    setsid "$BIN" serve >>"$RUN/replica-$i.log" 2>&1 </dev/null &
  echo $! >"$RUN/replica-$i.pid"
}

# write_nginx_conf LB: RUN/nginx.conf balancing over the ports in $PORTS, listening on $NGINX_PORT.
write_nginx_conf() {
  local lb=$1 servers="" port i=0 n
  for port in $PORTS; do
    servers+="    server 127.0.0.1:$port max_fails=0;"$'\n'
  done
  # route: one upstream group per replica, its own server first and the others (in turn after
  # it) as backups, and a map from the session id's route label (`r2.<hex>`) to the group.
  # Requests without a session id (initialize, 2026-07-28 requests, admin, OAuth) and ids of no
  # known route go round-robin over all replicas.
  local routing="" pool="harbor"
  if [ "$lb" = "route" ]; then
    pool="\$harbor_pool"
    local ports=($PORTS) route_map="" k j backup
    n=${#ports[@]}
    for i in $(seq 1 "$n"); do
      route_map+="    ~^r$i\\. harbor_r$i;"$'\n'
    done
    # The Mcp-Session-Id header, or the 2024-11-05 transport's sessionId query parameter.
    routing+="  map \$http_mcp_session_id\$arg_sessionId \$harbor_pool {"$'\n'
    routing+="    default harbor;"$'\n'"$route_map  }"$'\n'
    for i in $(seq 1 "$n"); do
      routing+="  upstream harbor_r$i {"$'\n'
      for k in $(seq 0 $((n - 1))); do
        j=$(( (i - 1 + k) % n )) backup=""
        ((k == 0)) || backup=" backup"
        routing+="    server 127.0.0.1:${ports[$j]} max_fails=0$backup;"$'\n'
      done
      routing+="    keepalive 32;"$'\n'"  }"$'\n'
    done
  fi
  local balance="hash \$harbor_affinity consistent;"
  [ "$lb" = "round-robin" ] && balance="# round-robin: no affinity at all"
  [ "$lb" = "route" ] && balance="# round-robin: requests that name no session's replica"
  mkdir -p "$RUN/nginx-tmp"
  cat >"$RUN/nginx.conf" <<EOF
# Generated by deploy/cluster.sh ($lb). See deploy/README.md.
worker_processes 1;
daemon on;
pid $RUN/nginx.pid;
error_log $RUN/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $RUN/nginx-tmp/body;
  proxy_temp_path $RUN/nginx-tmp/proxy;
  fastcgi_temp_path $RUN/nginx-tmp/fastcgi;
  uwsgi_temp_path $RUN/nginx-tmp/uwsgi;
  scgi_temp_path $RUN/nginx-tmp/scgi;
  # hash: a session's requests by its id; a request without one (initialize) by its own random
  # id, so new sessions spread over the replicas instead of all hashing to the same one.
  map \$http_mcp_session_id \$harbor_affinity {
    ""      \$request_id;
    default \$http_mcp_session_id;
  }
$routing  upstream harbor {
    # Affinity by session is an optimisation only: any replica serves any session. max_fails=0: a
    # replica is never marked down (a 503 from a draining one would otherwise count, and all of
    # them could be "down" during a rolling restart); a refused connection is retried at once.
    $balance
$servers    keepalive 64;
  }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    client_max_body_size 4m;
    location / {
      proxy_pass http://$pool;
      # HTTP/1.1 keep-alive to the replicas; the client's Host reaches them (DNS-rebinding check).
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$http_host;
      # SSE: never buffer, keep long streams open.
      proxy_buffering off;
      proxy_cache off;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
      # Retry on another replica only when the request cannot have been processed: the
      # connection was refused (a dead replica), or a draining replica answered 503 before
      # handling it. A replica that dies after the response started is not retried: the client
      # resumes its stream with Last-Event-ID instead.
      proxy_next_upstream error timeout http_503 non_idempotent;
      proxy_next_upstream_tries 3;
      proxy_connect_timeout 2s;
    }
  }
}
EOF
}

cmd_up() {
  local replicas=3 lb=route
  while [ $# -gt 0 ]; do
    case $1 in
      --replicas) replicas=$2; shift 2 ;;
      --lb) lb=$2; shift 2
        [[ $lb =~ ^(route|hash|round-robin)$ ]] || die "--lb is route, hash or round-robin" ;;
      --dir) RUN=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [ -x "$BIN" ] || die "$BIN is missing (cargo build --release --bins)"
  [ ! -f "$RUN/cluster.env" ] || die "a cluster is already up in $RUN ($0 down first)"
  mkdir -p "$RUN"
  ensure_nginx
  local suffix; suffix=$(python3 -c 'import secrets; print(secrets.token_hex(4))')
  DATABASE="harbor_cluster_$suffix"
  DATABASE_URL="$PG/$DATABASE"
  REDIS_PREFIX="harbor-cluster-$suffix"
  ADMIN_TOKEN="cluster-$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
  # One sealing key for every replica (signing keys sealed by one are opened by the others).
  SEALING_KEY="cluster:$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')"
  say "database $DATABASE, redis prefix $REDIS_PREFIX, $replicas replicas, $lb balancing"
  psql "$PG/postgres" -qAt -c "CREATE DATABASE $DATABASE" >/dev/null
  MCP_HARBOR__STORAGE__DATABASE_URL="$DATABASE_URL" MCP_HARBOR__LOG__FILTER=warn "$BIN" migrate >/dev/null
  PORTS="" PIDS=""
  for i in $(seq 1 "$replicas"); do
    local port; port=$(free_port)
    start_replica "$i" "$port"
    PORTS="$PORTS $port"
  done
  PORTS=${PORTS# }
  NGINX_PORT=$(free_port)
  cat >"$RUN/cluster.env" <<EOF
RUN=$RUN
REPLICAS=$replicas
LB=$lb
PORTS="$PORTS"
NGINX_PORT=$NGINX_PORT
NGINX_URL=http://127.0.0.1:$NGINX_PORT
NGINX=$NGINX
DATABASE=$DATABASE
DATABASE_URL=$DATABASE_URL
REDIS_PREFIX=$REDIS_PREFIX
ADMIN_TOKEN=$ADMIN_TOKEN
SEALING_KEY=$SEALING_KEY
EOF
  local i=0 port
  for port in $PORTS; do
    i=$((i + 1))
    wait_for 20 "replica r$i on :$port healthy" healthy "$port"
  done
  write_nginx_conf "$lb"
  "$NGINX" -t -q -c "$RUN/nginx.conf" -p "$RUN" 2>"$RUN/nginx-test.log" || { cat "$RUN/nginx-test.log"; die "nginx config invalid"; }
  "$NGINX" -c "$RUN/nginx.conf" -p "$RUN"
  wait_for 10 "nginx on :$NGINX_PORT" healthy "$NGINX_PORT"
  say "up: $replicas replicas on ports $PORTS behind nginx at http://127.0.0.1:$NGINX_PORT ($lb)"
}

port_of() { echo "$PORTS" | tr ' ' '\n' | sed -n "${1}p"; }

cmd_kill() {
  load_env
  local i=$1 pid; pid=$(cat "$RUN/replica-$i.pid")
  kill -9 "$pid" 2>/dev/null || true
  say "killed replica r$i (pid $pid) with SIGKILL"
}

cmd_restart() {
  load_env
  local i=$1 port pid; port=$(port_of "$i"); pid=$(cat "$RUN/replica-$i.pid")
  say "restart r$i: SIGTERM (drain, grace ${GRACE}s)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + GRACE + 10))
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || { kill -9 "$pid" 2>/dev/null || true; die "r$i did not exit within $((GRACE + 10))s"; }
    sleep 0.1
  done
  start_replica "$i" "$port"
  wait_for 20 "replica r$i on :$port healthy again" healthy "$port"
  say "restart r$i: serving again on :$port"
}

cmd_revive() {
  load_env
  local i=0 port
  for port in $PORTS; do
    i=$((i + 1))
    if ! kill -0 "$(cat "$RUN/replica-$i.pid")" 2>/dev/null; then
      start_replica "$i" "$port"
      wait_for 20 "replica r$i on :$port healthy again" healthy "$port"
      say "revived r$i on :$port"
    fi
  done
}

cmd_status() {
  load_env
  local i=0 port
  for port in $PORTS; do
    i=$((i + 1))
    if healthy "$port" >/dev/null 2>&1; then say "r$i :$port up"; else say "r$i :$port down"; fi
  done
  say "nginx $NGINX_URL ($LB)"
}

cmd_down() {
  [ -f "$RUN/cluster.env" ] || { say "nothing to stop in $RUN"; return 0; }
  load_env
  [ -f "$RUN/nginx.pid" ] && kill "$(cat "$RUN/nginx.pid")" 2>/dev/null || true
  local f
  for f in "$RUN"/replica-*.pid; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  sleep 0.2
  psql "$PG/postgres" -qAt -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -u "$REDIS" --scan --pattern "$REDIS_PREFIX:*" 2>/dev/null | xargs -r -n 500 redis-cli -u "$REDIS" del >/dev/null 2>&1 || true
  rm -f "$RUN/cluster.env"
  say "down: replicas and nginx stopped, database $DATABASE dropped, redis keys $REDIS_PREFIX:* deleted"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  kill) cmd_kill "${2:?replica index}" ;;
  restart) cmd_restart "${2:?replica index}" ;;
  revive) cmd_revive ;;
  status) cmd_status ;;
  logs) load_env; cat "$RUN/replica-${2:?replica index}.log" ;;
  down) cmd_down ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac

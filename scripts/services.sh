#!/usr/bin/env bash
# Makes sure the Redis and PostgreSQL servers the integration tests need are running.
#
#   bash scripts/services.sh
#
# Idempotent: safe to run repeatedly. On a Debian/Ubuntu machine where redis-server or
# PostgreSQL is missing it installs them with apt-get (needs root). When REDIS_URL or
# DATABASE_URL is set and points somewhere other than the local default, that service is
# left alone (only checked for reachability where a client is available).
#
# Users who prefer containers can run `docker compose up -d` instead (docker-compose.yml).
set -euo pipefail

DEFAULT_REDIS_URL="redis://127.0.0.1:6379"
DEFAULT_DATABASE_URL="postgresql://cron:cron@127.0.0.1:5432/distributed_cron"
REDIS_URL="${REDIS_URL:-$DEFAULT_REDIS_URL}"
DATABASE_URL="${DATABASE_URL:-$DEFAULT_DATABASE_URL}"
export REDIS_URL DATABASE_URL
WAIT_SECONDS="${SERVICES_WAIT_SECONDS:-60}"

log() { echo "[services] $*"; }
die() { echo "[services] ERROR: $*" >&2; exit 1; }

# A URL is "local default" when it targets 127.0.0.1/localhost on the default port.
is_local_redis() {
  [[ "$REDIS_URL" =~ ^redis://([^@/]*@)?(127\.0\.0\.1|localhost)(:6379)?/?[0-9]*$ ]]
}
is_local_postgres() {
  [[ "$DATABASE_URL" =~ ^postgres(ql)?://cron:cron@(127\.0\.0\.1|localhost)(:5432)?/distributed_cron(\?.*)?$ ]]
}

as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    die "need root (or sudo) to run: $*"
  fi
}

as_postgres() {
  if [[ "$(id -un)" == "postgres" ]]; then "$@"
  elif command -v runuser >/dev/null 2>&1 && [[ "$(id -u)" -eq 0 ]]; then runuser -u postgres -- "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -u postgres "$@"
  else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
  fi
}

wait_until() { # wait_until <description> <command...>
  local what="$1"; shift
  local deadline=$((SECONDS + WAIT_SECONDS))
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then die "$what did not come up within ${WAIT_SECONDS}s"; fi
    sleep 0.5
  done
}

want_redis=0; want_postgres=0
if is_local_redis; then want_redis=1; else log "REDIS_URL points elsewhere ($REDIS_URL): not starting a local Redis"; fi
if is_local_postgres; then want_postgres=1; else log "DATABASE_URL points elsewhere: not starting a local PostgreSQL"; fi

# --- install what is missing (one apt-get update at most) -----------------------------
packages=()
if (( want_redis )) && ! command -v redis-server >/dev/null 2>&1; then packages+=(redis-server); fi
pg_server_installed() { compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && command -v pg_lsclusters >/dev/null 2>&1; }
if (( want_postgres )) && ! pg_server_installed; then packages+=(postgresql); fi
if (( ${#packages[@]} > 0 )); then
  command -v apt-get >/dev/null 2>&1 || die "missing ${packages[*]} and no apt-get; install them or use docker-compose.yml"
  log "installing ${packages[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # The postgresql package creates and starts a cluster; policy-rc.d may forbid the start,
  # which is fine: it is started below.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

# --- Redis -----------------------------------------------------------------------------
if (( want_redis )); then
  if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
    log "redis: already answering on 127.0.0.1:6379"
  else
    log "redis: starting redis-server on 127.0.0.1:6379"
    redis-server --daemonize yes --port 6379 --bind 127.0.0.1 --save '' --appendonly no \
      --logfile /tmp/distributed-cron-redis.log >/dev/null
    wait_until "redis" sh -c 'redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG'
    log "redis: up"
  fi
fi

# --- PostgreSQL --------------------------------------------------------------------------
pg_ready() { pg_isready -q -h 127.0.0.1 -p 5432; }

if (( want_postgres )); then
  if pg_ready; then
    log "postgres: already accepting connections on 127.0.0.1:5432"
  else
    # Pick the newest installed cluster listening on 5432 (do not assume a version).
    cluster="$(pg_lsclusters -h 2>/dev/null | awk '$3 == 5432 { print $1 " " $2 }' | sort -V | tail -n 1)"
    if [[ -z "$cluster" ]]; then
      version="$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)"
      [[ -n "$version" ]] || die "PostgreSQL is installed but no server version found in /usr/lib/postgresql"
      log "postgres: creating cluster $version/main"
      as_root pg_createcluster "$version" main --port 5432 >/dev/null
      cluster="$version main"
    fi
    read -r pg_version pg_name <<<"$cluster"
    log "postgres: starting cluster $pg_version/$pg_name"
    as_root pg_ctlcluster "$pg_version" "$pg_name" start
    wait_until "postgres" pg_ready
    log "postgres: up"
  fi

  # Role and database for the tests (matches docker-compose.yml and .env.example).
  psql_admin() { as_postgres psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
  if [[ "$(psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'cron'")" != "1" ]]; then
    log "postgres: creating role cron"
    psql_admin -c "CREATE ROLE cron LOGIN CREATEDB PASSWORD 'cron'"
  fi
  if [[ "$(psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname = 'distributed_cron'")" != "1" ]]; then
    log "postgres: creating database distributed_cron"
    psql_admin -c "CREATE DATABASE distributed_cron OWNER cron"
  fi
  # Password login over TCP must work with the default pg_hba.conf (scram/md5 for 127.0.0.1).
  cron_login() { PGPASSWORD=cron psql -X -h 127.0.0.1 -p 5432 -U cron -d distributed_cron -tAc 'SELECT 1' >/dev/null 2>&1; }
  if ! cron_login; then
    log "postgres: resetting password of role cron"
    psql_admin -c "ALTER ROLE cron LOGIN CREATEDB PASSWORD 'cron'"
    wait_until "postgres login as cron" cron_login
  fi
  # The suites start many app instances at once, each with its pool (the bench and the chaos
  # runs five processes with warm pools): the default 100 connections is too few on one machine.
  if [[ "$(psql_admin -tAc 'SHOW max_connections')" -lt 300 ]]; then
    cluster="$(pg_lsclusters -h 2>/dev/null | awk '$3 == 5432 { print $1 " " $2 }' | sort -V | tail -n 1)"
    if [[ -n "$cluster" ]]; then
      read -r pg_version pg_name <<<"$cluster"
      log "postgres: raising max_connections to 300 (restarts cluster $pg_version/$pg_name)"
      psql_admin -c "ALTER SYSTEM SET max_connections = 300"
      as_root pg_ctlcluster "$pg_version" "$pg_name" restart
      wait_until "postgres" pg_ready
      wait_until "postgres login as cron" cron_login
    else
      log "postgres: max_connections is below 300 on a cluster this script did not find; some suites may run out of connections"
    fi
  fi
  log "postgres: database distributed_cron ready"
fi

# --- services we did not start: wait until they answer, when a client is at hand ------------
if (( ! want_redis )) && command -v redis-cli >/dev/null 2>&1; then
  wait_until "redis at REDIS_URL" sh -c 'redis-cli -u "$REDIS_URL" ping | grep -q PONG'
  log "redis: REDIS_URL answers"
fi
if (( ! want_postgres )) && command -v psql >/dev/null 2>&1; then
  wait_until "postgres at DATABASE_URL" psql -X "$DATABASE_URL" -tAc 'SELECT 1'
  log "postgres: DATABASE_URL answers"
fi

log "ready"

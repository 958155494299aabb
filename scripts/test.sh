#!/usr/bin/env bash
# The whole test suite against PostgreSQL and Redis at their usual local addresses
# (override with DATABASE_URL, REDIS_URL, CELERY_BROKER_URL). Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh dev || exit 1
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/computepool}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
export CELERY_BROKER_URL="${CELERY_BROKER_URL:-redis://127.0.0.1:6379/1}"
export SECRET_KEY="${SECRET_KEY:-test-only-secret-key}"
export DEBUG="${DEBUG:-0}"
# PostgreSQL-only tests must run, never skip.
export REQUIRE_POSTGRES=1
# Where a Docker engine answers, the sandbox tests must run too (.ci/run always starts one).
if docker info >/dev/null 2>&1; then export REQUIRE_DOCKER="${REQUIRE_DOCKER:-1}"; fi
.venv/bin/pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests: that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"

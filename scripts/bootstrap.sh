#!/usr/bin/env bash
# Create .venv and install the pinned requirements; a no-op when nothing changed.
#   bash scripts/bootstrap.sh [base|dev]
#   base: hub, agent, its inference engine and a private Redis, for the demo; dev: + test tools
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-dev}"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
if [ "$profile" = dev ]; then
  files=(requirements/dev.txt)
else
  files=(requirements/base.txt requirements/agent.txt requirements/inference.txt requirements/local.txt)
fi
stamp=".venv/.installed-$profile"
digest=$(cat "${files[@]}" requirements/*.txt pyproject.toml client/pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
  exit 0
fi
echo "bootstrap: installing ${files[*]} (first run takes a minute or two)"
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
args=()
for f in "${files[@]}"; do args+=(-r "$f"); done
.venv/bin/python -m pip install --quiet --disable-pip-version-check "${args[@]}"
# The agent's console script (computepool-agent), from this checkout.
if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e . \
    >.venv/agent-install.log 2>&1; then
  cat .venv/agent-install.log >&2
  exit 1
fi
# The submitters' client (the `computepool` command, docs/client.md), from this checkout; its
# requirements (requests, PyYAML) are pinned in the files above.
if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e client \
    >.venv/client-install.log 2>&1; then
  cat .venv/client-install.log >&2
  exit 1
fi
echo "$digest" > "$stamp"

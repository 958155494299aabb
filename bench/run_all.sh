#!/usr/bin/env bash
# Run every benchmark in turn (about 25 minutes on the 2-core machine) and keep each one's output
# under var/bench-results/. Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust) and Redis
# at 127.0.0.1:6379; see bench/README.md. Pass --quick for small sizes (about 6 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=var/bench-results
mkdir -p "$OUT"
if [[ "${1:-}" == "--quick" ]]; then
  HOT=(--rounds 2 --seconds 4)
  THR=(--repeats 2 --seconds 6 --in-process 100)
  DIS=(--jobs 100)
  SCA=(--max-tasks 100000 --max-nodes 10000 --samples 100)
  FLE=(--steps 1000,2500,5000 --interval 10 --silent 10000 --reaps 1)
  LED=(--samples 100 --events 100000 --cashouts 10000)
  FLR=(--nodes 10000 --rounds 1)
  REL=(--requests 10 --streams 50 --stream-tokens 20 --ramp 2)
  HW=(--runs 3)
  PAG=(--jobs 10000 --nodes 2000 --agreed 10000 --samples 50)
  TTR=(--jobs 10)
else
  HOT=(--profile --breakdown)
  THR=(--profile)
  DIS=()
  SCA=()
  FLE=(--reaper-profile)
  LED=(--profile)
  FLR=()
  REL=()
  HW=()
  PAG=()
  TTR=()
fi
run() {
  local name=$1
  shift
  echo "### $name: $PY -m bench.$name $*"
  timeout 1800 "$PY" -m "bench.$name" "$@" 2>&1 | tee "$OUT/$name.txt"
}
run hotpath "${HOT[@]}"
run throughput "${THR[@]}"
run dispatch "${DIS[@]}"
run scale "${SCA[@]}"
run fleet "${FLE[@]}"
run reaper_floor "${FLR[@]}"
run ledger_bench "${LED[@]}"
run relay "${REL[@]}"
run hardware "${HW[@]}"
run pages "${PAG[@]}"
run time_to_result "${TTR[@]}"

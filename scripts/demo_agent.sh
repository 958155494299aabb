# Sourced by scripts/demo.sh once the hub, worker and beat are up: a local agent registers and
# runs; alice is topped up and submits sample jobs; they complete and the money is shown.
AGENT_CONFIG="$VAR/agent.json"
AGENT=("$PY" -m agent --config "$AGENT_CONFIG")

step "A local agent registers with bob's operator key and starts"
rm -f "$AGENT_CONFIG"
"${AGENT[@]}" register --hub "$HUB" --token "$OPERATOR_KEY" --name demo-rig --region IN
"$PY" - "$AGENT_CONFIG" "$VAR/agent-work" <<'PY'
import json, sys
path, work = sys.argv[1], sys.argv[2]
config = json.load(open(path))
config.update(work_dir=work, slots=2, models_dir=work + "-models")
json.dump(config, open(path, "w"), indent=2)
PY
sandbox_flag=(--sandbox auto)
where="in its sandbox"
# available_sandboxes() always ends with "none" (no isolation): a real sandbox is any other.
if ! "$PY" -c 'import sys; from agent.sandbox import available_sandboxes as a; sys.exit(0 if a() != ["none"] else 1)'; then
  echo "No Docker engine or bubblewrap here: the demo agent runs jobs WITHOUT a sandbox."
  sandbox_flag=(--allow-unsandboxed)
  where="with no sandbox"
elif docker info >/dev/null 2>&1; then
  bash scripts/build_sandbox_images.sh busybox >/dev/null
fi
start agent "${AGENT[@]}" run "${sandbox_flag[@]}"
for _ in $(seq 60); do
  state=$("$PY" scripts/demo_setup.py node_state)
  [ "$state" = online ] && break
  sleep 0.5
done
echo "node demo-rig is $state"

step "The hub benchmarks the new node; the agent measures its machine $where"
shown=""
for _ in $(seq 120); do
  shown=$("$PY" scripts/demo_setup.py benchmark)
  [ -n "$shown" ] && break
  sleep 0.5
done
echo "${shown:-no benchmark reported within a minute; see $LOG/agent.log}"

step "Finance tops up alice with 1,000 credits"
manage grant_credits alice 1000 --key "demo-topup-$(date +%s)" --reference "demo top-up"

step "alice submits sample jobs (one with 3 slices)"
"$PY" scripts/demo_setup.py submit "$HUB" "$SUBMITTER_KEY"

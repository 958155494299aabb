#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine, and that bubblewrap (the fallback sandbox)
# and gVisor's runsc are installed. Idempotent: a second run changes nothing.
#
#   bash scripts/ensure_docker.sh            # engine + bubblewrap + gVisor when it works here
#   SKIP_GVISOR=1 bash scripts/ensure_docker.sh
#
# An engine this script starts logs to var/dockerd.log and leaves its PID in var/dockerd.pid;
# stop it with: kill "$(cat var/dockerd.pid)".
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VAR="$ROOT/var"
DAEMON_JSON=/etc/docker/daemon.json
mkdir -p "$VAR"

say() { echo "ensure_docker: $*"; }
die() { echo "ensure_docker: ERROR: $*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

APT_UPDATED=0
apt_install() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        as_root apt-get update -qq || return 1
        APT_UPDATED=1
    fi
    say "installing $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" \
        >/dev/null
}

engine_answers() { docker info >/dev/null 2>&1; }

wait_for_engine() {
    local i
    for i in $(seq 1 60); do
        engine_answers && return 0
        sleep 0.5
    done
    return 1
}

# The PID of the engine this script started, if that engine still runs (a PID file can
# outlive its process, and the number can be reused by another program).
own_engine_pid() {
    local pid
    pid="$(cat "$VAR/dockerd.pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] && echo "$pid"
}

# Starts the engine this script owns, unless one already answers.
start_engine() {
    engine_answers && return 0
    if own_engine_pid >/dev/null; then
        say "dockerd (pid $(own_engine_pid)) is starting; waiting"
    else
        [ "$(id -u)" -eq 0 ] || die "no engine answers, and starting one takes root (run with sudo)"
        say "starting dockerd (log: var/dockerd.log)"
        # No iptables and no bridge: sandboxed jobs have no network anyway, and many hosts
        # (containers, VMs without netfilter) cannot set either up.
        nohup dockerd --iptables=false --bridge=none >>"$VAR/dockerd.log" 2>&1 &
        echo $! >"$VAR/dockerd.pid"
    fi
    wait_for_engine || die "dockerd did not answer 'docker info' within 30 s; see $VAR/dockerd.log"
}

# Only the engine this script started can be restarted to pick up a new daemon.json.
restart_own_engine() {
    local pid
    pid="$(own_engine_pid)" || return 1
    say "restarting dockerd (pid $pid) to load $DAEMON_JSON"
    kill "$pid"
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    kill -0 "$pid" 2>/dev/null && die "dockerd (pid $pid) did not stop"
    rm -f "$VAR/dockerd.pid"
    start_engine
}

runsc_registered() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

# Adds runsc to the engine's config file (kept if present). gVisor must run with
# --network=none: without it runsc fails under Docker's "none" network and leaks processes.
register_runsc() {
    as_root mkdir -p "$(dirname "$DAEMON_JSON")"
    as_root python3 - "$DAEMON_JSON" "$(command -v runsc)" <<'PY'
import json, pathlib, sys
path, runsc = pathlib.Path(sys.argv[1]), sys.argv[2]
config = json.loads(path.read_text()) if path.exists() and path.read_text().strip() else {}
wanted = {"path": runsc, "runtimeArgs": ["--network=none"]}
if config.get("runtimes", {}).get("runsc") != wanted:
    config.setdefault("runtimes", {})["runsc"] = wanted
    path.write_text(json.dumps(config, indent=2) + "\n")
PY
}

# gVisor is a bonus: without it jobs run under runc, so nothing here is fatal. Done before the
# engine starts, so that a fresh engine reads the runtime at once.
prepare_gvisor() {
    if ! command -v runsc >/dev/null 2>&1 && ! apt_install runsc; then
        say "gVisor: could not install runsc; continuing without it"
        return 0
    fi
    # Some kernels (nested VMs, no ptrace/KVM) cannot host it: try one sandbox first.
    if ! as_root timeout 60 runsc --network=none do /bin/true >/dev/null 2>&1; then
        say "gVisor: runsc cannot start a sandbox on this machine; not registering it"
        return 0
    fi
    register_runsc
}

# An engine that was already running has not read the new runtime yet.
load_gvisor() {
    command -v runsc >/dev/null 2>&1 && grep -q '"runsc"' "$DAEMON_JSON" 2>/dev/null || return 0
    runsc_registered && return 0
    restart_own_engine && return 0
    say "runsc is registered in $DAEMON_JSON; restart the running engine to enable it"
}

command -v dockerd >/dev/null 2>&1 || apt_install docker.io || die "could not install docker.io"
command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap || die "could not install bubblewrap"
command -v docker >/dev/null 2>&1 || die "docker client not found after installing docker.io"

[ "${SKIP_GVISOR:-0}" = "1" ] || prepare_gvisor
start_engine
[ "${SKIP_GVISOR:-0}" = "1" ] || load_gvisor

say "engine ready: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"
if runsc_registered; then say "gVisor runtime: runsc"; else say "gVisor runtime: not available"; fi

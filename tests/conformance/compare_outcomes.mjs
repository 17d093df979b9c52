// Why: run-compare.sh runs one suite line twice, against a server directly and through `manifold
// serve`; this reads both runs' per-scenario results (the suite's `-o DIR` checks.json files, and its
// printed `✓/✗ scenario: N passed, M failed` summary for a scenario that left no file) and says which
// scenarios got worse through the gateway, with the checks that failed there.
//
// usage: node compare_outcomes.mjs LABEL DIRECT_DIR DIRECT_LOG GATEWAY_DIR GATEWAY_LOG COUNTS_FILE
// Prints the two totals, every worse scenario and, as notes, every scenario that passed with fewer
// checks or failed more checks through the gateway; writes `FINE WORSE` (comparison counts) to COUNTS_FILE.

import { readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';

const [label, directDir, directLog, gatewayDir, gatewayLog, countsFile] = process.argv.slice(2);

// The suite names each result directory `server-<scenario>-<ISO time with : and . as ->`.
const RESULT_DIR = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;
const SUMMARY_LINE = /^[✓✗] (\S+): (\d+) passed, (\d+) failed$/;

// scenario -> { passed, failed, warnings, failures: [text] }; a scenario fails on any FAILURE or WARNING.
function outcomes(dir, log) {
    const byScenario = new Map();
    const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
    for (const line of text.split('\n')) {
        const m = SUMMARY_LINE.exec(line.trim());
        if (m) byScenario.set(m[1], { passed: Number(m[2]), failed: Number(m[3]), warnings: 0, failures: [] });
    }
    for (const entry of existsSync(dir) ? readdirSync(dir) : []) {
        const m = RESULT_DIR.exec(entry);
        const file = path.join(dir, entry, 'checks.json');
        if (!m || !existsSync(file)) continue;
        let checks;
        try {
            checks = JSON.parse(readFileSync(file, 'utf8'));
        } catch {
            continue;
        }
        const bad = checks.filter(c => c.status === 'FAILURE' || c.status === 'WARNING');
        byScenario.set(m[1], {
            passed: checks.filter(c => c.status === 'SUCCESS').length,
            failed: checks.filter(c => c.status === 'FAILURE').length,
            warnings: checks.filter(c => c.status === 'WARNING').length,
            failures: bad.map(c => `${c.status} ${c.id}: ${c.errorMessage ?? c.details?.message ?? c.description ?? ''}`)
        });
    }
    return byScenario;
}

const ok = o => o !== undefined && o.failed === 0 && o.warnings === 0;
function totals(byScenario) {
    let passed = 0, failed = 0, good = 0;
    for (const o of byScenario.values()) {
        passed += o.passed;
        failed += o.failed;
        if (ok(o)) good += 1;
    }
    return `${passed} passed, ${failed} failed (${good} of ${byScenario.size} scenarios pass)`;
}

const direct = outcomes(directDir, directLog);
const gateway = outcomes(gatewayDir, gatewayLog);
console.log(`  ${label}: direct ${totals(direct)}; through the gateway ${totals(gateway)}`);

let fine = 0, worse = 0;
for (const [scenario, d] of direct) {
    const g = gateway.get(scenario);
    if (!ok(d) || ok(g)) {
        fine += 1;
        // Not worse by the suite's verdict, but checks that ran directly were skipped through the gateway.
        if (ok(d) && g && g.passed < d.passed) {
            console.log(`    note ${scenario}: passes both ways, with ${d.passed} checks directly and ${g.passed} through the gateway`);
        }
        if (!ok(d) && g && !ok(g) && g.failed > d.failed) {
            console.log(`    note ${scenario}: fails both ways, with ${d.failed} failed checks directly and ${g.failed} through the gateway`);
            const checkId = failure => failure.split(':')[0];
            const before = new Set(d.failures.map(checkId));
            for (const failure of g.failures.filter(f => !before.has(checkId(f))).slice(0, 6)) {
                console.log(`      ${failure.replace(/\s+/g, ' ').slice(0, 400)}`);
            }
        }
        continue;
    }
    worse += 1;
    const seen = g ? `${g.passed} passed, ${g.failed} failed, ${g.warnings} warnings` : 'not run';
    console.log(`    WORSE ${scenario}: passes directly (${d.passed} checks), through the gateway ${seen}`);
    for (const failure of g ? g.failures.slice(0, 6) : []) console.log(`      ${failure.replace(/\s+/g, ' ').slice(0, 400)}`);
}
if (direct.size === 0) {
    worse += 1;
    console.log(`    no scenario results from the direct run; see ${directLog}`);
}
writeFileSync(countsFile, `${fine} ${worse}\n`);

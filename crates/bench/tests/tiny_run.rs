//! Why: the benchmark is only worth its figures if every call it times really succeeded and its
//! report has the shape readers and scripts rely on. These runs are tiny (20 calls, direct and
//! Manifold only, debug binaries), check structure and success, and never judge a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::workspace_binary;
use serde_json::Value;

/// Only a guard against a hang; a tiny run takes seconds.
const HANG_GUARD: Duration = Duration::from_secs(300);

fn scratch_dir(name: &str) -> PathBuf {
    manifold_testkit::fresh_dir(&format!("bench-test-{name}")).unwrap()
}

struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs manifold-bench with `args`, stdout and stderr into files (no pipe can fill up).
fn bench(dir: &Path, args: &[&str]) -> Outcome {
    bench_with_env(dir, args, &[])
}

fn bench_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let stdout_path = dir.join("stdout.txt");
    let stderr_path = dir.join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_manifold-bench"))
        .args(args)
        .envs(env.iter().copied())
        .env("MANIFOLD_BENCH_CACHE", dir.join("cache"))
        // Logs the tool keeps after a failed row land here and go with the scratch directory.
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "manifold-bench hung; stderr so far:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Outcome {
        status,
        stdout: std::fs::read_to_string(stdout_path).unwrap(),
        stderr: std::fs::read_to_string(stderr_path).unwrap(),
    }
}

fn binaries() -> (String, String) {
    let manifold = workspace_binary("manifold", "manifold").unwrap();
    let echo = workspace_binary("manifold-echo", "manifold-echo").unwrap();
    (
        manifold.to_string_lossy().into_owned(),
        echo.to_string_lossy().into_owned(),
    )
}

fn rows<'a>(report: &'a Value, scenario: &str) -> &'a Vec<Value> {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == scenario)
        .unwrap_or_else(|| panic!("no scenario {scenario} in {report}"))["rows"]
        .as_array()
        .unwrap()
}

#[test]
fn a_tiny_latency_run_reports_every_call_of_direct_and_manifold_as_succeeded() {
    let dir = scratch_dir("latency");
    let (manifold, echo) = binaries();
    let json_path = dir.join("report.json");
    let json_arg = json_path.to_string_lossy().into_owned();
    let out = bench(
        &dir,
        &[
            "--quick",
            "--only",
            "latency",
            "--contenders",
            "direct,manifold",
            "--calls",
            "20",
            "--manifold",
            &manifold,
            "--echo",
            &echo,
            "--no-setup",
            "--json",
            &json_arg,
        ],
    );
    assert!(
        out.status.success(),
        "exit {:?}; stderr:\n{}",
        out.status,
        out.stderr
    );

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["mode"], "quick");
    assert!(report["machine"]["cpus"].as_u64().unwrap() >= 1);
    let ids: Vec<&str> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["latency", "targets"],
        "only the scenario asked for, then the goals"
    );

    let latency = rows(&report, "latency");
    let cases = [
        "http->stdio small",
        "http->stdio 32KiB",
        "http->http small",
        "http->http 32KiB",
    ];
    assert_eq!(latency.len(), cases.len() * 2, "{latency:#?}");
    for case in cases {
        for contender in ["direct", "manifold"] {
            let row = latency
                .iter()
                .find(|r| r["case"] == case && r["contender"] == contender)
                .unwrap_or_else(|| panic!("no row {case} / {contender}"));
            assert_eq!(row["status"], "ok", "{row}");
            assert_eq!(row["values"]["calls"], 20, "{row}");
            assert_eq!(row["values"]["errors"], 0, "{row}");
            let p50 = row["values"]["p50_us"].as_f64().unwrap();
            let p99 = row["values"]["p99_us"].as_f64().unwrap();
            assert!(p50 > 0.0 && p99 >= p50, "{row}");
            // Added latency is a comparison with direct: only other contenders have it.
            assert_eq!(
                row["values"]["added_p50_us"].is_f64(),
                contender == "manifold",
                "{row}"
            );
        }
    }

    let goals = rows(&report, "targets");
    for case in [
        "added p50 over direct (http->stdio small)",
        "added p50 over direct (http->http small)",
    ] {
        let goal = goals.iter().find(|r| r["case"] == case).unwrap();
        let verdict = goal["values"]["verdict"].as_str().unwrap();
        assert!(verdict == "met" || verdict == "not met", "{goal}");
    }
    let unmeasured = goals
        .iter()
        .find(|r| r["case"] == "tools/list over 10,000 tools, p50 (all pages)")
        .unwrap();
    assert_eq!(unmeasured["values"]["verdict"], "not measured");

    // The table on stdout carries the same rows.
    assert!(out.stdout.contains("== 1. Latency"), "{}", out.stdout);
    assert!(out.stdout.contains("http->http 32KiB"), "{}", out.stdout);
    assert!(out.stdout.contains("== Targets"), "{}", out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_contender_that_cannot_start_is_a_failed_row_and_the_others_still_run() {
    let dir = scratch_dir("failing");
    let (_, echo) = binaries();
    let json_path = dir.join("report.json");
    let json_arg = json_path.to_string_lossy().into_owned();
    // `false` exits at once without printing a URL, as a broken gateway would.
    let out = bench(
        &dir,
        &[
            "--quick",
            "--only",
            "latency",
            "--contenders",
            "direct,manifold",
            "--calls",
            "5",
            "--manifold",
            "/bin/false",
            "--echo",
            &echo,
            "--no-setup",
            "--json",
            &json_arg,
        ],
    );
    assert!(
        out.status.success(),
        "exit {:?}; stderr:\n{}",
        out.status,
        out.stderr
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    for row in rows(&report, "latency") {
        if row["contender"] == "manifold" {
            assert_eq!(row["status"], "failed", "{row}");
            assert!(
                row["note"].as_str().unwrap().contains("did not start"),
                "{row}"
            );
        } else {
            assert_eq!(row["status"], "ok", "{row}");
            assert_eq!(row["values"]["calls"], 5, "{row}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_contender_is_refused_with_the_names_that_exist() {
    let dir = scratch_dir("usage");
    let out = bench(&dir, &["--contenders", "nginx"]);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("mcp-proxy-npm"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The audit scenario's variants, in table order.
const AUDIT_VARIANTS: [&str; 4] = [
    "off",
    "sqlite best_effort",
    "sqlite required",
    "postgres best_effort",
];

/// A one-round quick audit run of the debug binaries; returns the report and the outcome.
fn tiny_audit_run(dir: &Path, env: &[(&str, &str)]) -> (Value, Outcome) {
    let (manifold, echo) = binaries();
    let json_path = dir.join("report.json");
    let json_arg = json_path.to_string_lossy().into_owned();
    let out = bench_with_env(
        dir,
        &[
            "--quick",
            "--only",
            "audit",
            "--contenders",
            "manifold",
            "--rounds",
            "1",
            "--manifold",
            &manifold,
            "--echo",
            &echo,
            "--no-setup",
            "--json",
            &json_arg,
        ],
        env,
    );
    assert!(
        out.status.success(),
        "exit {:?}; stderr:\n{}",
        out.status,
        out.stderr
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    (report, out)
}

#[test]
fn a_tiny_audit_run_measures_every_variant_against_off_with_every_call_on_the_record() {
    let dir = scratch_dir("audit");
    let (report, out) = tiny_audit_run(&dir, &[]);
    let audit = rows(&report, "audit");
    let cases: Vec<&str> = audit.iter().map(|r| r["case"].as_str().unwrap()).collect();
    assert_eq!(cases, AUDIT_VARIANTS, "{audit:#?}");
    for row in audit {
        let variant = row["case"].as_str().unwrap();
        let values = &row["values"];
        assert_eq!(row["status"], "ok", "{row}");
        assert_eq!(values["errors"], 0, "{row}");
        assert!(values["calls"].as_u64().unwrap() > 0, "{row}");
        assert!(values["calls_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(values["cpu_us_per_call"].as_f64().unwrap() > 0.0, "{row}");
        // Only the variants with a trail are compared with off.
        assert_eq!(
            values["calls_per_s_vs_off_pct"].is_f64(),
            variant != "off",
            "{row}"
        );
        assert_eq!(values["cpu_vs_off_pct"].is_f64(), variant != "off", "{row}");
        // The store's own CPU is counted where the store is a server of its own.
        assert_eq!(
            values["store_cpu_us_per_call"].is_f64(),
            variant == "postgres best_effort",
            "{row}"
        );
        let written = values["rows_written"].as_f64().unwrap();
        if variant == "off" {
            assert_eq!(written, 0.0, "the trail is off: {row}");
        } else {
            // One row per tools/call answered, timed or not, and none dropped.
            assert_eq!(written, values["calls_served"].as_f64().unwrap(), "{row}");
            assert_eq!(values["rows_dropped"].as_f64().unwrap(), 0.0, "{row}");
            assert_eq!(values["rows_per_call"].as_f64().unwrap(), 1.0, "{row}");
        }
    }
    let goal = rows(&report, "targets")
        .iter()
        .find(|r| {
            r["case"]
                .as_str()
                .unwrap()
                .starts_with("audit trail's throughput cost at c=64")
        })
        .unwrap();
    let verdict = goal["values"]["verdict"].as_str().unwrap();
    assert!(verdict == "met" || verdict == "not met", "{goal}");
    assert!(out.stdout.contains("== 8. Audit trail"), "{}", out.stdout);
    assert!(
        out.stdout.contains("postgres best_effort"),
        "{}",
        out.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_store_that_cannot_start_fails_its_variant_and_the_others_still_run() {
    let dir = scratch_dir("audit-no-postgres");
    let missing = dir.join("no-postgres-here");
    let missing = missing.to_string_lossy().into_owned();
    let (report, _) = tiny_audit_run(&dir, &[("MANIFOLD_POSTGRES_BIN", &missing)]);
    for row in rows(&report, "audit") {
        if row["case"] == "postgres best_effort" {
            assert_eq!(row["status"], "failed", "{row}");
            let note = row["note"].as_str().unwrap();
            assert!(
                note.contains("initdb") && note.contains("MANIFOLD_POSTGRES_BIN"),
                "{row}"
            );
        } else {
            assert_eq!(row["status"], "ok", "{row}");
            assert_eq!(row["values"]["errors"], 0, "{row}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

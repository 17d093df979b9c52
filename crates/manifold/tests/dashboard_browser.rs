//! Why: the operators' dashboard (`/ui` of `manifold serve`) is for people at a browser, so it is
//! proven in one: headless Chromium (Debian's package) driven by playwright-core through
//! tests/browser/dashboard.mjs. This test starts the real gateway with authentication on, real
//! upstreams (the Python SDK peer, and tests/browser/peer_server.py, which can be held down and
//! whose tool carries HTML in its description and result), an ask rule holding two tools for an
//! admin's answer and an authored tool with two versions, then runs the script, which signs in,
//! watches a killed server go down and come back live, finds tools and calls them from the
//! playground, answers held calls that real clients (`manifold call`) wait on, disables, enables
//! and rolls back the authored tool, creates and revokes a key, checks and applies a configuration
//! change, and is refused every forged or stale request (no CSRF token, a foreign Origin, a revoked
//! key's session, no session, a non-admin key). Each step prints one JSON line; this test requires
//! every step to have reported success. `MANIFOLD_SCREENSHOTS=DIR` (scripts/dashboard-screenshots)
//! makes the script save a PNG of each page there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use manifold_testkit::{
    ChildGuard, GatewayProcess, RawHttp, ServeCommand, fresh_dir, node, peers_dir, python,
    workspace_root,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Where scripts/test points this test at tests/browser (which holds the pinned playwright-core).
const BROWSER_DIR_ENV: &str = "MANIFOLD_BROWSER_DIR";
/// Where scripts/test points this test at the Chromium that scripts/install-peers installed.
const CHROMIUM_ENV: &str = "MANIFOLD_CHROMIUM";
/// Bounds the gateway's start and each setup call; never a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);
/// Bounds the whole browser scenario (every wait inside it has its own guard); a hang guard only.
const SCENARIO_GUARD: Duration = Duration::from_secs(15 * 60);
/// A value of the configuration (a server's environment) that no page may show.
const SECRET: &str = "dashboard-secret-3c9f1e7a";
/// The authored tool the scenario finds with two versions.
const AUTHORED: &str = "word_count";

/// The steps dashboard.mjs performs, in order; each must report `"ok": true`.
const STEPS: &[&str] = &[
    "sign-in-refuses-a-wrong-key",
    "sign-in-refuses-a-non-admin-key",
    "sign-in",
    "overview",
    "a-server-goes-down-and-comes-back",
    "catalog",
    "html-in-a-description-is-shown-as-text",
    "a-changed-pin-is-approved",
    "tool-page",
    "html-in-a-result-is-shown-as-text",
    "playground-calls-a-tool-with-fields",
    "playground-raw-json-wins-and-errors-show",
    "playground-calls-as-another-key",
    "live-calls",
    "a-held-call-is-approved-and-its-client-gets-the-result",
    "a-held-call-is-denied-and-its-client-hears-why",
    "audit",
    "authored-tools",
    "keys-create-and-sign-in-with-the-new-key",
    "keys-revoke-ends-the-sessions-of-that-key",
    "csrf-and-foreign-origin-are-refused",
    "no-session-is-sent-to-sign-in",
    "config-check-and-apply",
    "sign-out",
];

/// The browser and its driver, as scripts/install-peers installs them.
struct BrowserInstall {
    chromium: PathBuf,
    dir: PathBuf,
}

/// `$MANIFOLD_BROWSER_DIR` (else `<workspace>/tests/browser`) with playwright-core installed in it,
/// and `$MANIFOLD_CHROMIUM` (else `chromium` on PATH): as the peers are found, failing with what to
/// run when they are not there, never skipping.
fn browser_install() -> BrowserInstall {
    let from_env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = from_env(BROWSER_DIR_ENV).map_or_else(
        || workspace_root().join("tests").join("browser"),
        PathBuf::from,
    );
    let driver = dir.join("node_modules/playwright-core/package.json");
    assert!(
        driver.is_file(),
        "{} is missing: the browser driver is not installed. Run scripts/install-peers (it installs \
         tests/browser's pinned playwright-core and Debian's chromium), then run the tests with \
         `eval \"$(scripts/install-peers --env)\"` or through scripts/test ({BROWSER_DIR_ENV} is {:?})",
        driver.display(),
        std::env::var_os(BROWSER_DIR_ENV)
    );
    let named = from_env(CHROMIUM_ENV).map(PathBuf::from);
    let chromium = named
        .clone()
        .or_else(|| on_path("chromium"))
        .unwrap_or_else(|| PathBuf::from("chromium"));
    assert!(
        chromium.is_file(),
        "no Chromium at {} ({}). Run scripts/install-peers (it installs Debian's chromium; a \
         browser is never downloaded), then run the tests with `eval \"$(scripts/install-peers \
         --env)\"` or through scripts/test",
        chromium.display(),
        if named.is_some() {
            format!("{CHROMIUM_ENV} names it")
        } else {
            format!("{CHROMIUM_ENV} is unset and PATH has no chromium")
        }
    );
    BrowserInstall { chromium, dir }
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn path_string(p: &Path) -> String {
    toml_string(&p.to_string_lossy())
}

/// `py` (the Python SDK peer) has `add` and `echo` held for `admin`'s answer; `web` is the peer that
/// can be held down, with a secret in its environment; `admin` may author tools.
fn config(dir: &Path, web_state: &Path) -> String {
    let py = python().unwrap();
    format!(
        r#"# The dashboard's browser test: authentication on, two held tools, one server to kill.
[gateway]
listen = "127.0.0.1:0"
data_dir = {data}

[auth]
api_keys = true

[servers.py]
command = {py}
args = [{python_server}, "stdio"]

[servers.web]
command = {py}
args = [{peer_server}, {state}]
env = {{ WEB_TOKEN = {secret} }}

[approvals]
window = "120s"
progress_window = "120s"

[[rules]]
name = "held-for-an-admin"
effect = "ask"
tools = ["py__add", "py__echo"]
approvers = ["identity:admin"]

[[rules]]
name = "admins-author"
effect = "allow"
identities = ["admin"]
tools = ["manifold_*_tool"]
"#,
        data = path_string(&dir.join("data")),
        py = path_string(&py),
        python_server = path_string(&peers_dir().unwrap().join("python_server.py")),
        peer_server = path_string(&workspace_root().join("tests/browser/peer_server.py")),
        state = path_string(web_state),
        secret = toml_string(SECRET),
    )
}

/// The server the scenario adds through the configuration page.
fn extra_server() -> String {
    format!(
        "[servers.extra]\ncommand = {}\nargs = [{}, \"stdio\"]\n",
        path_string(&python().unwrap()),
        path_string(&peers_dir().unwrap().join("python_server.py")),
    )
}

/// `manifold ARGS --config CONFIG`'s stdout; panics with its stderr when it fails.
fn manifold(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(MANIFOLD)
        .args(args)
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "manifold {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn create_key(dir: &Path, config: &Path, name: &str, scopes: &str) -> String {
    let config = config.to_string_lossy();
    let mut args = vec!["keys", "create", name, "--config", &config];
    if !scopes.is_empty() {
        args.extend(["--scopes", scopes]);
    }
    let key = manifold(dir, &args).trim().to_owned();
    assert!(
        key.starts_with("mfk_"),
        "manifold keys create printed {key:?}"
    );
    key
}

fn start_gateway(dir: &Path, config: &Path) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .log("gateway.log")
        .start()
        .unwrap()
}

fn gateway_log(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("gateway.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// The status code of `GET path` on `addr`.
fn get_status(addr: &str, path: &str) -> Option<u16> {
    RawHttp::new(addr)
        .get(path)
        .ok()
        .map(|response| response.status)
}

/// Waits until `/readyz` says every server is up.
fn wait_until_ready(dir: &Path, addr: &str) {
    let started = Instant::now();
    while get_status(addr, "/readyz") != Some(200) {
        assert!(
            started.elapsed() < HANG_GUARD,
            "the gateway never became ready; its log:\n{}",
            gateway_log(dir)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `manifold call URL TOOL --json ARGS` as `key`; its stdout.
fn call_as(dir: &Path, url: &str, key: &str, tool: &str, arguments: &Value) -> String {
    let auth = format!("Authorization: Bearer {key}");
    let arguments = arguments.to_string();
    manifold(dir, &["call", url, tool, "--json", &arguments, "-H", &auth])
}

/// word_count at version 2: created, then its description updated (so there is a diff to show).
fn author_word_count(dir: &Path, url: &str, admin: &str) {
    let created = call_as(
        dir,
        url,
        admin,
        "manifold_create_tool",
        &json!({
            "name": AUTHORED,
            "description": "Counts the words of a text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "annotations": {"readOnlyHint": true},
            "language": "python",
            "code": "import json, sys\nprint(json.dumps({\"words\": len(json.load(sys.stdin)[\"text\"].split())}))\n",
        }),
    );
    assert!(created.contains("version 1"), "{created}");
    let updated = call_as(
        dir,
        url,
        admin,
        "manifold_update_tool",
        &json!({"name": AUTHORED, "description": "Counts the words of a text, and says so"}),
    );
    assert!(updated.contains("version 2"), "{updated}");
}

/// Runs dashboard.mjs with `plan`; its exit status and what it printed.
fn run_scenario(dir: &Path, install: &BrowserInstall, plan: &Value) -> (bool, String, String) {
    let out_path = dir.join("browser.out");
    let err_path = dir.join("browser.err");
    let mut command = Command::new(node().unwrap());
    command
        .arg(workspace_root().join("tests/browser/dashboard.mjs"))
        .arg(plan.to_string())
        .current_dir(dir)
        .env(CHROMIUM_ENV, &install.chromium)
        .env(BROWSER_DIR_ENV, &install.dir)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = ChildGuard::spawn(command).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < SCENARIO_GUARD,
            "the browser scenario hung; so far:\n{}",
            std::fs::read_to_string(&out_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut out = String::new();
    std::fs::File::open(&out_path)
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    (status.success(), out, err)
}

/// A failed step, readably: its error, the selector, the URL and the page's HTML.
fn describe(step: &Value) -> String {
    format!(
        "step {} failed: {}\n  selector: {}\n  url: {}\n  page: {}",
        step["step"],
        step["error"].as_str().unwrap_or("(no message)"),
        step["selector"].as_str().unwrap_or("-"),
        step["url"].as_str().unwrap_or("-"),
        step["html"].as_str().unwrap_or("-"),
    )
}

/// In a real browser, with authentication on: a wrong key and a non-admin key are refused at
/// sign-in; the overview shows a killed server go down and come back without a reload; the catalog
/// and the tool page show a tool's HTML description as text; the playground calls tools (fields,
/// raw JSON, as another key) and shows an HTML result as text; live calls appear as they are made;
/// a held call is approved and its waiting client prints the result, another is denied and its
/// client's error gives the reason; the audit trail filters, exports, opens a record and verifies
/// intact; an authored tool is disabled (its calls refused), enabled and rolled back; a new key is
/// shown once, signs in, and once revoked its session is refused; POSTs without the CSRF token,
/// with a wrong one, from a foreign Origin or without a session are refused and change nothing; a
/// bad configuration is answered with line and column, a good one is diffed, applied to the file
/// and the new server comes up.
#[test]
fn in_a_real_browser_an_admin_runs_the_gateway_and_every_forged_or_stale_request_is_refused() {
    let install = browser_install();
    let dir = fresh_dir("dashboard-browser").unwrap();
    let web_state = dir.join("web-state");
    std::fs::create_dir_all(&web_state).unwrap();
    let config = dir.join("manifold.toml");
    std::fs::write(&config, self::config(&dir, &web_state)).unwrap();
    let admin = create_key(&dir, &config, "admin", "admin");
    let user = create_key(&dir, &config, "alice", "mcp");

    let gateway = start_gateway(&dir, &config);
    let addr = gateway.authority().to_owned();
    wait_until_ready(&dir, &addr);
    author_word_count(&dir, gateway.url(), &admin);

    let plan = json!({
        "dashboard": format!("http://{addr}/ui"),
        "mcp": gateway.url(),
        "manifold": MANIFOLD,
        "adminName": "admin",
        "adminKey": admin,
        "userName": "alice",
        "userKey": user,
        "gatewayPid": gateway.pid(),
        "webState": web_state,
        "configPath": config,
        "secret": SECRET,
        "extraServer": extra_server(),
        "authoredTool": AUTHORED,
    });
    let (success, out, err) = run_scenario(&dir, &install, &plan);
    let reports: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if let Some(failed) = reports.iter().find(|r| r["ok"] != true) {
        panic!(
            "{}\n\nthe script's stderr:\n{err}\n\nthe gateway's log (last lines):\n{}\n\n(all in {})",
            describe(failed),
            gateway_log(&dir),
            dir.display()
        );
    }
    assert!(
        success,
        "dashboard.mjs failed without a failing step:\n{out}\n{err}"
    );
    // MANIFOLD_DASHBOARD_STEPS (for working on one part) narrows the run; sign-in always runs.
    let only: Vec<String> = std::env::var("MANIFOLD_DASHBOARD_STEPS")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let reported: Vec<&str> = reports.iter().filter_map(|r| r["step"].as_str()).collect();
    let wanted: Vec<&str> = STEPS
        .iter()
        .copied()
        .filter(|s| only.is_empty() || *s == "sign-in" || only.iter().any(|o| o == s))
        .collect();
    assert_eq!(reported, wanted, "the steps that reported success:\n{out}");
    drop(gateway);
    let _ = std::fs::remove_dir_all(&dir);
}

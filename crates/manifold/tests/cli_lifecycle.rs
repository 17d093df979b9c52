//! `manifold serve`'s lifecycle, end to end, against the real binary and real stdio children (the
//! workspace's test peer): the process census (nothing started is left behind, whatever happened
//! on the way), reload (by file change and by SIGHUP; invalid files refused with `manifold
//! check`'s messages), the graceful drain on SIGTERM and the second signal that cuts it short,
//! idle shutdown of a lazy server, and expiry of an idle legacy session.
//!
//! Children are told apart by an environment variable each server's configuration sets
//! (`MANIFOLD_TEST_SERVER = "NAME@RUN"`): /proc shows it for the child and for anything the child
//! starts, so the census can look for survivors anywhere on the machine, not just among the
//! processes it recorded. No test asserts how long anything took; the timeouts are hang guards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use manifold_testkit::{
    GatewayProcess, McpSession, ServeCommand, process_group_members, process_is_running,
};
use manifold_wire::sse::SseParser;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// The longest any single wait may take before the test is declared hung.
const HANG_GUARD: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(50);
const MARKER: &str = "MANIFOLD_TEST_SERVER";
const REVISION: &str = "2025-11-25";

// ---------------------------------------------------------------------------------------------
// The gateway process.

struct Serving {
    process: GatewayProcess,
    url: String,
    base: String,
}

impl Serving {
    fn start(dir: &Path, config: &Path) -> Serving {
        let process = ServeCommand::new(MANIFOLD, dir)
            .global_args(["-v"])
            .config(config)
            .start()
            .unwrap();
        Serving {
            url: process.url().to_owned(),
            base: process.base().to_owned(),
            process,
        }
    }

    fn pid(&self) -> u32 {
        self.process.pid()
    }

    fn signal(&self, signal: Signal) {
        self.process.signal(signal).unwrap();
    }

    fn stderr(&self) -> String {
        self.process.log()
    }

    fn wait_for_log(&self, needle: &str, times: usize) {
        self.process
            .wait_for_log(needle, times, HANG_GUARD)
            .unwrap();
    }

    fn wait_exit(&mut self) -> ExitStatus {
        self.process.wait_for_exit(HANG_GUARD).unwrap()
    }
}

fn wait_until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "hung waiting for {what}");
        std::thread::sleep(POLL);
    }
}

async fn wait_until_async<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "hung waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

fn temp_dir(name: &str) -> PathBuf {
    manifold_testkit::fresh_dir(&format!("cli-lifecycle-{name}")).unwrap()
}

/// A unique marker value for this test's servers, so survivors are found anywhere.
fn run_id(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

fn peer() -> String {
    manifold_testkit::test_peer().unwrap().display().to_string()
}

/// `[servers.NAME]` running the test peer with `args`, marked for the census.
fn server(name: &str, run: &str, args: &[&str], extra: &str) -> String {
    let mut argv = vec!["\"stdio\"".to_owned()];
    argv.extend(args.iter().map(|a| format!("{a:?}")));
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = [{}]\nenv = {{ {MARKER} = \"{name}@{run}\" }}\n{extra}\n",
        peer(),
        argv.join(", ")
    )
}

fn gateway_section(dir: &Path, extra: &str) -> String {
    format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n{extra}\n",
        dir.join("data").display()
    )
}

/// Writes a configuration the way editors do: a new file renamed over the old one.
fn write_config(path: &Path, text: &str) {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Processes, from /proc.

#[derive(Debug, Clone)]
struct Proc {
    pid: u32,
    ppid: u32,
    state: char,
}

fn stat(pid: u32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some(Proc { pid, ppid, state })
}

fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The marker (`NAME@RUN`) in a process's environment.
fn marker(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0).find_map(|kv| {
        std::str::from_utf8(kv)
            .ok()?
            .strip_prefix(&format!("{MARKER}="))
            .map(str::to_owned)
    })
}

/// The gateway's live children by server name (this run's only), each list sorted.
fn servers_of(gateway: u32, run: &str) -> BTreeMap<String, Vec<u32>> {
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for p in all_pids().into_iter().filter_map(stat) {
        if p.ppid != gateway || matches!(p.state, 'Z' | 'X') {
            continue;
        }
        if let Some(m) = marker(p.pid)
            && let Some((name, r)) = m.split_once('@')
            && r == run
        {
            out.entry(name.to_owned()).or_default().push(p.pid);
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

fn count(map: &BTreeMap<String, Vec<u32>>, name: &str) -> usize {
    map.get(name).map_or(0, Vec::len)
}

/// Zombie children of the gateway: children it failed to reap.
fn zombies_of(gateway: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter_map(stat)
        .filter(|p| p.ppid == gateway && p.state == 'Z')
        .map(|p| p.pid)
        .collect()
}

/// Every live process on the machine carrying this run's marker (children, grandchildren,
/// orphans adopted by init alike).
fn survivors(run: &str) -> Vec<(u32, String)> {
    all_pids()
        .into_iter()
        .filter(|pid| process_is_running(*pid))
        .filter_map(|pid| {
            let m = marker(pid)?;
            m.ends_with(&format!("@{run}")).then_some((pid, m))
        })
        .collect()
}

/// Where cgroup v2 is mounted, if this test can create cgroups there (what the gateway needs).
fn cgroup_v2_root() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = info.lines().find_map(|l| {
        let (m, fs) = l.split_once(" - ")?;
        (fs.split_whitespace().next()? == "cgroup2").then(|| m.split_whitespace().nth(4))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_owned();
    let dir = PathBuf::from(mount).join(own.trim_start_matches('/'));
    let probe = dir.join(format!("manifold-test-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let killable = probe.join("cgroup.kill").exists();
    std::fs::remove_dir(&probe).ok()?;
    killable.then_some(dir)
}

// ---------------------------------------------------------------------------------------------
// A legacy-era client over Streamable HTTP.

fn http() -> reqwest::Client {
    manifold_testkit::http_client()
}

struct Mcp {
    http: reqwest::Client,
    url: String,
    base: String,
}

impl Mcp {
    fn new(s: &Serving) -> Mcp {
        Mcp {
            http: http(),
            url: s.url.clone(),
            base: s.base.clone(),
        }
    }

    fn post(&self, sid: Option<&str>, accept: &str, body: &Value) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .post(&self.url)
            .header("accept", accept)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(sid) = sid {
            r = r
                .header("mcp-session-id", sid)
                .header("mcp-protocol-version", REVISION);
        }
        r
    }

    /// `initialize` + `notifications/initialized`; the session id.
    async fn session(&self) -> String {
        let session = McpSession::options(&self.url)
            .http(self.http.clone())
            .client_info("cli-lifecycle", "1")
            .legacy()
            .await
            .unwrap();
        session.session_id().unwrap().to_owned()
    }

    /// A `tools/call` answered as plain JSON: (HTTP status, body).
    async fn call(&self, sid: &str, id: u64, tool: &str, args: Value) -> (u16, Value) {
        let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":tool,"arguments":args}});
        let r = self
            .post(Some(sid), "application/json", &body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let v = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{tool}: {e}: {status} {text:?}"));
        (status, v)
    }

    /// `echo` through `server__echo`, asserting it works.
    async fn echo(&self, sid: &str, id: u64, server: &str) {
        let (status, v) = self
            .call(
                sid,
                id,
                &format!("{server}__echo"),
                json!({"message": "hi"}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["result"]["content"][0]["text"], "hi", "{v}");
        assert_eq!(v["result"]["isError"], false, "{v}");
    }

    /// A call whose reply is an SSE stream (a progress token asks for one).
    async fn call_streaming(&self, sid: &str, id: u64, tool: &str, args: Value) -> Sse {
        let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":tool,"arguments":args,"_meta":{"progressToken":format!("p{id}")}}});
        let r = self
            .post(Some(sid), "text/event-stream", &body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        Sse::new(r)
    }

    /// The session's GET stream.
    async fn listen(&self, sid: &str) -> Sse {
        let r = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", REVISION)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        Sse::new(r)
    }

    async fn delete(&self, sid: &str) -> u16 {
        self.http
            .delete(&self.url)
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", REVISION)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn readyz(&self) -> Option<(u16, Value)> {
        let r = self
            .http
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .ok()?;
        let status = r.status().as_u16();
        let text = r.text().await.ok()?;
        Some((status, serde_json::from_str(&text).ok()?))
    }
}

/// The JSON messages of an SSE response, one at a time.
struct Sse {
    body: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    parser: SseParser,
}

impl Sse {
    fn new(r: reqwest::Response) -> Sse {
        Sse {
            body: r.bytes_stream().map(|c| c.map(|b| b.to_vec())).boxed(),
            parser: SseParser::new(1 << 24),
        }
    }

    /// The next message, or `None` when the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            while let Some(event) = self.parser.next_event() {
                let data = event.unwrap().data.unwrap_or_default();
                if !data.trim().is_empty() {
                    return Some(serde_json::from_str(&data).unwrap());
                }
            }
            match tokio::time::timeout(HANG_GUARD, self.body.next())
                .await
                .expect("hung waiting for an SSE event")
            {
                Some(Ok(chunk)) => self.parser.push(&chunk),
                _ => return None,
            }
        }
    }

    /// Reads on until a message with an `id` (the answer) or the end.
    async fn answer(&mut self) -> Option<Value> {
        while let Some(m) = self.next().await {
            if m.get("id").is_some() {
                return Some(m);
            }
        }
        None
    }

    /// Every message's method until the stream ends, collected as they come.
    fn collect_methods(mut self) -> Arc<Mutex<Vec<Value>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Some(m) = self.next().await {
                sink.lock().unwrap().push(m);
            }
            sink.lock()
                .unwrap()
                .push(json!({"method": "<end of stream>"}));
        });
        seen
    }
}

fn methods(seen: &Arc<Mutex<Vec<Value>>>) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|m| m["method"].as_str().map(str::to_owned))
        .collect()
}

/// Adds children and the members of their process groups to the census.
fn record(servers: &BTreeMap<String, Vec<u32>>, pids: &mut BTreeSet<u32>) {
    for pid in servers.values().flatten() {
        pids.insert(*pid);
        pids.extend(process_group_members(*pid));
    }
}

// ---------------------------------------------------------------------------------------------
// (1) The census.

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn census_nothing_the_gateway_started_survives_it() {
    let dir = temp_dir("census");
    let run = run_id("census");
    let config = dir.join("manifold.toml");
    // Unsandboxed by choice: the census reads each child's process group and parent, which a
    // sandboxed child (under the launcher, in its own pid namespace) does not share; the
    // sandbox's own census is the daemonised-grandchild row of the escape matrix.
    const OFF: &str = "sandbox = { profile = \"off\" }";
    const SESSION_OFF: &str = "scope = \"session\"\nsandbox = { profile = \"off\" }";
    let base = [
        gateway_section(&dir, "drain_timeout = \"5s\""),
        server("plain", &run, &[], OFF),
        // Ignores SIGTERM and stdin EOF, with a `sleep` grandchild in its process group.
        server("stubborn", &run, &["--behaviour", "ignore-sigterm"], OFF),
        server("mine", &run, &[], SESSION_OFF),
        server(
            "minestubborn",
            &run,
            &["--behaviour", "ignore-sigterm"],
            SESSION_OFF,
        ),
    ]
    .concat();
    write_config(&config, &base);
    let root = cgroup_v2_root();
    // What a gateway killed outright leaves: its cgroup, holding a sandboxed server's own cgroup
    // with the server still inside.
    let left_behind = root.as_ref().map(|root| {
        let mut gone = Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let stale = root.join(format!("manifold-{}", gone.id()));
        let server_cgroup = stale.join(format!("manifold-sandbox-{}-0", gone.id()));
        std::fs::create_dir_all(&server_cgroup).unwrap();
        let orphan = Command::new("sleep")
            .arg("1000")
            .env(MARKER, format!("orphan@{run}"))
            .spawn()
            .unwrap();
        std::fs::write(server_cgroup.join("cgroup.procs"), orphan.id().to_string()).unwrap();
        (stale, orphan)
    });
    let mut gw = Serving::start(&dir, &config);
    let gw_pid = gw.pid();
    let mcp = Mcp::new(&gw);
    if let Some((stale, mut orphan)) = left_behind {
        assert!(!stale.exists(), "the gateway swept {}", stale.display());
        assert!(
            orphan.try_wait().unwrap().is_some(),
            "the orphan inside was killed"
        );
    }

    // Contained in a cgroup of its own where this machine allows one.
    let cgroup = root.map(|root| root.join(format!("manifold-{gw_pid}")));
    match &cgroup {
        Some(dir) => {
            let own = std::fs::read_to_string(format!("/proc/{gw_pid}/cgroup")).unwrap();
            assert!(
                own.lines()
                    .any(|l| l.starts_with("0::") && l.ends_with(&format!("/manifold-{gw_pid}"))),
                "the gateway is not in its own cgroup: {own}"
            );
            assert!(dir.is_dir());
        }
        None => eprintln!("cgroup v2 is not writable here: checking process groups only"),
    }

    let mut pids: BTreeSet<u32> = BTreeSet::new();
    // Every server has its shared child (session-scoped ones too: they supply the catalog).
    let at_start = wait_until("the four shared children", || {
        let s = servers_of(gw_pid, &run);
        ["plain", "stubborn", "mine", "minestubborn"]
            .iter()
            .all(|n| count(&s, n) == 1)
            .then_some(s)
    });
    // The stubborn ones' `sleep` grandchildren, in their process groups.
    for name in ["stubborn", "minestubborn"] {
        let leader = at_start[name][0];
        wait_until("a stubborn child's grandchild", || {
            (process_group_members(leader).len() == 2).then_some(())
        });
    }
    record(&at_start, &mut pids);

    // Two legacy sessions, each with its own children of the session-scoped servers.
    let s1 = mcp.session().await;
    mcp.echo(&s1, 1, "mine").await;
    mcp.echo(&s1, 2, "minestubborn").await;
    let after_s1 = servers_of(gw_pid, &run);
    assert_eq!(count(&after_s1, "mine"), 2, "{after_s1:?}");
    assert_eq!(count(&after_s1, "minestubborn"), 2, "{after_s1:?}");
    let s1_children: Vec<u32> = ["mine", "minestubborn"]
        .iter()
        .flat_map(|n| after_s1[*n].clone())
        .filter(|p| !at_start.values().flatten().any(|q| q == p))
        .collect();
    assert_eq!(s1_children.len(), 2);
    let s2 = mcp.session().await;
    mcp.echo(&s2, 1, "mine").await;
    mcp.echo(&s2, 2, "minestubborn").await;
    let after_s2 = servers_of(gw_pid, &run);
    assert_eq!(count(&after_s2, "mine"), 3, "{after_s2:?}");
    assert_eq!(count(&after_s2, "minestubborn"), 3, "{after_s2:?}");
    for leader in &s1_children {
        wait_until("a session child's process group", || {
            (!process_group_members(*leader).is_empty()).then_some(())
        });
    }
    record(&after_s2, &mut pids);
    // Grandchildren of the per-session stubborn children.
    for leader in after_s2["minestubborn"].clone() {
        wait_until("a session child's grandchild", || {
            (process_group_members(leader).len() == 2).then_some(())
        });
        pids.extend(process_group_members(leader));
    }
    let s1_groups: Vec<(u32, Vec<u32>)> = s1_children
        .iter()
        .map(|l| (*l, process_group_members(*l)))
        .collect();

    // DELETE ends session 1's own children, grandchildren included.
    assert_eq!(mcp.delete(&s1).await, 204);
    for (leader, members) in &s1_groups {
        wait_until("session 1's children to end with it", || {
            (members.iter().all(|p| !process_is_running(*p))
                && process_group_members(*leader).is_empty())
            .then_some(())
        });
    }
    let after_delete = servers_of(gw_pid, &run);
    assert_eq!(count(&after_delete, "mine"), 2, "{after_delete:?}");
    assert_eq!(count(&after_delete, "minestubborn"), 2, "{after_delete:?}");

    // A shared child killed with SIGKILL is restarted (a new pid), reaped, and serves again.
    let crashed = after_delete["plain"][0];
    kill(Pid::from_raw(crashed as i32), Signal::SIGKILL).unwrap();
    let restarted = wait_until("plain to be restarted", || {
        let s = servers_of(gw_pid, &run);
        s.get("plain")
            .filter(|v| v.len() == 1 && v[0] != crashed)
            .map(|v| v[0])
    });
    pids.insert(restarted);
    wait_until_async("plain to serve again", || async {
        let (status, v) = mcp
            .call(&s2, 3, "plain__echo", json!({"message": "hi"}))
            .await;
        (status == 200 && v["result"]["content"][0]["text"] == "hi").then_some(())
    })
    .await;
    wait_until("the crashed child to be reaped", || {
        zombies_of(gw_pid).is_empty().then_some(())
    });

    // A reload adds a server; session 2 keeps its id and its own children.
    write_config(
        &config,
        &[base.as_str(), &server("extra", &run, &[], OFF)].concat(),
    );
    gw.wait_for_log("reloaded", 1);
    let after_reload = wait_until("the added server's child", || {
        let s = servers_of(gw_pid, &run);
        (count(&s, "extra") == 1).then_some(s)
    });
    record(&after_reload, &mut pids);
    mcp.echo(&s2, 4, "extra").await;
    mcp.echo(&s2, 5, "mine").await;
    assert_eq!(
        servers_of(gw_pid, &run)["mine"],
        after_s2["mine"]
            .iter()
            .copied()
            .filter(|p| !s1_children.contains(p))
            .collect::<Vec<_>>(),
        "session 2 kept its own child of the unchanged server"
    );
    assert_eq!(zombies_of(gw_pid), Vec::<u32>::new());
    let groups: Vec<u32> = servers_of(gw_pid, &run)
        .values()
        .flatten()
        .copied()
        .collect();

    // SIGTERM: exit 0, and nothing left.
    gw.signal(Signal::SIGTERM);
    let status = gw.wait_exit();
    assert_eq!(status.code(), Some(0), "stderr:\n{}", gw.stderr());
    let alive: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|p| process_is_running(*p))
        .collect();
    assert_eq!(alive, Vec::<u32>::new(), "recorded processes still running");
    for g in groups {
        assert_eq!(process_group_members(g), Vec::<u32>::new(), "group {g}");
    }
    assert_eq!(survivors(&run), Vec::new(), "processes of this run survive");
    if let Some(dir) = cgroup {
        assert!(
            !dir.exists(),
            "the cgroup {} was left behind",
            dir.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (2) Reload.

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_changes_by_name_and_keeps_sessions_and_unchanged_servers() {
    let dir = temp_dir("reload");
    let run = run_id("reload");
    let config = dir.join("manifold.toml");
    let gateway = gateway_section(&dir, "drain_timeout = \"5s\"");
    write_config(
        &config,
        &[
            gateway.as_str(),
            &server("keep", &run, &[], ""),
            &server("change", &run, &[], ""),
            &server("remove", &run, &[], ""),
        ]
        .concat(),
    );
    let mut gw = Serving::start(&dir, &config);
    let gw_pid = gw.pid();
    let mcp = Mcp::new(&gw);
    let before = wait_until("three children", || {
        let s = servers_of(gw_pid, &run);
        ["keep", "change", "remove"]
            .iter()
            .all(|n| count(&s, n) == 1)
            .then_some(s)
    });
    let sid = mcp.session().await;
    mcp.echo(&sid, 1, "remove").await;
    let events = mcp.listen(&sid).await.collect_methods();

    // 1. By editing the file: one added, one removed, one changed (its environment names a
    //    file, which step 2 changes), one kept.
    std::fs::write(dir.join("version.txt"), "2").unwrap();
    let edited = [
        gateway.as_str(),
        &server("keep", &run, &[], ""),
        &server("change", &run, &[], "").replace(" }\n", ", VERSION = \"${file:version.txt}\" }\n"),
        &server("add", &run, &[], ""),
    ]
    .concat();
    write_config(&config, &edited);
    gw.wait_for_log("reloaded", 1);
    let after = wait_until("the reload's children", || {
        let s = servers_of(gw_pid, &run);
        (count(&s, "keep") == 1
            && count(&s, "change") == 1
            && count(&s, "add") == 1
            && count(&s, "remove") == 0)
            .then_some(s)
    });
    assert_eq!(
        after["keep"], before["keep"],
        "the unchanged server kept its process"
    );
    assert_ne!(
        after["change"], before["change"],
        "the changed server was restarted"
    );
    for old in [before["change"][0], before["remove"][0]] {
        wait_until("the retired processes to end", || {
            (!process_is_running(old) && process_group_members(old).is_empty()).then_some(())
        });
    }
    // The session lives on with the same id and heard that the tools changed.
    mcp.echo(&sid, 2, "keep").await;
    mcp.echo(&sid, 3, "add").await;
    mcp.echo(&sid, 4, "change").await;
    let (_, gone) = mcp
        .call(&sid, 5, "remove__echo", json!({"message": "hi"}))
        .await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    assert!(
        gone["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool \"remove__echo\""),
        "{gone}"
    );
    wait_until("list_changed on the session's stream", || {
        methods(&events)
            .contains(&"notifications/tools/list_changed".to_owned())
            .then_some(())
    });

    // 2. By SIGHUP: only the file `${file:...}` names changed, which the file watch does not
    //    see; the signal reloads it, and only the server using it restarts.
    std::fs::write(dir.join("version.txt"), "3").unwrap();
    gw.signal(Signal::SIGHUP);
    gw.wait_for_log("reloaded", 2);
    let hup = wait_until("the SIGHUP reload's restart", || {
        let s = servers_of(gw_pid, &run);
        (count(&s, "change") == 1 && s["change"] != after["change"]).then_some(s)
    });
    assert!(
        gw.stderr().contains("(SIGHUP): added: none; removed: none; changed (restarted): change; unchanged: add, keep"),
        "{}",
        gw.stderr()
    );
    assert_eq!(hup["keep"], before["keep"]);
    assert_eq!(hup["add"], after["add"]);
    mcp.echo(&sid, 6, "change").await;

    // 3. An invalid file is refused with `manifold check`'s messages; everything runs on.
    let invalid = edited.replace(
        "[servers.keep]\n",
        "[servers.keep]\ntimeout = \"sixty\"\nstartup = \"later\"\n",
    );
    write_config(&config, &invalid);
    gw.wait_for_log("is not valid:", 1);
    let check = Command::new(MANIFOLD)
        .arg("check")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    let check_err = String::from_utf8_lossy(&check.stderr).into_owned();
    let mut lines = check_err.lines();
    let first = lines.next().unwrap();
    assert_eq!(first, format!("error: {} is not valid:", config.display()));
    let problems: Vec<&str> = lines.collect();
    assert_eq!(
        problems.iter().filter(|l| l.contains(": error: ")).count(),
        2,
        "{check_err}"
    );
    let logged = gw.stderr();
    assert!(
        logged.contains(&format!(
            "the configuration file changed: {} is not valid:",
            config.display()
        )),
        "{logged}"
    );
    for p in &problems {
        assert!(logged.contains(p), "missing {p:?} in:\n{logged}");
    }
    assert!(logged.contains("The running configuration stays in force."));
    mcp.echo(&sid, 7, "keep").await;
    mcp.echo(&sid, 8, "change").await;
    assert_eq!(servers_of(gw_pid, &run), hup, "nothing was restarted");

    gw.signal(Signal::SIGTERM);
    assert_eq!(gw.wait_exit().code(), Some(0), "{}", gw.stderr());
    assert_eq!(survivors(&run), Vec::new());
}

// ---------------------------------------------------------------------------------------------
// (3) Drain.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_calls_finish_refuses_new_ones_and_cuts_off_the_rest_at_the_deadline() {
    let dir = temp_dir("drain");
    let run = run_id("drain");
    let config = dir.join("manifold.toml");
    write_config(
        &config,
        &[
            gateway_section(&dir, "drain_timeout = \"8s\""),
            server("peer", &run, &[], ""),
        ]
        .concat(),
    );
    let mut gw = Serving::start(&dir, &config);
    let mcp = Mcp::new(&gw);
    let sid = mcp.session().await;
    let stream = mcp.listen(&sid).await.collect_methods();
    // A call that finishes within the drain, and one that outlives it. Each has shown progress
    // (it is running upstream) before the signal.
    let mut short = mcp
        .call_streaming(&sid, 1, "peer__slow", json!({"seconds": 3, "steps": 6}))
        .await;
    let mut long = mcp
        .call_streaming(&sid, 2, "peer__slow", json!({"seconds": 600, "steps": 600}))
        .await;
    for call in [&mut short, &mut long] {
        let first = call.next().await.unwrap();
        assert_eq!(first["method"], "notifications/progress", "{first}");
    }
    gw.signal(Signal::SIGTERM);
    let (status, ready) = wait_until_async("/readyz to report the drain", || async {
        mcp.readyz().await.filter(|(s, _)| *s == 503)
    })
    .await;
    assert_eq!((status, &ready["draining"]), (503, &json!(true)), "{ready}");

    // A new request during the drain: a clear refusal.
    let (status, refused) = mcp
        .call(&sid, 3, "peer__echo", json!({"message": "late"}))
        .await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["id"], 3);
    assert_eq!(refused["error"]["code"], -32006);
    assert_eq!(
        refused["error"]["message"],
        "Service Unavailable: Manifold is shutting down and takes no new requests; calls already running may finish. Retry against another instance, or once Manifold is back"
    );

    // The short call completes.
    let done = short
        .answer()
        .await
        .unwrap_or_else(|| panic!("no answer to the short call; stderr:\n{}", gw.stderr()));
    assert_eq!(done["id"], 1);
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("slow done after 6 steps"),
        "{done}"
    );
    // The long one is cut off at the deadline with an error naming the shutdown.
    let cut = long
        .answer()
        .await
        .unwrap_or_else(|| panic!("no answer to the long call; stderr:\n{}", gw.stderr()));
    assert_eq!(cut["id"], 2);
    assert_eq!(cut["error"]["code"], -32003, "{cut}");
    assert_eq!(
        cut["error"]["message"],
        "Manifold is shutting down: this request was still running when the 8s drain deadline passed, so Manifold cancelled it (its server was told); retry it once Manifold is back"
    );

    assert_eq!(gw.wait_exit().code(), Some(0), "{}", gw.stderr());
    // The upstream was told to stop the cut-off call (the test peer says so on its stderr,
    // which the gateway logs).
    assert!(
        gw.stderr()
            .contains("manifold-test-peer: slow cancelled before step"),
        "{}",
        gw.stderr()
    );
    // The session's stream was told, then closed cleanly.
    let seen = stream.lock().unwrap().clone();
    let notice = seen
        .iter()
        .find(|m| m["method"] == "notifications/message")
        .unwrap_or_else(|| panic!("no shutdown notice in {seen:?}"));
    assert_eq!(notice["params"]["level"], "warning");
    assert_eq!(
        notice["params"]["data"],
        "Manifold is shutting down: calls already running have up to 8s to finish, new requests are refused"
    );
    wait_until("the session's stream to end", || {
        methods(&stream)
            .contains(&"<end of stream>".to_owned())
            .then_some(())
    });
    assert!(
        gw.stderr().contains(
            "Manifold stopped: 2 call(s) were in flight, 1 cancelled at the drain deadline"
        ),
        "{}",
        gw.stderr()
    );
    assert_eq!(survivors(&run), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_exits_at_once_with_status_1_and_leaves_no_child() {
    let dir = temp_dir("second");
    let run = run_id("second");
    let config = dir.join("manifold.toml");
    // A drain that would outlast every hang guard: only the second signal can end it in time.
    write_config(
        &config,
        &[
            gateway_section(&dir, "drain_timeout = \"24h\""),
            server("peer", &run, &[], ""),
            server("stubborn", &run, &["--behaviour", "ignore-sigterm"], ""),
        ]
        .concat(),
    );
    let mut gw = Serving::start(&dir, &config);
    let mcp = Mcp::new(&gw);
    let sid = mcp.session().await;
    let mut long = mcp
        .call_streaming(
            &sid,
            1,
            "peer__slow",
            json!({"seconds": 3600, "steps": 3600}),
        )
        .await;
    assert_eq!(
        long.next().await.unwrap()["method"],
        "notifications/progress"
    );
    gw.signal(Signal::SIGTERM);
    wait_until_async("the drain to begin", || async {
        mcp.readyz().await.filter(|(s, _)| *s == 503).map(|_| ())
    })
    .await;
    gw.signal(Signal::SIGTERM);
    let status = gw.wait_exit();
    assert_eq!(status.code(), Some(1), "{}", gw.stderr());
    assert!(
        gw.stderr().contains(
            "error: SIGTERM during the graceful shutdown: exiting at once; calls still running were cut off and child processes killed"
        ),
        "{}",
        gw.stderr()
    );
    wait_until("every child to be gone", || {
        survivors(&run).is_empty().then_some(())
    });
}

// ---------------------------------------------------------------------------------------------
// (4) Idle shutdown of a lazy server.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_lazy_child_is_stopped_and_the_next_call_starts_a_new_one() {
    let dir = temp_dir("idle");
    let run = run_id("idle");
    let config = dir.join("manifold.toml");
    write_config(
        &config,
        &[
            gateway_section(&dir, ""),
            server(
                "lazy",
                &run,
                &[],
                "startup = \"lazy\"\nidle_shutdown = \"1s\"",
            ),
            server("eager", &run, &[], ""),
        ]
        .concat(),
    );
    let mut gw = Serving::start(&dir, &config);
    let gw_pid = gw.pid();
    let mcp = Mcp::new(&gw);
    wait_until("the eager child", || {
        (count(&servers_of(gw_pid, &run), "eager") == 1).then_some(())
    });
    assert_eq!(
        count(&servers_of(gw_pid, &run), "lazy"),
        0,
        "not started yet"
    );
    let sid = mcp.session().await;
    mcp.echo(&sid, 1, "lazy").await;
    let first = servers_of(gw_pid, &run)["lazy"].clone();
    assert_eq!(first.len(), 1);
    wait_until("the idle child to be stopped", || {
        (!process_is_running(first[0]) && count(&servers_of(gw_pid, &run), "lazy") == 0)
            .then_some(())
    });
    // Calls to other servers do not wake it; health shows it idle.
    mcp.echo(&sid, 2, "eager").await;
    let (_, health) = mcp.call(&sid, 3, "manifold_health", json!({})).await;
    let lazy = health["result"]["structuredContent"]["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "lazy")
        .unwrap()
        .clone();
    assert_eq!(lazy["state"], "idle", "{health}");
    assert_eq!(count(&servers_of(gw_pid, &run), "lazy"), 0);
    // The next call that needs it starts a new child and is answered.
    mcp.echo(&sid, 4, "lazy").await;
    let second = servers_of(gw_pid, &run)["lazy"].clone();
    assert_eq!(second.len(), 1);
    assert_ne!(second, first);

    gw.signal(Signal::SIGTERM);
    assert_eq!(gw.wait_exit().code(), Some(0), "{}", gw.stderr());
    assert_eq!(survivors(&run), Vec::new());
}

// ---------------------------------------------------------------------------------------------
// (5) Idle legacy sessions expire, and their own children with them.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_expires_with_its_children_while_one_with_an_open_stream_lives_on() {
    let dir = temp_dir("ttl");
    let run = run_id("ttl");
    let config = dir.join("manifold.toml");
    write_config(
        &config,
        &[
            gateway_section(&dir, "session_idle_ttl = \"1s\""),
            server("mine", &run, &[], "scope = \"session\""),
        ]
        .concat(),
    );
    let mut gw = Serving::start(&dir, &config);
    let gw_pid = gw.pid();
    let mcp = Mcp::new(&gw);
    let shared = wait_until("the shared child", || {
        servers_of(gw_pid, &run).get("mine").cloned()
    });
    let idle = mcp.session().await;
    mcp.echo(&idle, 1, "mine").await;
    let open = mcp.session().await;
    mcp.echo(&open, 1, "mine").await;
    let _stream = mcp.listen(&open).await;
    let all = servers_of(gw_pid, &run)["mine"].clone();
    assert_eq!(all.len(), 3);
    // Which child is whose: the idle session's ends when it expires.
    let own: Vec<u32> = all.into_iter().filter(|p| !shared.contains(p)).collect();
    let gone = wait_until("the idle session's child to end", || {
        let now = servers_of(gw_pid, &run)["mine"].clone();
        let ended: Vec<u32> = own.iter().copied().filter(|p| !now.contains(p)).collect();
        (!ended.is_empty()).then_some(ended)
    });
    assert_eq!(gone.len(), 1, "only the idle session's child ended");
    let (status, expired) = mcp
        .call(&idle, 2, "mine__echo", json!({"message": "hi"}))
        .await;
    assert_eq!(status, 404, "{expired}");
    assert_eq!(expired["error"]["code"], -32008);
    // The session with an open stream was idle just as long, yet lives on with its child.
    mcp.echo(&open, 2, "mine").await;
    let survivor: Vec<u32> = own.into_iter().filter(|p| !gone.contains(p)).collect();
    assert!(process_is_running(survivor[0]));

    gw.signal(Signal::SIGTERM);
    assert_eq!(gw.wait_exit().code(), Some(0), "{}", gw.stderr());
    assert_eq!(survivors(&run), Vec::new());
}

// ---------------------------------------------------------------------------------------------
// Reload re-applies the rules.

/// The tool names a session's `tools/list` shows.
async fn tool_names(mcp: &Mcp, sid: &str, id: u64) -> Vec<String> {
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":{}});
    let r = mcp
        .post(Some(sid), "application/json", &body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    v["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {v}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_new_rules_to_live_sessions_before_serving_them() {
    let dir = temp_dir("reload-rules");
    let run = run_id("reload-rules");
    let config = dir.join("manifold.toml");
    let plain = [gateway_section(&dir, ""), server("peer", &run, &[], "")].concat();
    write_config(&config, &plain);
    let mut gw = Serving::start(&dir, &config);
    let gw_pid = gw.pid();
    let mcp = Mcp::new(&gw);
    let children = wait_until("the peer's child", || {
        let s = servers_of(gw_pid, &run);
        (count(&s, "peer") == 1).then_some(s)
    });
    let sid = mcp.session().await;
    let names = tool_names(&mcp, &sid, 1).await;
    assert!(
        names.contains(&"peer__add".to_owned()) && names.contains(&"peer__echo".to_owned()),
        "{names:?}"
    );
    let (_, added) = mcp
        .call(&sid, 2, "peer__add", json!({"a": 1, "b": 2}))
        .await;
    assert_eq!(added["result"]["isError"], false, "{added}");
    let events = mcp.listen(&sid).await.collect_methods();

    // Without authentication on loopback every caller is anonymous: the new rule hides the tool
    // from this very session.
    let guarded = format!(
        "{plain}\n[[rules]]\nname = \"no-add\"\neffect = \"deny\"\nanonymous = true\ntools = [\"peer__add\"]\n"
    );
    write_config(&config, &guarded);
    gw.wait_for_log("reloaded", 1);
    let logged = gw.stderr();
    assert!(
        logged.contains("added: none; removed: none; changed (restarted): none; unchanged: peer; [[rules]], [toolsets] and [rate_limits]: replaced"),
        "{logged}"
    );
    assert!(
        !logged.contains("apply only when Manifold restarts"),
        "rules are not left for a restart: {logged}"
    );
    let names = tool_names(&mcp, &sid, 3).await;
    assert!(
        !names.contains(&"peer__add".to_owned()) && names.contains(&"peer__echo".to_owned()),
        "{names:?}"
    );
    let (status, hidden) = mcp
        .call(&sid, 4, "peer__add", json!({"a": 1, "b": 2}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    assert_eq!(
        hidden["error"]["message"], "unknown tool \"peer__add\"; did you mean \"peer__ask\"?",
        "{hidden}"
    );
    mcp.echo(&sid, 5, "peer").await;
    wait_until("list_changed on the session's stream", || {
        methods(&events)
            .contains(&"notifications/tools/list_changed".to_owned())
            .then_some(())
    });
    assert_eq!(
        servers_of(gw_pid, &run),
        children,
        "a change of rules restarts no server"
    );

    gw.signal(Signal::SIGTERM);
    assert_eq!(gw.wait_exit().code(), Some(0), "{}", gw.stderr());
    assert_eq!(survivors(&run), Vec::new());
}

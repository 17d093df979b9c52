//! `manifold serve` with a stdio server under `network = "allow"`: the gateway serves the egress
//! proxy on the listener the sandbox handed over, so the server's HTTP client (python urllib, with
//! the proxy env the launcher sets) reaches the listed host, gets 403 for another, cannot connect
//! around the proxy, and `/metrics` counts each decision.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use manifold_testkit::{GatewayProcess, RawHttp, ServeCommand};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// A stdio MCP server with `fetch` (GET a URL through the env's proxy: status and body) and
/// `direct` (a plain TCP connect to 127.0.0.1:PORT: "connected" or the errno name).
const FETCH_SERVER: &str = r#"
import errno, json, socket, sys, urllib.error, urllib.request
def fetch(url):
    try:
        r = urllib.request.urlopen(url, timeout=10)
        return "%d %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode().strip())
def direct(port):
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=5)
        return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, r = m.get("method"), None
    if method == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "fetcher", "version": "1"}}
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"arg": {"type": "string"}}, "required": ["arg"]}
        r = {"tools": [{"name": "fetch", "inputSchema": schema},
                       {"name": "direct", "inputSchema": schema}]}
    elif method == "tools/call":
        p = m["params"]
        text = (fetch if p["name"] == "fetch" else direct)(p["arguments"]["arg"])
        r = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn serve(dir: &Path, config: &str) -> GatewayProcess {
    manifold_testkit::workspace_binary("manifold-sandbox", "manifold-sandbox-exec").unwrap();
    ServeCommand::new(MANIFOLD, dir)
        .config_text(config)
        .env(
            "RUST_LOG",
            "warn,manifold_upstream=info,manifold_egress=info",
        )
        .env_remove("MANIFOLD_SANDBOX_FORCE_PROBE")
        .start()
        .unwrap()
}

fn call(url: &str, tool: &str, arg: &str) -> String {
    let arg = format!("arg={arg}");
    let out = Command::new(MANIFOLD)
        .args(["call", url, tool, "--arg", &arg])
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The gateway's `/metrics` body.
fn metrics(url: &str) -> String {
    RawHttp::new(url).get("/metrics").unwrap().decoded_body()
}

/// An HTTP server on the host's 127.0.0.1 answering every request `hello`.
fn host_http_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    port
}

fn scratch(label: &str) -> PathBuf {
    let dir = manifold_testkit::fresh_dir(label).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn an_allow_server_reaches_its_listed_host_only_through_the_gateways_proxy() {
    let dir = scratch("sandboxed-egress");
    let port = host_http_server();
    let scripts = dir.join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("fetcher.py");
    std::fs::write(&script, FETCH_SERVER).unwrap();
    // The listed host is the host's loopback (all CI has), opened for the proxy by allow_private.
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.boxed]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.boxed.sandbox]\nprofile = \"strict\"\nread_only = [\"{scripts}\"]\n\
         network = \"allow\"\nallow_hosts = [\"localhost:{port}\"]\n\
         allow_private = [\"127.0.0.0/8\", \"::1\"]\n\n\
         [servers.plain]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.plain.sandbox]\nprofile = \"off\"\n",
        data = path_str(&dir.join("data")),
        script = path_str(&script),
        scripts = path_str(&scripts),
    );
    let s = serve(&dir, &config);
    // `localhost.` is not in NO_PROXY, so urllib sends it to the proxy.
    let allowed = call(
        s.url(),
        "boxed__fetch",
        &format!("http://localhost.:{port}/x"),
    );
    assert!(allowed.contains("200 hello"), "{allowed}");
    let refused = call(
        s.url(),
        "boxed__fetch",
        &format!("http://other.invalid:{port}/x"),
    );
    assert!(
        refused.contains(&format!(
            "403 manifold egress proxy: refused other.invalid:{port}: not in allow_hosts"
        )),
        "{refused}"
    );
    let direct = call(s.url(), "boxed__direct", &port.to_string());
    assert!(direct.contains("EACCES"), "{direct}");
    let plain = call(s.url(), "plain__direct", &port.to_string());
    assert!(
        plain.contains("connected"),
        "unsandboxed it connects: {plain}"
    );
    let text = metrics(s.url());
    for decision in ["allowed", "refused_host"] {
        let series = format!(
            "manifold_sandbox_egress_total{{upstream=\"boxed\",decision=\"{decision}\"}} 1"
        );
        assert!(text.contains(&series), "{series} missing from:\n{text}");
    }
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("allow-list: 1 hosts") && l.contains("boxed")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("refused_host")
            && l.contains("other.invalid")),
        "{log}"
    );
}

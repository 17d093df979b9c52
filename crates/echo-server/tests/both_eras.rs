//! Why: the benchmark's figures are only fair if its upstream is a correct MCP server in both eras
//! and on both transports; these tests talk to the real binary over stdio and HTTP with raw bytes
//! (no MCP library), so what they check is what any client would see.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const ECHO: &str = env!("CARGO_BIN_EXE_manifold-echo");
const MODERN: &str = "2026-07-28";

/// A child killed when the test ends, whatever happens.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}
    })
}

struct Stdio3 {
    _child: Running,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Stdio3 {
    fn start(args: &[&str]) -> Stdio3 {
        let mut child = Command::new(ECHO)
            .arg("stdio")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Stdio3 {
            _child: Running(child),
            stdin,
            stdout,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn ask(&mut self, message: &Value) -> Value {
        self.send(message);
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

#[test]
fn over_stdio_both_eras_list_and_echo_and_notifications_get_no_answer() {
    let mut echo = Stdio3::start(&["--tools", "3"]);
    let init = echo.ask(
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["serverInfo"]["name"], "manifold-echo");

    // A notification is not answered: the next line read is the ping's answer.
    echo.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let pong = echo.ask(&json!({"jsonrpc":"2.0","id":"p","method":"ping"}));
    assert_eq!(pong, json!({"jsonrpc":"2.0","id":"p","result":{}}));

    let list = echo.ask(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "echo_1", "echo_2"]);

    let legacy = echo.ask(&json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
        "params":{"name":"echo_2","arguments":{"message":"héllo \"there\""}}}));
    assert_eq!(legacy["result"]["content"][0]["text"], "héllo \"there\"");
    assert!(
        legacy["result"].get("resultType").is_none(),
        "legacy results carry no resultType"
    );

    let discover = echo.ask(&json!({"jsonrpc":"2.0","id":4,"method":"server/discover",
        "params":{"_meta": modern_meta()}}));
    assert_eq!(discover["result"]["supportedVersions"], json!([MODERN]));

    let modern = echo.ask(&json!({"jsonrpc":"2.0","id":5,"method":"tools/call",
        "params":{"name":"echo","arguments":{"message":"hi"},"_meta": modern_meta()}}));
    assert_eq!(modern["result"]["content"][0]["text"], "hi");
    assert_eq!(modern["result"]["resultType"], "complete");

    let unknown = echo.ask(&json!({"jsonrpc":"2.0","id":6,"method":"tools/call",
        "params":{"name":"echo_3","arguments":{"message":"x"}}}));
    assert_eq!(unknown["error"]["code"], -32602);

    let removed = echo
        .ask(&json!({"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta": modern_meta()}}));
    assert_eq!(
        removed["error"]["code"], -32601,
        "ping is gone in the modern era"
    );
}

/// One HTTP/1.1 exchange on a fresh connection: (status, headers in lower case, body).
fn http(
    addr: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn start_http() -> (Running, String) {
    let mut child = Command::new(ECHO)
        .args(["http", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (Running(child), addr)
}

#[test]
fn over_http_a_legacy_session_is_required_kept_and_ended() {
    let (_echo, addr) = start_http();
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}"#;
    let (status, _, _) = http(&addr, "POST", &[], call);
    assert_eq!(status, 400, "a legacy request without a session");
    let (status, _, _) = http(&addr, "POST", &[("Mcp-Session-Id", "echo-ffff")], call);
    assert_eq!(status, 404, "a session never opened");

    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let (status, headers, body) = http(&addr, "POST", &[], init);
    assert_eq!(status, 200);
    let session = header(&headers, "mcp-session-id").unwrap().to_owned();
    let result: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(result["result"]["protocolVersion"], "2025-11-25");

    let with_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let (status, _, body) = http(
        &addr,
        "POST",
        &with_session,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!((status, body.as_str()), (202, ""));
    let (status, headers, body) = http(&addr, "POST", &with_session, call);
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], "hi");

    let (status, _, _) = http(&addr, "DELETE", &with_session, "");
    assert_eq!(status, 204);
    let (status, _, _) = http(&addr, "POST", &with_session, call);
    assert_eq!(status, 404, "an ended session");
    let (status, _, _) = http(&addr, "GET", &with_session, "");
    assert_eq!(status, 405, "no GET stream is offered");
}

#[test]
fn over_http_a_modern_request_must_mirror_its_headers_and_declare_capabilities() {
    let (_echo, addr) = start_http();
    let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call",
        "params":{"name":"echo","arguments":{"message":"modern"},"_meta": modern_meta()}})
    .to_string();
    let mirrored = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    let (status, _, reply) = http(&addr, "POST", &mirrored, &body);
    assert_eq!(status, 200);
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], "modern");
    assert_eq!(reply["result"]["resultType"], "complete");

    let wrong_name = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "other"),
    ];
    let (status, _, reply) = http(&addr, "POST", &wrong_name, &body);
    assert_eq!(status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&reply).unwrap()["error"]["code"],
        -32020
    );

    let no_capabilities = json!({"jsonrpc":"2.0","id":10,"method":"tools/list",
        "params":{"_meta":{"io.modelcontextprotocol/protocolVersion": MODERN}}})
    .to_string();
    let list_headers = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/list"),
    ];
    let (status, _, reply) = http(&addr, "POST", &list_headers, &no_capabilities);
    assert_eq!(status, 400);
    assert_eq!(
        serde_json::from_str::<Value>(&reply).unwrap()["error"]["code"],
        -32602
    );
}

//! `manifold inspect|list|call|read|prompt`: Manifold as a command-line MCP client.
//!
//! Each command resolves its target, connects through manifold-upstream (which negotiates the era
//! and transport), does one thing, renders it for a person (or prints raw JSON with `--json`), and
//! closes the connection so no child process outlives the command.

pub mod arguments;
pub mod conformance;
pub mod export;
pub mod render;
pub mod target;
pub mod terminal;

use std::sync::Arc;

use manifold_upstream::paginate::{ListKind, result_or_error};
use manifold_upstream::{
    CallEvent, CallOptions, ClientIdentity, ConnectOptions, Connection, PeerInfo,
    RefuseServerRequests, UpstreamError, connect_within,
};
use manifold_wire::{Message, meta};
use serde_json::Value;
use tokio::time::Instant;

use crate::args::{ListWhat, TargetArgs};
use crate::report::{CliError, Outcome};
use render::Style;
use target::Resolved;
use terminal::{INTERACTIVE_CAPABILITIES, ProgressBar, TerminalHandler};

/// An open connection plus what the command needs to know about it.
struct Session {
    conn: Connection,
    info: PeerInfo,
    options: CallOptions,
    /// When the set-up (era probe, handshake, first list) must be done: `--timeout` after start.
    setup_deadline: Instant,
    json: bool,
    style: Style,
}

impl Session {
    /// The options of the first list, which is still part of the set-up: it gets what is left
    /// of `--timeout`, so a server that stalls there fails when the set-up deadline passes.
    fn first_list_options(&self) -> CallOptions {
        let left = self
            .setup_deadline
            .saturating_duration_since(Instant::now())
            .max(MIN_FIRST_LIST_WAIT);
        CallOptions {
            timeout: self.options.timeout.min(left),
            ..self.options
        }
    }
}

/// The least the first list may wait, when the handshake used up nearly all of `--timeout`.
pub const MIN_FIRST_LIST_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// What a method still unanswered at the set-up deadline says about the phase it stalled in.
fn setup_phase(method: &str) -> &'static str {
    match method {
        meta::method::DISCOVER => "the era probe",
        meta::method::INITIALIZE => "the handshake",
        _ => "the connection set-up",
    }
}

/// A set-up that ran past `--timeout`, said as such rather than as a slow answer.
fn setup_timed_out(error: UpstreamError, timeout: std::time::Duration) -> CliError {
    match error {
        UpstreamError::Timeout { server, method, .. } => CliError::with_hint(
            format!(
                "connecting to server {server:?} took longer than --timeout {}s: {} got no answer to {method}",
                timeout.as_secs_f64(),
                setup_phase(&method)
            ),
            "check that the command is an MCP server that writes JSON-RPC to stdout (-v shows its stderr), or raise --timeout",
        ),
        other => other.into(),
    }
}

async fn open(args: &TargetArgs, resolved: &Resolved) -> Result<Session, CliError> {
    let mut options = ConnectOptions::new(resolved.label.clone());
    options.era = resolved.era;
    if args.interactive {
        options.client = ClientIdentity {
            capabilities: INTERACTIVE_CAPABILITIES.to_owned(),
            ..ClientIdentity::default()
        };
        options.handler = Arc::new(TerminalHandler::default());
    } else {
        options.handler = Arc::new(RefuseServerRequests);
    }
    let setup_deadline = Instant::now() + resolved.timeout;
    let (conn, info) = connect_within(&resolved.target, &options, setup_deadline)
        .await
        .map_err(|e| setup_timed_out(e, resolved.timeout))?;
    Ok(Session {
        conn,
        info,
        options: CallOptions::with_timeout(resolved.timeout),
        setup_deadline,
        json: args.json,
        style: Style::stdout(),
    })
}

/// Runs `f` with an open session and always closes it afterwards.
async fn with_session<F, Fut>(
    args: &TargetArgs,
    names: usize,
    usage: &str,
    f: F,
) -> Result<Outcome, CliError>
where
    F: FnOnce(Session, Vec<String>) -> Fut,
    Fut: std::future::Future<Output = (Connection, Result<Outcome, CliError>)>,
{
    let resolved = target::resolve(args, names, usage)?;
    let names = resolved.names.clone();
    let session = open(args, &resolved).await?;
    let (conn, outcome) = f(session, names).await;
    conn.close().await;
    outcome
}

fn has_capability(info: &PeerInfo, name: &str) -> bool {
    serde_json::from_str::<Value>(&info.capabilities)
        .ok()
        .and_then(|c| c.get(name).cloned())
        .is_some()
}

async fn list_values(s: &Session, kind: ListKind) -> Result<Vec<Value>, CliError> {
    let items = s.conn.list_all(kind, s.options).await?;
    Ok(items
        .iter()
        .filter_map(|r| serde_json::from_str(r.get()).ok())
        .collect())
}

fn raw_list_json(member: &str, items: &[Box<serde_json::value::RawValue>]) -> String {
    let joined: Vec<&str> = items.iter().map(|r| r.get()).collect();
    format!("{{\"{member}\":[{}]}}", joined.join(","))
}

/// `manifold inspect TARGET`.
pub async fn inspect(args: &TargetArgs) -> Result<Outcome, CliError> {
    with_session(
        args,
        0,
        "manifold inspect URL | manifold inspect -- COMMAND ARGS...",
        |s, _| async move {
            let result = inspect_in(&s).await;
            (s.conn, result)
        },
    )
    .await
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
async fn inspect_in(s: &Session) -> Result<Outcome, CliError> {
    let mut counts = Vec::new();
    for (cap, kind) in [
        ("tools", ListKind::Tools),
        ("resources", ListKind::Resources),
        ("resources", ListKind::Templates),
        ("prompts", ListKind::Prompts),
    ] {
        let count = if has_capability(&s.info, cap) {
            match s.conn.list_all(kind, s.options).await {
                Ok(items) => Some(items.len().to_string()),
                Err(e) => Some(format!("error: {e}")),
            }
        } else {
            None
        };
        let label = if kind == ListKind::Templates {
            "templates"
        } else {
            kind.member()
        };
        counts.push((label, count));
    }
    if s.json {
        let counts_json: serde_json::Map<String, Value> = counts
            .iter()
            .map(|(k, v)| {
                let n = v.as_deref().and_then(|v| v.parse::<u64>().ok());
                ((*k).to_owned(), n.map_or(Value::Null, Value::from))
            })
            .collect();
        println!(
            "{{\"era\":{},\"revision\":{},\"transport\":{},\"result\":{},\"counts\":{}}}",
            Value::from(format!("{:?}", s.info.era).to_lowercase()),
            Value::from(s.info.revision.as_str()),
            Value::from(s.conn.describe()),
            s.info.raw,
            Value::Object(counts_json)
        );
        return Ok(Outcome::Success);
    }
    let st = s.style;
    let caps: Value = serde_json::from_str(&s.info.capabilities).unwrap_or(Value::Null);
    let cap_list = caps
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let subs: Vec<String> = v
                        .as_object()
                        .map(|o| {
                            o.iter()
                                .filter(|(_, b)| b.as_bool() == Some(true))
                                .map(|(n, _)| n.clone())
                                .collect()
                        })
                        .unwrap_or_default();
                    if subs.is_empty() {
                        k.clone()
                    } else {
                        format!("{k} ({})", subs.join(", "))
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let mut rows = vec![
        vec![
            "server".to_owned(),
            format!(
                "{} {}",
                s.info.server_name.as_deref().unwrap_or("(unnamed)"),
                s.info.server_version.as_deref().unwrap_or("")
            )
            .trim_end()
            .to_owned(),
        ],
        vec![
            "era".to_owned(),
            format!(
                "{} (revision {})",
                format!("{:?}", s.info.era).to_lowercase(),
                s.info.revision
            ),
        ],
        vec!["transport".to_owned(), s.conn.describe()],
        vec![
            "capabilities".to_owned(),
            if cap_list.is_empty() {
                "(none)".to_owned()
            } else {
                cap_list
            },
        ],
    ];
    if let Some(i) = &s.info.instructions {
        rows.push(vec![
            "instructions".to_owned(),
            i.lines().next().unwrap_or("").to_owned(),
        ]);
    }
    for (name, count) in counts {
        rows.push(vec![
            name.to_owned(),
            count.unwrap_or_else(|| "- (not offered)".to_owned()),
        ]);
    }
    let mut out = String::new();
    for r in rows {
        let key = r.first().cloned().unwrap_or_default();
        let val = r.get(1).cloned().unwrap_or_default();
        out.push_str(&format!("{}  {val}\n", st.bold(&format!("{key:<13}"))));
    }
    print!("{out}");
    Ok(Outcome::Success)
}

/// `manifold list WHAT TARGET`.
pub async fn list(what: ListWhat, args: &TargetArgs) -> Result<Outcome, CliError> {
    let kind = match what {
        ListWhat::Tools => ListKind::Tools,
        ListWhat::Resources => ListKind::Resources,
        ListWhat::Templates => ListKind::Templates,
        ListWhat::Prompts => ListKind::Prompts,
    };
    with_session(
        args,
        0,
        "manifold list tools|resources|templates|prompts URL | ... -- COMMAND ARGS...",
        |s, _| async move {
            let result = async {
                let items = s.conn.list_all(kind, s.first_list_options()).await?;
                if s.json {
                    println!("{}", raw_list_json(kind.member(), &items));
                    return Ok(Outcome::Success);
                }
                let values: Vec<Value> = items
                    .iter()
                    .filter_map(|r| serde_json::from_str(r.get()).ok())
                    .collect();
                let text = match kind {
                    ListKind::Tools => render::tools(s.style, &values),
                    ListKind::Resources => render::resources(s.style, &values),
                    ListKind::Templates => render::templates(s.style, &values),
                    ListKind::Prompts => render::prompts(s.style, &values),
                };
                print!("{text}");
                Ok(Outcome::Success)
            }
            .await;
            (s.conn, result)
        },
    )
    .await
}

/// Sends a request, showing progress and log notifications, answering `input_required` rounds,
/// and cancelling on Ctrl-C.
async fn run_request(s: &Session, method: &str, params: String) -> Result<Message, CliError> {
    let mut bar = ProgressBar::new();
    let mut params = params;
    for _ in 0..=manifold_upstream::mrtr::MAX_INPUT_ROUNDS {
        let mut call = s.conn.request(method, Some(&params), s.options).await?;
        let response = loop {
            tokio::select! {
                event = call.next() => match event {
                    Some(Ok(CallEvent::Notification(n))) => show_notification(&mut bar, &n),
                    Some(Ok(CallEvent::Response(m))) => break m,
                    Some(Err(e)) => { bar.finish(); return Err(e.into()); }
                    None => { bar.finish(); return Err(CliError::usage("the call ended without a response")); }
                },
                _ = tokio::signal::ctrl_c() => {
                    bar.finish();
                    let e = call.cancel("interrupted by the user (Ctrl-C)");
                    return Err(e.into());
                }
            }
        };
        bar.finish();
        match s.conn.input_retry(&params, &response).await? {
            Some(retry) => params = retry,
            None => return Ok(response),
        }
    }
    Err(s.conn.too_many_rounds(method).into())
}

fn show_notification(bar: &mut ProgressBar, n: &Message) {
    let params: Value = n
        .params()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(Value::Null);
    match n.method() {
        Some(meta::method::PROGRESS) => bar.update(&params),
        Some(meta::method::MESSAGE) => {
            bar.finish();
            let level = params
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("info");
            let data = params.get("data").map(|d| match d {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            eprintln!("[server {level}] {}", data.unwrap_or_default());
        }
        _ => {}
    }
}

fn result_value(
    s: &Session,
    method: &str,
    response: &Message,
) -> Result<(String, Value), CliError> {
    let raw = result_or_error(&s.conn, method, response)?.to_owned();
    let value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    Ok((raw, value))
}

/// `manifold call [URL] TOOL [--arg k=v] [--json '{...}'] [-- COMMAND]`.
pub async fn call(
    args: &TargetArgs,
    pairs: &[String],
    json_args: Option<&str>,
) -> Result<Outcome, CliError> {
    let pairs = pairs.to_vec();
    let json_args = json_args.map(str::to_owned);
    with_session(
        args,
        1,
        "manifold call [URL] TOOL [--arg key=value ...] [--json '{...}'] [-- COMMAND ARGS...]",
        |s, names| async move {
            let result = async {
                let tool = names.first().cloned().unwrap_or_default();
                let tools = list_values(&s, ListKind::Tools).await?;
                let Some(def) = tools
                    .iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some(tool.as_str()))
                else {
                    let names = tools
                        .iter()
                        .filter_map(|t| t.get("name").and_then(Value::as_str));
                    let hint = match manifold_gateway::catalog::suggest::closest(&tool, names) {
                        Some(n) => {
                            format!("did you mean {n:?}? `manifold list tools` shows them all")
                        }
                        None => {
                            "`manifold list tools` shows the tools this server offers".to_owned()
                        }
                    };
                    return Err(CliError::with_hint(
                        format!("the server has no tool named {tool:?}"),
                        hint,
                    ));
                };
                let arguments =
                    arguments::build(def.get("inputSchema"), json_args.as_deref(), &pairs)?;
                let params = serde_json::json!({
                    "name": tool,
                    "arguments": arguments,
                    "_meta": { "progressToken": 1 }
                })
                .to_string();
                let response = run_request(&s, meta::method::TOOLS_CALL, params).await?;
                let (raw, value) = result_value(&s, meta::method::TOOLS_CALL, &response)?;
                let is_error = value.get("isError").and_then(Value::as_bool) == Some(true);
                if s.json {
                    println!("{raw}");
                } else {
                    print!("{}", render::tool_result(s.style, &value));
                }
                Ok(if is_error {
                    Outcome::ToolError
                } else {
                    Outcome::Success
                })
            }
            .await;
            (s.conn, result)
        },
    )
    .await
}

/// `manifold read [URL] URI [-- COMMAND]`.
pub async fn read(args: &TargetArgs) -> Result<Outcome, CliError> {
    with_session(
        args,
        1,
        "manifold read [URL] URI [-- COMMAND ARGS...]",
        |s, names| async move {
            let result = async {
                let uri = names.first().cloned().unwrap_or_default();
                let params = serde_json::json!({ "uri": uri }).to_string();
                let response = run_request(&s, meta::method::RESOURCES_READ, params).await?;
                let (raw, value) = result_value(&s, meta::method::RESOURCES_READ, &response)?;
                if s.json {
                    println!("{raw}");
                } else {
                    print!("{}", render::read_result(s.style, &value));
                }
                Ok(Outcome::Success)
            }
            .await;
            (s.conn, result)
        },
    )
    .await
}

/// `manifold prompt [URL] NAME [--arg k=v] [-- COMMAND]`.
pub async fn prompt(args: &TargetArgs, pairs: &[String]) -> Result<Outcome, CliError> {
    let pairs = pairs.to_vec();
    with_session(
        args,
        1,
        "manifold prompt [URL] NAME [--arg key=value ...] [-- COMMAND ARGS...]",
        |s, names| async move {
            let result = async {
                let name = names.first().cloned().unwrap_or_default();
                let mut arguments = serde_json::Map::new();
                for p in &pairs {
                    let (k, v) = p
                        .split_once('=')
                        .ok_or_else(|| CliError::usage(format!("--arg {p:?} is not key=value")))?;
                    arguments.insert(k.to_owned(), Value::from(v));
                }
                let params =
                    serde_json::json!({ "name": name, "arguments": arguments }).to_string();
                let response = run_request(&s, meta::method::PROMPTS_GET, params).await?;
                let (raw, value) = result_value(&s, meta::method::PROMPTS_GET, &response)?;
                if s.json {
                    println!("{raw}");
                } else {
                    print!("{}", render::prompt_result(s.style, &value));
                }
                Ok(Outcome::Success)
            }
            .await;
            (s.conn, result)
        },
    )
    .await
}

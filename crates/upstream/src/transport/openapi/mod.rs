//! A server made from an OpenAPI document (`[servers.NAME] openapi = "spec.yaml"`): no process and
//! no MCP on the other side, but a [`Transport`] that answers the connection's MCP requests itself
//! (`initialize`, `tools/list`, `tools/call`, `ping`) from the document's operations, each call an
//! HTTP request to `base_url` made with the server's headers, trust roots and URL policy. So the
//! gateway supervises, names, pins, authorizes and audits these tools as any server's.

pub mod document;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use manifold_wire::{ErrorCode, ErrorObject, Id, Kind, Message, Revision};
use serde_json::{Value, json};

use super::{Inbound, InboundRx, InboundTx, Transport};
use crate::error::UpstreamError;
use crate::http_client::{build_client, check_url, describe_error, read_body_limited};
use crate::http_spec::HttpSpec;
use document::{Location, Operation};

/// Largest API answer read into a result (the gateway cuts results to its own bound after).
pub const MAX_API_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// Largest OpenAPI document read.
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;

/// Where the document is and how the API is reached.
#[derive(Clone, Default, PartialEq)]
pub struct OpenApiSpec {
    /// A path, or an `http(s)://` URL fetched at each connect (with `api`'s trust settings).
    pub document: String,
    /// The API: `url` is its base URL; headers, CA bundle, client certificate and the insecure
    /// HTTP switch are as for an HTTP server.
    pub api: HttpSpec,
}

impl std::fmt::Debug for OpenApiSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenApiSpec")
            .field("document", &self.document)
            .field("api", &self.api)
            .finish()
    }
}

fn failed(server: &str, reason: String) -> UpstreamError {
    UpstreamError::Connect {
        server: server.to_owned(),
        reason,
    }
}

async fn read_document(
    spec: &OpenApiSpec,
    server: &str,
    client: &reqwest::Client,
) -> Result<String, UpstreamError> {
    let source = &spec.document;
    if source.starts_with("http://") || source.starts_with("https://") {
        let url = check_url(source, spec.api.allow_insecure_http)?;
        let response = client.get(url).send().await.map_err(|e| {
            failed(
                server,
                format!(
                    "could not fetch the OpenAPI document {source}: {}",
                    describe_error(&e)
                ),
            )
        })?;
        if !response.status().is_success() {
            return Err(failed(
                server,
                format!(
                    "fetching the OpenAPI document {source} answered HTTP {}",
                    response.status()
                ),
            ));
        }
        let body = read_body_limited(response, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| {
                failed(
                    server,
                    format!("could not read the OpenAPI document {source}: {e:?}"),
                )
            })?;
        return String::from_utf8(body).map_err(|_| {
            failed(
                server,
                format!("the OpenAPI document {source} is not UTF-8 text"),
            )
        });
    }
    let meta = std::fs::metadata(source).map_err(|e| {
        failed(
            server,
            format!("could not read the OpenAPI document {source}: {e}"),
        )
    })?;
    if meta.len() > MAX_DOCUMENT_BYTES as u64 {
        return Err(failed(
            server,
            format!("the OpenAPI document {source} is larger than {MAX_DOCUMENT_BYTES} bytes"),
        ));
    }
    std::fs::read_to_string(source).map_err(|e| {
        failed(
            server,
            format!("could not read the OpenAPI document {source}: {e}"),
        )
    })
}

/// Reads the document and starts the transport.
pub async fn start(
    server: &str,
    spec: &OpenApiSpec,
) -> Result<(Arc<dyn Transport>, InboundRx), UpstreamError> {
    let base = check_url(&spec.api.url, spec.api.allow_insecure_http)?;
    let client = build_client(&spec.api, server)?;
    let text = read_document(spec, server, &client).await?;
    let doc = document::parse(&text).map_err(|e| {
        failed(
            server,
            format!("the OpenAPI document {} cannot be used: {e}", spec.document),
        )
    })?;
    let operations = document::operations(&doc).map_err(|e| {
        failed(
            server,
            format!("the OpenAPI document {} cannot be used: {e}", spec.document),
        )
    })?;
    let title = doc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or(server)
        .to_owned();
    let version = doc
        .pointer("/info/version")
        .and_then(Value::as_str)
        .unwrap_or("0")
        .to_owned();
    let (tx, rx) = super::inbound_channel();
    let transport = OpenApiTransport {
        server: server.to_owned(),
        base: base.to_string().trim_end_matches('/').to_owned(),
        client,
        operations: Arc::new(operations),
        info: json!({ "name": title, "version": version }),
        inbound: tx,
        running: Arc::new(Mutex::new(HashMap::new())),
    };
    Ok((Arc::new(transport), rx))
}

struct OpenApiTransport {
    server: String,
    base: String,
    client: reqwest::Client,
    operations: Arc<Vec<Operation>>,
    info: Value,
    inbound: InboundTx,
    running: Arc<Mutex<HashMap<Id, tokio::task::AbortHandle>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OpenApiTransport {
    fn reply(&self, message: Message) {
        let inbound = self.inbound.clone();
        tokio::spawn(async move {
            let _ = inbound
                .send(Inbound::Message {
                    message,
                    related: None,
                })
                .await;
        });
    }

    fn answer_now(&self, id: &Id, method: &str, params: &Value) -> Option<Message> {
        Some(match method {
            "initialize" => {
                let asked = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let known: Vec<Revision> = Revision::legacy().collect();
                let agreed = manifold_wire::revision::legacy_server_answer(asked, &known);
                let result = json!({
                    "protocolVersion": agreed.as_str(),
                    "capabilities": { "tools": {} },
                    "serverInfo": self.info,
                    "instructions": format!("Tools made from the OpenAPI operations of {}.", self.info["name"].as_str().unwrap_or_default()),
                });
                Message::result(id, &result.to_string())
            }
            "ping" => Message::result(id, "{}"),
            "tools/list" => {
                let tools: Vec<&Value> = self.operations.iter().map(|o| &o.definition).collect();
                Message::result(id, &json!({ "tools": tools }).to_string())
            }
            "tools/call" => return None,
            other => Message::error(
                Some(id.clone()),
                &ErrorObject::new(
                    ErrorCode::MethodNotFound,
                    format!(
                        "an OpenAPI server answers initialize, ping, tools/list and tools/call, not {other}"
                    ),
                ),
            ),
        })
    }

    fn call(&self, id: Id, params: &Value) {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(op) = self.operations.iter().find(|o| o.tool == name).cloned() else {
            self.reply(Message::error(
                Some(id),
                &ErrorObject::new(ErrorCode::InvalidParams, format!("unknown tool {name:?}")),
            ));
            return;
        };
        let arguments = params
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let client = self.client.clone();
        let base = self.base.clone();
        let inbound = self.inbound.clone();
        let running = Arc::clone(&self.running);
        let key = id.clone();
        let task = tokio::spawn(async move {
            let result = perform(&client, &base, &op, &arguments).await;
            lock(&running).remove(&key);
            let message = Message::result(&key, &result.to_string());
            let _ = inbound
                .send(Inbound::Message {
                    message,
                    related: None,
                })
                .await;
        });
        lock(&self.running).insert(id, task.abort_handle());
    }
}

/// `text` with `{name}` of each path parameter replaced by its percent-encoded argument.
fn fill_path(template: &str, op: &Operation, arguments: &Value) -> Result<String, String> {
    let mut path = template.to_owned();
    for p in op
        .parameters
        .iter()
        .filter(|p| p.location == Location::Path)
    {
        let value = arguments
            .get(&p.name)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .ok_or_else(|| format!("the path parameter {:?} is required", p.name))?;
        let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes())
            .collect::<String>()
            .replace('+', "%20");
        path = path.replace(&format!("{{{}}}", p.name), &encoded);
    }
    Ok(path)
}

fn scalar(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

fn tool_error(text: String) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}

/// Makes the operation's request and turns the answer into a tool result.
async fn perform(client: &reqwest::Client, base: &str, op: &Operation, arguments: &Value) -> Value {
    let path = match fill_path(&op.path, op, arguments) {
        Ok(p) => p,
        Err(e) => return tool_error(e),
    };
    let Ok(method) = reqwest::Method::from_bytes(op.method.to_uppercase().as_bytes()) else {
        return tool_error(format!("{} is not an HTTP method", op.method));
    };
    let Ok(mut url) = url::Url::parse(&format!("{base}{path}")) else {
        return tool_error(format!(
            "{base}{path} is not a URL; check the arguments of the path"
        ));
    };
    let query: Vec<(String, String)> = op
        .parameters
        .iter()
        .filter(|p| p.location == Location::Query)
        .filter_map(|p| arguments.get(&p.name).map(|v| (p.name.clone(), scalar(v))))
        .collect();
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    let mut request = client.request(method, url);
    for p in op
        .parameters
        .iter()
        .filter(|p| p.location == Location::Header)
    {
        if let Some(v) = arguments.get(&p.name) {
            request = request.header(p.name.as_str(), scalar(v));
        }
    }
    if op.has_body
        && let Some(body) = arguments.get("body")
    {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            return tool_error(format!(
                "{} {path} failed: {}",
                op.method.to_uppercase(),
                describe_error(&e)
            ));
        }
    };
    let status = response.status();
    let json_answer = crate::http_client::media_type(&response)
        .is_some_and(|m| m == "application/json" || m.ends_with("+json"));
    let body = match read_body_limited(response, MAX_API_ANSWER_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return tool_error(format!(
                "the answer of {} {path} could not be read: {e:?}",
                op.method.to_uppercase()
            ));
        }
    };
    let text = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        return tool_error(format!(
            "{} {path} answered HTTP {}: {text}",
            op.method.to_uppercase(),
            status.as_u16()
        ));
    }
    let mut result = json!({ "content": [{ "type": "text", "text": text }], "isError": false });
    if json_answer && let Ok(parsed) = serde_json::from_str::<Value>(&text) {
        // Structured content is an object; another JSON value is wrapped so it still is one.
        result["structuredContent"] = if parsed.is_object() {
            parsed
        } else {
            json!({ "result": parsed })
        };
    }
    result
}

impl Transport for OpenApiTransport {
    fn send(&self, message: Message) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(async move {
            let params: Value = message
                .params()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or_else(|| json!({}));
            match message.kind() {
                Kind::Request => {
                    let (Some(id), Some(method)) = (message.id().cloned(), message.method()) else {
                        return Ok(());
                    };
                    match self.answer_now(&id, method, &params) {
                        Some(answer) => self.reply(answer),
                        None => self.call(id, &params),
                    }
                }
                Kind::Notification if message.method() == Some("notifications/cancelled") => {
                    if let Some(id) = params
                        .get("requestId")
                        .and_then(|v| Id::from_raw(&v.to_string()).ok())
                        && let Some(task) = lock(&self.running).remove(&id)
                    {
                        task.abort();
                    }
                }
                _ => {}
            }
            Ok(())
        })
    }

    fn cancel_request(&self, id: &Id) -> bool {
        match lock(&self.running).remove(id) {
            Some(task) => {
                task.abort();
                true
            }
            None => false,
        }
    }

    fn negotiated(&self, _revision: Revision) {}

    fn carries_server_requests(&self) -> bool {
        false
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for (_, task) in lock(&self.running).drain() {
                task.abort();
            }
            let _ = self
                .inbound
                .send(Inbound::Closed {
                    cause: format!("{} was stopped", self.server),
                })
                .await;
        })
    }

    fn describe(&self) -> String {
        format!("openapi {}", self.base)
    }
}

//! OpenAPI servers end to end (`[servers.NAME] openapi = "..."`, `base_url`): a small real HTTP API
//! started by this test (axum), described by an OpenAPI 3 document in YAML, put behind a real
//! `manifold serve`, and used by the real Python SDK client: each operation is a tool, path, query
//! and body arguments reach the API, the configured headers authenticate, a JSON answer is the
//! result's structured content, an HTTP error is a tool error naming the status.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path as UrlPath, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use manifold_testkit::{GatewayProcess, ScratchDir, ServeCommand, python, workspace_root};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Bounds one client run; never a performance assertion.
const CLIENT_HANG_GUARD: Duration = Duration::from_secs(120);
const API_KEY: &str = "pets-key-5d1";

const DOCUMENT: &str = r##"openapi: 3.0.3
info:
  title: Pet store
  version: "1.2"
paths:
  /pets:
    get:
      operationId: listPets
      summary: List the pets
      parameters:
        - name: limit
          in: query
          schema: {type: integer}
    post:
      operationId: createPet
      summary: Add a pet
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/NewPet"}
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: string}}
    get:
      operationId: getPet
      summary: One pet by id
components:
  schemas:
    NewPet:
      type: object
      required: [name]
      properties:
        name: {type: string}
"##;

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("x-api-key").and_then(|v| v.to_str().ok()) == Some(API_KEY)
}

/// The API: three pets, answers only with the key.
async fn start_api() -> String {
    let pets = || {
        vec![
            json!({"id": "1", "name": "rex"}),
            json!({"id": "2", "name": "tom"}),
            json!({"id": "3", "name": "kit"}),
        ]
    };
    let app = axum::Router::new()
        .route(
            "/v1/pets",
            get(
                move |headers: HeaderMap, Query(q): Query<Value>| async move {
                    if !authorized(&headers) {
                        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "no key"})));
                    }
                    let limit = q
                        .get("limit")
                        .and_then(Value::as_str)
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(10);
                    (
                        StatusCode::OK,
                        Json(json!(pets().into_iter().take(limit).collect::<Vec<_>>())),
                    )
                },
            )
            .post(|headers: HeaderMap, Json(body): Json<Value>| async move {
                if !authorized(&headers) {
                    return (StatusCode::UNAUTHORIZED, Json(json!({"error": "no key"})));
                }
                (
                    StatusCode::CREATED,
                    Json(json!({"id": "4", "name": body["name"]})),
                )
            }),
        )
        .route(
            "/v1/pets/{id}",
            get(
                move |headers: HeaderMap, UrlPath(id): UrlPath<String>| async move {
                    if !authorized(&headers) {
                        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "no key"})));
                    }
                    match pets().into_iter().find(|p| p["id"] == id.as_str()) {
                        Some(p) => (StatusCode::OK, Json(p)),
                        None => (
                            StatusCode::NOT_FOUND,
                            Json(json!({"error": format!("no pet {id}")})),
                        ),
                    }
                },
            ),
        );
    let addr = manifold_testkit::serve_router(app).await.unwrap();
    format!("http://{addr}/v1")
}

fn serve(dir: &Path, config: &Path) -> GatewayProcess {
    ServeCommand::new(MANIFOLD, dir)
        .config(config)
        .start()
        .unwrap()
}

async fn python_client(url: &str, calls: Value) -> Value {
    let script = workspace_root().join("crates/manifold/tests/clients/py_client.py");
    let plan = json!({"target": {"url": url}, "mode": "legacy", "calls": calls, "answers": {"name": "-", "sampled": "-", "model": "-"}});
    let out = tokio::time::timeout(
        CLIENT_HANG_GUARD,
        tokio::process::Command::new(python().unwrap())
            .arg(script)
            .arg(plan.to_string())
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("the client hung")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

#[tokio::test]
async fn each_operation_is_a_tool_that_calls_the_api_with_the_configured_headers() {
    let base = start_api().await;
    let dir = ScratchDir::new("openapi").unwrap();
    std::fs::write(dir.path().join("pets.yaml"), DOCUMENT).unwrap();
    let config = dir.path().join("manifold.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = {data}\n\n[servers.pets]\nopenapi = \"pets.yaml\"\nbase_url = {base}\nheaders = {{ X-Api-Key = \"{API_KEY}\" }}\n",
            data = serde_json::to_string(&dir.path().join("data").to_string_lossy()).unwrap(),
            base = serde_json::to_string(&base).unwrap(),
        ),
    )
    .unwrap();
    let gateway = serve(dir.path(), &config);
    let url = gateway.url().to_owned();

    let calls = json!([
        {"name": "pets__listPets", "arguments": {"limit": 2}},
        {"name": "pets__getPet", "arguments": {"petId": "3"}},
        {"name": "pets__createPet", "arguments": {"body": {"name": "bo"}}},
    ]);
    let report = python_client(&url, calls).await;
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in ["pets__listPets", "pets__createPet", "pets__getPet"] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    let listed = &report["calls"]["pets__listPets"];
    assert_eq!(listed["isError"], false, "{listed}");
    assert_eq!(
        listed["structured"]["result"].as_array().unwrap().len(),
        2,
        "the query limit reached the API: {listed}"
    );
    let one = &report["calls"]["pets__getPet"];
    assert_eq!(
        one["structured"]["name"], "kit",
        "the path argument reached the API: {one}"
    );
    let made = &report["calls"]["pets__createPet"];
    assert_eq!(
        made["structured"],
        json!({"id": "4", "name": "bo"}),
        "the body reached the API: {made}"
    );

    let missing = python_client(
        &url,
        json!([{"name": "pets__getPet", "arguments": {"petId": "9"}}]),
    )
    .await;
    let missing = &missing["calls"]["pets__getPet"];
    assert_eq!(missing["isError"], true, "{missing}");
    assert!(
        missing["texts"][0].as_str().unwrap().contains("HTTP 404"),
        "{missing}"
    );

    // The schema was resolved from the document's $ref, and the title came from the summary.
    let inspected = Command::new(MANIFOLD)
        .args(["list", "tools", &url, "--json"])
        .output()
        .unwrap();
    let listing: Value = serde_json::from_slice(&inspected.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&inspected.stdout),
            String::from_utf8_lossy(&inspected.stderr)
        )
    });
    let create = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "pets__createPet")
        .unwrap()
        .clone();
    assert_eq!(create["title"], "Add a pet", "{create}");
    assert_eq!(
        create["inputSchema"]["properties"]["body"]["required"],
        json!(["name"]),
        "{create}"
    );
    assert_eq!(create["annotations"]["readOnlyHint"], false, "{create}");
}

#[tokio::test]
async fn without_the_key_the_api_refuses_and_the_tool_says_so() {
    let base = start_api().await;
    let dir = ScratchDir::new("openapi-nokey").unwrap();
    std::fs::write(dir.path().join("pets.yaml"), DOCUMENT).unwrap();
    let config = dir.path().join("manifold.toml");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = {data}\n\n[servers.pets]\nopenapi = \"pets.yaml\"\nbase_url = {base}\n",
            data = serde_json::to_string(&dir.path().join("data").to_string_lossy()).unwrap(),
            base = serde_json::to_string(&base).unwrap(),
        ),
    )
    .unwrap();
    let gateway = serve(dir.path(), &config);
    let url = gateway.url().to_owned();
    let report = python_client(&url, json!([{"name": "pets__listPets", "arguments": {}}])).await;
    let refused = &report["calls"]["pets__listPets"];
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["texts"][0].as_str().unwrap().contains("HTTP 401"),
        "{refused}"
    );
}

#[test]
fn check_reports_a_missing_base_url_and_a_document_with_a_url() {
    let dir = ScratchDir::new("openapi-check").unwrap();
    let config = dir.path().join("manifold.toml");
    std::fs::write(&config, "[servers.pets]\nopenapi = \"pets.yaml\"\n\n[servers.other]\nopenapi = \"o.yaml\"\nbase_url = \"https://api.example.com\"\nurl = \"https://mcp.example.com/mcp\"\n").unwrap();
    let out = Command::new(MANIFOLD)
        .arg("check")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("has an openapi document but no base_url"),
        "{said}"
    );
    assert!(said.contains("url is for MCP servers"), "{said}");
}

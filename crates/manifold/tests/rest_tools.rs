//! The tools as a REST API (`[rest]`), end to end: a real `manifold serve` with API keys on and a
//! real Python SDK server behind it, its document read and its operations called by a generic
//! OpenAPI consumer (openapi-core, `tests/peers/rest_client.py`) that validates both against the
//! document, and its failures asked for over plain HTTP. Checks that authentication, rules and
//! the audit trail apply as on `/mcp`, and that the view is absent unless turned on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use manifold_testkit::{
    GatewayProcess, ScratchDir, ServeCommand, peers_dir, python, python_server_section, toml_string,
};
use serde_json::{Value, json};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
/// Bounds waits for the audit trail; never a performance assertion.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn config(data: &Path, rest: bool) -> String {
    let rest = if rest { "[rest]\nenabled = true\n" } else { "" };
    format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = {data}\n\n[auth]\napi_keys = true\n\n{rest}\n\
         [[rules]]\nname = \"no-adding\"\neffect = \"deny\"\nexplain = true\ntools = [\"py__add\"]\n\n{py}",
        data = toml_string(&data.to_string_lossy()),
        py = python_server_section("py").unwrap(),
    )
}

struct Served {
    _dir: ScratchDir,
    config: std::path::PathBuf,
    gateway: GatewayProcess,
    key: String,
}

fn setup(name: &str, rest: bool) -> Served {
    let dir = ScratchDir::new(name).unwrap();
    let config_path = dir.path().join("manifold.toml");
    std::fs::write(&config_path, config(&dir.path().join("data"), rest)).unwrap();
    let key = ServeCommand::new(MANIFOLD, dir.path())
        .config(&config_path)
        .create_key("rest-caller", &[])
        .unwrap();
    let gateway = ServeCommand::new(MANIFOLD, dir.path())
        .config(&config_path)
        .start()
        .unwrap();
    Served {
        _dir: dir,
        config: config_path,
        gateway,
        key,
    }
}

/// `rest_client.py`: the document checked, one operation called, both validated against it;
/// `invalid`: arguments the document refuses, sent all the same.
fn consumer(served: &Served, operation: &str, arguments: &Value, invalid: bool) -> Value {
    let script = peers_dir().unwrap().join("rest_client.py");
    let out = Command::new(python().unwrap())
        .arg(script)
        .args(invalid.then_some("--send-invalid"))
        .arg(served.gateway.endpoint("/rest/openapi.json"))
        .arg(operation)
        .arg(arguments.to_string())
        .arg(&served.key)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the OpenAPI consumer failed: {stderr}"
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn http(served: &Served, path: &str, key: Option<&str>, body: Option<&str>) -> (u16, Value) {
    let url = served.gateway.endpoint(path);
    let client = manifold_testkit::http_client();
    let mut request = match body {
        Some(b) => client
            .post(&url)
            .header("content-type", "application/json")
            .body(b.to_owned()),
        None => client.get(&url),
    };
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn a_generic_openapi_consumer_reads_the_document_and_calls_a_tool_as_it_says() {
    let served = setup("rest", true);
    let echoed = consumer(&served, "py__echo", &json!({"message": "over REST"}), false);
    assert_eq!(echoed["status"], 200, "{echoed}");
    // The Python SDK gives a str-returning tool an output schema and structured content.
    assert_eq!(echoed["body"], json!({"result": "over REST"}), "{echoed}");
    let health = consumer(&served, "manifold_health", &json!({}), false);
    assert_eq!(health["body"]["status"], "healthy", "{health}");
    // Arguments the document refuses reach the tool, which reports an error: a failure in the
    // document's shape, which the consumer validated, carrying the tool's words.
    let refused = consumer(&served, "py__echo", &json!({}), true);
    assert_eq!(refused["status"], 422, "{refused}");
    assert_eq!(refused["body"]["type"], "tool_error", "{refused}");
    assert!(
        refused["body"]["detail"]
            .as_str()
            .unwrap()
            .contains("Field required"),
        "{refused}"
    );

    let (_, document) = http(&served, "/rest/openapi.json", Some(&served.key), None).await;
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.contains_key("/py__echo"), "{document}");
    assert!(
        !paths.contains_key("/py__add"),
        "a tool the rules deny is not described: {document}"
    );
    assert_eq!(
        document["paths"]["/py__echo"]["post"]["tags"],
        json!(["py"])
    );

    // The call is on the record as the caller's, as any /mcp call is.
    ServeCommand::new(MANIFOLD, served.config.parent().unwrap())
        .config(&served.config)
        .audit_search_until(
            &["--caller", "rest-caller", "--tool", "py__echo"],
            "manifold-rest",
            HANG_GUARD,
        )
        .unwrap();
}

#[tokio::test]
async fn failures_get_the_status_of_who_should_act() {
    let served = setup("rest-failures", true);
    let key = Some(served.key.as_str());
    let (status, _) = http(&served, "/rest/openapi.json", None, None).await;
    assert_eq!(status, 401, "the same authentication as /mcp");
    let (status, _) = http(&served, "/rest/py__echo", None, Some("{}")).await;
    assert_eq!(status, 401);

    let (status, body) = http(&served, "/rest/py__nope", key, Some("{}")).await;
    assert_eq!(
        (status, body["type"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    let (status, body) = http(&served, "/rest/py__add", key, Some(r#"{"a":1,"b":2}"#)).await;
    assert_eq!(
        (status, body["type"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    assert!(
        body["detail"].as_str().unwrap().contains("no-adding"),
        "{body}"
    );
    let (status, body) = http(&served, "/rest/py__echo", key, Some("[1]")).await;
    assert_eq!(
        (status, body["type"].as_str()),
        (400, Some("invalid_arguments")),
        "{body}"
    );
    let (status, body) = http(&served, "/rest/py__echo", key, Some("{not json")).await;
    assert_eq!(
        (status, body["type"].as_str()),
        (400, Some("invalid_arguments")),
        "{body}"
    );
    // Elicitation has no way back over REST: said, never hung.
    let (status, body) = http(&served, "/rest/py__ask_name", key, Some("")).await;
    assert_eq!(
        (status, body["type"].as_str()),
        (422, Some("input_required")),
        "{body}"
    );
    assert!(
        body["detail"].as_str().unwrap().contains("over MCP"),
        "{body}"
    );

    let response = manifold_testkit::http_client()
        .post(served.gateway.endpoint("/rest/py__echo"))
        .header("authorization", format!("Bearer {}", served.key))
        .header("content-type", "text/plain")
        .body(r#"{"message":"x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 415, "JSON only, as on /mcp");
}

#[tokio::test]
async fn the_rest_view_is_absent_unless_turned_on() {
    let served = setup("rest-off", false);
    let key = Some(served.key.as_str());
    let (status, _) = http(&served, "/rest/openapi.json", key, None).await;
    assert_eq!(status, 404);
    let (status, _) = http(&served, "/rest/py__echo", key, Some(r#"{"message":"x"}"#)).await;
    assert_eq!(status, 404);
}

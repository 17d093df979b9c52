//! The REST view's pure parts: the document built from a tool list, and a result's body.

#![allow(clippy::unwrap_used)]

use super::*;

fn body_of(r: Response) -> (StatusCode, Value) {
    let status = r.status();
    let bytes = futures::executor::block_on(axum::body::to_bytes(r.into_body(), 1 << 20)).unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn a_result_is_its_structured_content_else_its_text_else_its_blocks() {
    let structured =
        json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"a": 1}});
    assert_eq!(result_body("t", &structured).ok(), Some(json!({"a": 1})));
    let one = json!({"content": [{"type": "text", "text": "hi"}]});
    assert_eq!(result_body("t", &one).ok(), Some(json!("hi")));
    let two = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
    assert_eq!(result_body("t", &two).ok(), Some(json!(["a", "b"])));
    let image = json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]});
    assert_eq!(
        result_body("t", &image).ok(),
        Some(image["content"].clone())
    );
    let empty = json!({"content": []});
    assert_eq!(result_body("t", &empty).ok(), Some(json!([])));
}

#[test]
fn a_tool_error_and_a_request_for_input_are_failures_saying_which() {
    let error = json!({"isError": true, "content": [{"type": "text", "text": "no such file"}]});
    let body = result_body("fs__read", &error).unwrap_err();
    assert_eq!(body["type"], "tool_error");
    assert_eq!(body["detail"], "no such file");
    assert_eq!(body["data"]["content"], error["content"]);

    let asks = json!({"resultType": "input_required", "inputRequests": {"a": {"method": "elicitation/create"}}});
    let body = result_body("py__ask_name", &asks).unwrap_err();
    assert_eq!(body["type"], "input_required");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("call it over MCP"),
        "{body}"
    );
}

#[test]
fn gateway_errors_get_the_status_of_who_should_act() {
    let cases = [
        (
            ErrorObject::new(
                manifold_wire::ErrorCode::InvalidParams,
                "unknown tool \"x\"",
            ),
            404,
            "not_found",
        ),
        (
            ErrorObject::new(
                manifold_wire::ErrorCode::InvalidParams,
                "arguments: a is required",
            ),
            400,
            "invalid_arguments",
        ),
        (
            ErrorObject::new(manifold_wire::ErrorCode::Forbidden, "rule deny-all"),
            403,
            "forbidden",
        ),
        (
            ErrorObject::new(manifold_wire::ErrorCode::Overloaded, "slow down"),
            429,
            "rate_limited",
        ),
        (
            ErrorObject::new(manifold_wire::ErrorCode::RequestTimeout, "deadline"),
            504,
            "timeout",
        ),
        (
            ErrorObject::new(manifold_wire::ErrorCode::UpstreamUnavailable, "down"),
            502,
            "upstream_error",
        ),
    ];
    for (e, status, kind) in cases {
        let (got, body) = body_of(gateway_failure(&e));
        assert_eq!(
            (got.as_u16(), body["type"].as_str()),
            (status, Some(kind)),
            "{e:?}"
        );
        assert_eq!(body["detail"], e.message.as_str());
    }
}

#[test]
fn the_document_has_one_post_per_tool_with_its_schemas_and_local_references_placed() {
    let tools = vec![
        json!({
            "name": "py__ask",
            "title": "Ask",
            "description": "Asks.",
            "inputSchema": {
                "type": "object",
                "properties": {"form": {"$ref": "#/$defs/Form"}, "again": {"$ref": "#"}},
                "$defs": {"Form": {"type": "object"}},
            },
            "outputSchema": {"type": "object", "properties": {"result": {"type": "string"}}},
        }),
        json!({"name": "manifold_health", "inputSchema": {"type": "object"}}),
        json!({"name": "odd name/with slash", "inputSchema": {"type": "object"}}),
    ];
    let servers = vec!["py".to_owned(), "manifold".to_owned(), "x".to_owned()];
    let doc = openapi_document(&tools, &servers);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["servers"][0]["url"], "/rest");
    let paths = doc["paths"].as_object().unwrap();
    let mut names: Vec<&str> = paths.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["/manifold_health", "/py__ask"]);

    let post = &doc["paths"]["/py__ask"]["post"];
    assert_eq!(post["operationId"], "py__ask");
    assert_eq!(post["summary"], "Ask");
    assert_eq!(post["description"], "Asks.");
    assert_eq!(post["tags"], json!(["py"]));
    let input = &post["requestBody"]["content"]["application/json"]["schema"];
    let at = "#/paths/~1py__ask/post/requestBody/content/application~1json/schema";
    assert_eq!(
        input["properties"]["form"]["$ref"],
        format!("{at}/$defs/Form")
    );
    assert_eq!(input["properties"]["again"]["$ref"], at);
    assert_eq!(
        post["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["result"]["type"],
        "string"
    );
    assert_eq!(
        doc["paths"]["/manifold_health"]["post"]["summary"],
        "manifold_health"
    );
}

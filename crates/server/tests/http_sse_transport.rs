//! Why: pins the deprecated HTTP+SSE transport (2024-11-05): the `endpoint` event first, 202 for
//! every POST, and every reply on the stream; the session ends with its stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod live_server;

use live_server::*;

#[tokio::test]
async fn the_stream_opens_with_the_endpoint_and_carries_every_reply() {
    let live = start().await;
    let r = live
        .get("/sse")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut events = Events::of(r);
    let endpoint = events.next().await.unwrap();
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    let path = endpoint.data.unwrap();
    let session = path.strip_prefix("/message?sessionId=").unwrap().to_owned();
    assert_eq!(session.len(), 32);
    let post = |body: &str| {
        live.http
            .post(format!("{}{path}", live.base))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
    };
    let r = post(&init_body("2024-11-05", "{}")).await.unwrap();
    assert_eq!(r.status(), 202);
    assert!(r.bytes().await.unwrap().is_empty());
    let init = events.next().await.unwrap();
    assert_eq!(init.event.as_deref(), Some("message"));
    let init: serde_json::Value = serde_json::from_str(init.data.as_deref().unwrap()).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(
        post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await
            .unwrap()
            .status(),
        202
    );
    let r = post(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"SERVER__echo","arguments":{"message":"over sse"}}}"#)
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let (_, reply) = events.next_message().await.unwrap();
    assert_eq!(reply["id"], 2);
    assert_eq!(reply["result"]["content"][0]["text"], "over sse");

    let missing = live
        .http
        .post(format!("{}/message", live.base))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 400);
    let unknown = live
        .http
        .post(format!("{}/message?sessionId=0000", live.base))
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    // Closing the stream ends the session.
    drop(events);
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let r = post(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)
            .await
            .unwrap();
        if r.status() == 404 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session outlived its stream"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    live.stop().await;
}

//! The `cancel-journal` behaviour, checked against what the README promises: the extra tool is
//! listed only under it, and it reports tagged `slow` calls as running, cancelled or finished.
//! Chaos tests behind a gateway rely on this to see, from the peer's side, that a cancellation
//! arrived and that nothing was left running.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod spawned_peer;

use serde_json::{Value, json};
use spawned_peer::{HANG_GUARD, StdioPeer};

/// Calls `journal` and returns its report; answers to other calls read meanwhile go to `others`.
async fn journal(peer: &mut StdioPeer, id: u64, others: &mut Vec<Value>) -> Value {
    peer.call(id, "journal", json!({})).await;
    // Answers to the slow calls of the test may come first; they are not what this reads.
    let response = loop {
        let message = peer.read_json().await;
        if message["id"] == id {
            break message;
        }
        assert!(message["id"].is_number(), "{message}");
        others.push(message);
    };
    let structured = response["result"]["structuredContent"].clone();
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);
    structured
}

/// Asks the journal until `done` holds; the peer settles a call asynchronously after the
/// cancellation notification, so the first answer may still show it running.
async fn journal_until(
    peer: &mut StdioPeer,
    first_id: u64,
    others: &mut Vec<Value>,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    let mut id = first_id;
    loop {
        let seen = journal(peer, id, others).await;
        if done(&seen) {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the journal never reached the expected state: {seen}"
        );
        id += 1;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_journal_tool_is_listed_after_the_normal_tools_only_under_its_behaviour() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "cancel-journal"]);
    peer.initialize().await;
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    let tools = peer.read_json().await["result"]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.last(), Some(&"journal"), "{names:?}");
    assert_eq!(names.iter().filter(|n| **n == "journal").count(), 1);

    let mut normal = StdioPeer::spawn(&[]);
    normal.initialize().await;
    normal.call(2, "journal", json!({})).await;
    let refused = normal.read_json().await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[tokio::test]
async fn tagged_slow_calls_are_reported_running_then_cancelled_or_finished() {
    let mut peer = StdioPeer::spawn(&["--behaviour", "cancel-journal"]);
    peer.initialize().await;
    assert_eq!(
        journal(&mut peer, 1, &mut Vec::new()).await,
        json!({"running": [], "cancelled": [], "finished": [], "abandoned": []})
    );

    let mut answers = Vec::new();
    peer.call(
        2,
        "slow",
        json!({"seconds": 60, "steps": 600, "tag": "to-cancel"}),
    )
    .await;
    peer.call(
        3,
        "slow",
        json!({"seconds": 1, "steps": 2, "tag": "to-finish"}),
    )
    .await;
    // An untagged call is not journaled.
    peer.call(4, "slow", json!({"seconds": 0.1, "steps": 1}))
        .await;
    let running = journal_until(&mut peer, 100, &mut answers, |j| {
        j["running"] == json!(["to-cancel", "to-finish"])
    })
    .await;
    assert_eq!(running["cancelled"], json!([]));

    peer.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "test"}}),
    )
    .await;
    while answers.len() < 2 {
        answers.push(peer.read_json().await);
    }
    let mut answered: Vec<(Value, Value)> = answers
        .iter()
        .map(|m| (m["id"].clone(), m["result"]["content"][0]["text"].clone()))
        .collect();
    answered.sort_by_key(|(id, _)| id.as_u64());
    assert_eq!(
        answered,
        [
            (json!(3), json!("slow done after 2 steps, tag to-finish")),
            (json!(4), json!("slow done after 1 steps")),
        ]
    );
    let settled = journal_until(&mut peer, 200, &mut answers, |j| {
        j["running"] == json!([]) && j["finished"] == json!(["to-finish"])
    })
    .await;
    assert_eq!(
        settled,
        json!({"running": [], "cancelled": ["to-cancel"], "finished": ["to-finish"], "abandoned": []})
    );
}

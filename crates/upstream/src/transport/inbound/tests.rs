//! The unit tests of `inbound.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used)]
use std::sync::{Arc, Mutex};
use std::time::Duration;

use manifold_wire::Id;

use super::*;

fn failed(n: i64) -> Inbound {
    Inbound::RequestFailed {
        id: Id::Num(n),
        error: crate::error::UpstreamError::Closed {
            server: "s".into(),
            cause: "test".into(),
        },
    }
}

/// What a route saw: request ids, and `0` for a close.
fn recorder() -> (Arc<Mutex<Vec<i64>>>, Route) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let route: Route = Box::new(move |item| {
        let n = match item {
            Inbound::RequestFailed { id: Id::Num(n), .. } => n,
            Inbound::Closed { .. } => 0,
            _ => -1,
        };
        log.lock().unwrap().push(n);
        true
    });
    (seen, route)
}

#[tokio::test]
async fn what_came_before_the_connection_is_routed_first_and_in_order() {
    let (tx, rx) = inbound_channel();
    tx.send(failed(1)).await.unwrap();
    tx.send(failed(2)).await.unwrap();
    let (seen, route) = recorder();
    rx.attach(route);
    tx.send(failed(3)).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);
}

#[tokio::test]
async fn the_last_sender_gone_tells_the_connection_the_transport_stopped() {
    let (tx, rx) = inbound_channel();
    let (seen, route) = recorder();
    rx.attach(route);
    let second = tx.clone();
    drop(tx);
    assert!(seen.lock().unwrap().is_empty(), "one sender is still there");
    second.send(failed(7)).await.unwrap();
    drop(second);
    assert_eq!(*seen.lock().unwrap(), [7, 0]);
}

#[tokio::test]
async fn a_sender_learns_when_nobody_takes_messages_any_more() {
    let (tx, rx) = inbound_channel();
    drop(rx);
    assert_eq!(tx.send(failed(1)).await, Err(Gone));

    let (tx, rx) = inbound_channel();
    rx.attach(Box::new(|_| false));
    assert_eq!(
        tx.send(failed(1)).await,
        Ok(()),
        "routed, and the last one taken"
    );
    assert_eq!(tx.send(failed(2)).await, Err(Gone));
    assert_eq!(tx.send(failed(3)).await, Err(Gone));
}

#[tokio::test]
async fn a_full_queue_holds_the_reader_until_the_connection_attaches() {
    let (tx, rx) = inbound_channel();
    for n in 0..i64::try_from(INBOUND_QUEUE).unwrap() {
        tx.send(failed(n + 1)).await.unwrap();
    }
    let reader = tokio::spawn(async move { tx.send(failed(-2)).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!reader.is_finished(), "the reader waits on the full queue");
    let (seen, route) = recorder();
    rx.attach(route);
    reader.await.unwrap().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.len(),
        INBOUND_QUEUE + 2,
        "the queue, the waiter, the close"
    );
    assert_eq!(seen.first(), Some(&1));
    assert_eq!(
        seen.get(INBOUND_QUEUE),
        Some(&-2),
        "the waiter's message after the queue"
    );
    assert_eq!(
        seen.last(),
        Some(&0),
        "then the close, as the waiter's sender went"
    );
}

//! An SSE response body read as events, with the cursor needed to resume it.
//!
//! Both HTTP transports read event streams; this wraps wire's bounded parser around a response so
//! each transport only decides what an event means, and so the last event id and `retry` delay
//! a server announced survive to the reconnection that needs them.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use manifold_wire::sse::{SseEvent, SseFault, SseParser};

use crate::http_client::describe_error;

/// What the stream yielded.
#[derive(Debug)]
pub enum SseItem {
    Event(SseEvent),
    /// An event passed the parser's limit and was skipped.
    TooLarge {
        limit: usize,
    },
}

/// Why the stream ended.
#[derive(Debug)]
pub enum SseEnd {
    /// The server ended the body cleanly.
    Eof,
    /// Reading failed (connection reset, decoding error).
    Broken(String),
}

impl std::fmt::Display for SseEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseEnd::Eof => f.write_str("the server ended the event stream"),
            SseEnd::Broken(why) => write!(f, "the event stream broke: {why}"),
        }
    }
}

/// Reads one SSE response body.
pub struct SseReader {
    body: BoxStream<'static, Result<Bytes, reqwest::Error>>,
    parser: SseParser,
    retry: Option<Duration>,
    ended: bool,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader {
            body: response.bytes_stream().boxed(),
            parser: SseParser::default(),
            retry: None,
            ended: false,
        }
    }

    /// A reader that ends at once: stands in for a reconnection that failed, so the caller's
    /// loop treats it like any other broken stream.
    pub fn empty() -> SseReader {
        SseReader {
            body: futures::stream::empty().boxed(),
            parser: SseParser::default(),
            retry: None,
            ended: true,
        }
    }

    /// The next event or oversize report; `Err` once the body ends.
    pub async fn next(&mut self) -> Result<SseItem, SseEnd> {
        loop {
            if let Some(item) = self.parser.next_event() {
                return Ok(match item {
                    Ok(event) => {
                        if let Some(ms) = event.retry {
                            self.retry = Some(Duration::from_millis(ms));
                        }
                        SseItem::Event(event)
                    }
                    Err(SseFault::TooLarge { limit }) => SseItem::TooLarge { limit },
                });
            }
            if self.ended {
                return Err(SseEnd::Eof);
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.parser.push(&chunk),
                Some(Err(e)) => {
                    self.ended = true;
                    return Err(SseEnd::Broken(describe_error(&e)));
                }
                None => {
                    // A final event without its blank line is incomplete and, per the SSE rules,
                    // never dispatched.
                    self.ended = true;
                }
            }
        }
    }

    /// The id of the last event that carried one: where a resumption starts.
    pub fn last_event_id(&self) -> Option<String> {
        self.parser.last_event_id().map(str::to_owned)
    }

    /// The reconnection delay the server asked for, if it did.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }
}

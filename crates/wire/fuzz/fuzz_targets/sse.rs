//! Fuzzes `SseParser` and `SseEvent::encode`: event streams arrive in arbitrary pieces from
//! upstreams Manifold does not control, and Manifold writes streams that clients must read back.
//!
//! Pinned here: the events do not depend on where reads were cut, no event's data exceeds the
//! size limit, and what the encoder writes parses back to the event it was given (up to what the
//! event-stream format can carry).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use manifold_wire::sse::{SseEvent, SseFault, SseParser};

#[derive(Arbitrary, Debug)]
struct ArbEvent {
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
    retry: Option<u64>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    limit: u16,
    cuts: Vec<u16>,
    data: Vec<u8>,
    events: Vec<ArbEvent>,
}

fn parse(parser: &mut SseParser, out: &mut Vec<Result<SseEvent, SseFault>>) {
    while let Some(e) = parser.next_event() {
        out.push(e);
    }
}

fn cut_points(cuts: &[u16], len: usize) -> Vec<usize> {
    let mut points: Vec<usize> = cuts.iter().map(|&c| usize::from(c) % (len + 1)).collect();
    points.push(0);
    points.push(len);
    points.sort_unstable();
    points.dedup();
    points
}

/// What a receiver gets for `e`: field values end at the first line break, data line breaks all
/// become "\n", an id holding NUL is ignored (WHATWG), and an event with no field is never seen.
fn carried(e: &ArbEvent) -> Option<SseEvent> {
    let first_line = |s: &String| s.split(['\r', '\n']).next().unwrap_or_default().to_owned();
    let out = SseEvent {
        id: e
            .id
            .as_ref()
            .map(first_line)
            .filter(|id| !id.contains('\0')),
        event: e.event.as_ref().map(first_line),
        data: e
            .data
            .as_ref()
            .map(|d| d.replace("\r\n", "\n").replace('\r', "\n")),
        retry: e.retry,
    };
    (out != SseEvent::default()).then_some(out)
}

fn as_event(e: &ArbEvent) -> SseEvent {
    SseEvent {
        id: e.id.clone(),
        event: e.event.clone(),
        data: e.data.clone(),
        retry: e.retry,
    }
}

fuzz_target!(|input: Input| {
    // Limits from 0 up: tiny limits make the skip-to-the-end path common.
    let limit = usize::from(input.limit % 1024);
    let data = &input.data;

    let mut whole = SseParser::new(limit);
    whole.push(data);
    let mut want = Vec::new();
    parse(&mut whole, &mut want);
    for e in want.iter().flatten() {
        let size = e.data.as_ref().map_or(0, String::len);
        assert!(
            size <= limit,
            "an event with {size} bytes of data passed a limit of {limit}"
        );
    }

    let mut split = SseParser::new(limit);
    let mut got = Vec::new();
    for pair in cut_points(&input.cuts, data.len()).windows(2) {
        split.push(&data[pair[0]..pair[1]]);
        parse(&mut split, &mut got);
    }
    assert_eq!(got, want, "split reads disagree with one read");
    assert_eq!(split.last_event_id(), whole.last_event_id());

    let mut stream = String::new();
    for e in &input.events {
        stream.push_str(&as_event(e).encode());
    }
    let mut reader = SseParser::default();
    reader.push(stream.as_bytes());
    let mut read = Vec::new();
    parse(&mut reader, &mut read);
    let expected: Vec<_> = input.events.iter().filter_map(carried).map(Ok).collect();
    assert_eq!(
        read, expected,
        "encoded events did not parse back: {stream:?}"
    );
});

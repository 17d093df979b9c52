//! The unit tests of `call_log.rs`, kept beside it so the file reads as the code it tests.

use super::*;

#[test]
fn the_arguments_field_follows_the_policy() {
    let raw = r#"{"message":"my password is hunter22","n":1}"#;
    let mut policy = CallLogPolicy {
        arguments: ArgumentLogging::Redacted,
        redactor: Redactor::new(["hunter22".to_owned()]),
    };
    assert_eq!(
        policy.arguments_field(Some(raw)).as_deref(),
        Some(r#"{"message":"<redacted>","n":"<redacted>"}"#)
    );
    policy.arguments = ArgumentLogging::None;
    assert_eq!(policy.arguments_field(Some(raw)), None);
    policy.arguments = ArgumentLogging::Full;
    assert_eq!(
        policy.arguments_field(Some(raw)).as_deref(),
        Some(r#"{"message":"my password is <redacted>","n":1}"#)
    );
    assert_eq!(policy.arguments_field(None), None);
    assert_eq!(
        CallLogPolicy::default().arguments,
        ArgumentLogging::Redacted,
        "values are hidden unless configured otherwise"
    );
}

/// Collects what a subscriber writes.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_lines(policy: &CallLogPolicy, record: &CallRecord<'_>) -> Vec<serde_json::Value> {
    let out = Captured::default();
    let sink = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_env_filter("manifold::call=info")
        .with_writer(move || sink.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || policy.emit(record));
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_call_line_names_the_call_and_its_session_tag_and_hides_values_and_secrets() {
    let policy = CallLogPolicy {
        arguments: ArgumentLogging::Redacted,
        redactor: Redactor::new(["tok-abcdef".to_owned()]),
    };
    let groups = ["ops".to_owned(), "oncall".to_owned()];
    let tag = redact::session_tag("k1.sealed-session-id");
    let record = CallRecord {
        call_id: "0123456789abcdef",
        caller: "ci-bot",
        groups: &groups,
        session_tag: Some(&tag),
        upstream: "peer",
        tool: "echo",
        duration: Duration::from_micros(1500),
        outcome: CallOutcome::UpstreamError,
        retries: 1,
        error: Some("could not reach https://api/?key=tok-abcdef"),
        error_code: None,
        arguments: Some(r#"{"message":"private words"}"#),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736"),
    };
    let lines = json_lines(&policy, &record);
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line["target"], CALL_TARGET);
    assert_eq!(line["level"], "INFO");
    let f = &line["fields"];
    assert_eq!(f["message"], "tool call");
    assert_eq!(f["call_id"], "0123456789abcdef");
    assert_eq!(f["caller"], "ci-bot");
    assert_eq!(f["groups"], "ops,oncall");
    assert_eq!(f["session"], tag.as_str());
    assert_eq!(f["upstream"], "peer");
    assert_eq!(f["tool"], "echo");
    assert_eq!(f["duration_ms"], 1.5);
    assert_eq!(f["outcome"], "upstream_error");
    assert_eq!(f["retries"], 1);
    assert_eq!(f["error"], "could not reach https://api/?key=<redacted>");
    assert_eq!(f["arguments"], r#"{"message":"<redacted>"}"#);
    assert_eq!(f["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    let text = line.to_string();
    for hidden in ["private words", "tok-abcdef", "sealed-session-id"] {
        assert!(!text.contains(hidden), "{hidden} leaked: {text}");
    }
}

#[test]
fn an_anonymous_call_line_says_so_and_has_no_groups() {
    let record = CallRecord {
        call_id: "x",
        caller: ANONYMOUS_CALLER,
        groups: &[],
        session_tag: None,
        upstream: "peer",
        tool: "echo",
        duration: Duration::ZERO,
        outcome: CallOutcome::Ok,
        retries: 0,
        error: None,
        error_code: None,
        arguments: None,
        trace_id: None,
    };
    let lines = json_lines(&CallLogPolicy::default(), &record);
    assert_eq!(lines[0]["fields"]["caller"], "anonymous");
    assert_eq!(lines[0]["fields"]["groups"], "-");
}

#[test]
fn nothing_is_written_when_call_lines_are_off() {
    let out = Captured::default();
    let sink = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_env_filter("warn")
        .with_writer(move || sink.clone())
        .finish();
    let policy = CallLogPolicy::default();
    tracing::subscriber::with_default(subscriber, || {
        assert!(!policy.enabled());
        policy.emit(&CallRecord {
            call_id: "x",
            caller: ANONYMOUS_CALLER,
            groups: &[],
            session_tag: None,
            upstream: "peer",
            tool: "echo",
            duration: Duration::ZERO,
            outcome: CallOutcome::Ok,
            retries: 0,
            error: None,
            error_code: None,
            arguments: None,
            trace_id: None,
        });
    });
    assert!(out.0.lock().unwrap().is_empty());
}

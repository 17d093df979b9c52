//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout, and the byte-level
//! misbehaviours that only exist on a pipe (garbage lines, banners, half a line then EOF,
//! drip-feeding, closing stdout while staying alive).
//!
//! One writer task owns stdout so that every message leaves in the order the engine produced it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::behaviour::{Behaviour, Settings};
use crate::engine::{self, Connection, OutKind, Outgoing, Peer, RequestContext, Sink};
use crate::jsonrpc::{self, RpcError, code};
use crate::payloads;
use crate::process_behaviour::IGNORE_SIGTERM_FUSE;

/// Longest line the peer reads; longer ones are skipped and answered with a parse error.
pub const MAX_LINE_BYTES: usize = 64 * payloads::MIB;

/// Serves stdio until stdin closes (or, for `ignore-sigterm`, until killed).
pub async fn serve(peer: Arc<Peer>) {
    let settings = peer.settings.clone();
    let (sink, outgoing) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_loop(outgoing, settings.clone()));

    if settings.behaviour == Behaviour::Banner {
        let lines = settings.count_or(3);
        for n in 1..=lines {
            let line = format!("manifold-test-peer banner line {n} of {lines}");
            let _ = sink.send(Outgoing::notification(line.into_bytes()));
        }
    }

    let connection = Connection::new(Arc::clone(&peer), sink.clone());
    let mut stdin = BufReader::new(tokio::io::stdin());
    loop {
        match read_line(&mut stdin).await {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong) => send_error(
                &sink,
                &Value::Null,
                RpcError::new(
                    code::PARSE_ERROR,
                    format!("Parse error: line longer than {MAX_LINE_BYTES} bytes, skipped"),
                ),
            ),
            Ok(Line::Bytes(line)) => dispatch(&connection, &sink, &line),
            Err(error) => {
                eprintln!("manifold-test-peer: cannot read stdin: {error}; stopping");
                break;
            }
        }
    }

    if settings.behaviour == Behaviour::IgnoreSigterm {
        eprintln!(
            "manifold-test-peer: behaviour ignore-sigterm: stdin closed, staying alive anyway"
        );
        tokio::time::sleep(IGNORE_SIGTERM_FUSE).await;
    }
    connection.cancel_all();
    drop(connection);
    drop(sink);
    // Let the writer drain what is already queued; requests still finishing hold a sink clone,
    // so bound the wait.
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
}

enum Line {
    Bytes(Vec<u8>),
    TooLong,
    Eof,
}

async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_LINE_BYTES)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let read = (&mut *reader)
        .take(limit)
        .read_until(b'\n', &mut line)
        .await?;
    if read == 0 {
        return Ok(Line::Eof);
    }
    if line.last() == Some(&b'\n') || line.len() <= MAX_LINE_BYTES {
        return Ok(Line::Bytes(line));
    }
    // Skip the rest of the over-long line, a bounded chunk at a time.
    loop {
        let mut rest = Vec::new();
        let read = (&mut *reader)
            .take(limit)
            .read_until(b'\n', &mut rest)
            .await?;
        if read == 0 || rest.last() == Some(&b'\n') {
            return Ok(Line::TooLong);
        }
    }
}

fn send_error(sink: &Sink, id: &Value, error: RpcError) {
    let _ = sink.send(Outgoing::response(
        "(invalid message)",
        200,
        jsonrpc::error_message(id, &error),
    ));
}

fn dispatch(connection: &Arc<Connection>, sink: &Sink, line: &[u8]) {
    let text = line.trim_ascii();
    if text.is_empty() {
        return;
    }
    let value: Value = match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(error) => {
            send_error(
                sink,
                &Value::Null,
                RpcError::new(code::PARSE_ERROR, format!("Parse error: {error}")),
            );
            return;
        }
    };
    match jsonrpc::classify(value) {
        jsonrpc::Incoming::Request { id, method, params } => {
            let cancel = connection.begin(&id);
            let ctx = RequestContext {
                connection: Arc::clone(connection),
                sink: sink.clone(),
                cancel,
                http_headers: None,
                era: None,
            };
            let connection = Arc::clone(connection);
            tokio::spawn(async move {
                let finished = id.clone();
                engine::serve_request(ctx, id, method, params).await;
                connection.end(&finished);
            });
        }
        jsonrpc::Incoming::Notification { method, params } => {
            engine::notify(connection, &method, params.as_ref());
        }
        jsonrpc::Incoming::Response { id, message } => {
            if !connection.deliver(&id, message) {
                eprintln!(
                    "manifold-test-peer: ignoring a response to id {id}, which nothing awaits"
                );
            }
        }
        jsonrpc::Incoming::Invalid { id, reason } => send_error(
            sink,
            &id.unwrap_or(Value::Null),
            RpcError::new(code::INVALID_REQUEST, format!("Invalid Request: {reason}")),
        ),
    }
}

async fn write_loop(mut outgoing: mpsc::UnboundedReceiver<Outgoing>, settings: Settings) {
    let mut stdout = tokio::io::stdout();
    let mut open = true;
    while let Some(message) = outgoing.recv().await {
        if !open {
            continue;
        }
        if let Err(error) = write_message(&mut stdout, &message, &settings).await {
            eprintln!("manifold-test-peer: cannot write stdout: {error}; dropping further output");
            open = false;
            continue;
        }
        let handshake_answered = message.kind == OutKind::Response
            && matches!(
                message.answers.as_deref(),
                Some("initialize" | "server/discover")
            );
        if settings.behaviour == Behaviour::CloseStdoutStayAlive && handshake_answered {
            close_stdout();
            open = false;
        }
    }
    let _ = stdout.flush().await;
}

async fn write_message(
    stdout: &mut tokio::io::Stdout,
    message: &Outgoing,
    settings: &Settings,
) -> std::io::Result<()> {
    let behaviour = settings.behaviour;
    let terminator: &[u8] = if behaviour == Behaviour::Crlf {
        b"\r\n"
    } else {
        b"\n"
    };
    let is_response = message.kind == OutKind::Response;
    if is_response && behaviour == Behaviour::GarbageLines {
        for garbage in payloads::GARBAGE_LINES {
            stdout.write_all(garbage).await?;
            stdout.write_all(terminator).await?;
        }
    }
    if is_response
        && behaviour == Behaviour::PartialThenEof
        && message.answers.as_deref() == Some("tools/call")
    {
        let half = message.bytes.len() / 2;
        stdout
            .write_all(message.bytes.get(..half).unwrap_or_default())
            .await?;
        stdout.flush().await?;
        eprintln!(
            "manifold-test-peer: behaviour partial-then-eof: wrote half a response, exiting with status 0"
        );
        std::process::exit(0);
    }
    let mut line = Vec::with_capacity(message.bytes.len() + terminator.len());
    line.extend_from_slice(&message.bytes);
    line.extend_from_slice(terminator);
    if behaviour == Behaviour::DripFeed {
        let delay = Duration::from_millis(settings.delay_ms_or(2));
        for byte in line {
            stdout.write_all(&[byte]).await?;
            stdout.flush().await?;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        return Ok(());
    }
    stdout.write_all(&line).await?;
    stdout.flush().await
}

/// Points fd 1 at /dev/null, which closes the pipe the client reads while the process lives on.
fn close_stdout() {
    let devnull = match std::fs::OpenOptions::new().write(true).open("/dev/null") {
        Ok(file) => file,
        Err(error) => {
            eprintln!("manifold-test-peer: cannot open /dev/null to close stdout: {error}");
            return;
        }
    };
    match nix::unistd::dup2_stdout(&devnull) {
        Ok(()) => eprintln!(
            "manifold-test-peer: behaviour close-stdout-stay-alive: stdout closed, still running"
        ),
        Err(error) => eprintln!("manifold-test-peer: cannot close stdout: {error}"),
    }
}

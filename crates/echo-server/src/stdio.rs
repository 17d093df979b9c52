//! Why: the overhead scenarios put each gateway in front of a stdio server; this loop answers one
//! line at a time with blocking I/O (no runtime, no task hops) and flushes only when no further
//! input is already buffered, so a burst of requests leaves in one write.

use std::io::{BufRead, BufReader, BufWriter, Write};

use crate::catalog::Catalog;
use crate::protocol::{Envelope, answer};

/// Serves newline-delimited JSON-RPC on stdin/stdout until stdin closes.
pub fn serve(catalog: &Catalog) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(256 * 1024, std::io::stdin().lock());
    let mut writer = BufWriter::with_capacity(256 * 1024, std::io::stdout().lock());
    let mut line = Vec::with_capacity(64 * 1024);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return writer.flush();
        }
        let message = line.trim_ascii();
        if !message.is_empty() {
            let reply = match Envelope::parse(message) {
                Ok(envelope) => answer(&envelope, catalog),
                Err(refusal) => Some(refusal),
            };
            if let Some(reply) = reply {
                writer.write_all(&reply.body)?;
                writer.write_all(b"\n")?;
            }
        }
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
}

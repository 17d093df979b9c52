//! What a client's `Accept` header allows: JSON, an SSE stream, or both, and which it prefers.
//!
//! Streamable HTTP lets the server pick JSON or SSE per request; the pick must stay within what
//! the client accepts, and a client that ranks `text/event-stream` above JSON gets a stream.

/// The reply forms a request's `Accept` header allows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Accepts {
    /// Quality of `application/json` (0 = not acceptable).
    pub json: f32,
    /// Quality of `text/event-stream` (0 = not acceptable).
    pub sse: f32,
}

impl Accepts {
    /// Reads an `Accept` header; a missing header accepts anything.
    pub fn parse(header: Option<&str>) -> Accepts {
        let Some(header) = header else {
            return Accepts {
                json: 1.0,
                sse: 1.0,
            };
        };
        let mut json: f32 = 0.0;
        let mut sse: f32 = 0.0;
        for range in header.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim();
            let is = |name: &str| media.eq_ignore_ascii_case(name);
            let (for_json, for_sse) = (
                is("application/json") || is("application/*") || is("*/*"),
                is("text/event-stream") || is("text/*") || is("*/*"),
            );
            if !(for_json || for_sse) {
                continue;
            }
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0)
                .clamp(0.0, 1.0);
            if for_json {
                json = json.max(q);
            }
            if for_sse {
                sse = sse.max(q);
            }
        }
        Accepts { json, sse }
    }

    pub fn json_ok(&self) -> bool {
        self.json > 0.0
    }

    pub fn sse_ok(&self) -> bool {
        self.sse > 0.0
    }

    /// Whether the client only takes, or ranks first, an SSE stream.
    pub fn wants_sse(&self) -> bool {
        self.sse_ok() && self.sse > self.json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_listed_accepts_both_and_prefers_neither() {
        let a = Accepts::parse(Some("application/json, text/event-stream"));
        assert!(a.json_ok() && a.sse_ok() && !a.wants_sse());
    }

    #[test]
    fn only_sse_or_sse_ranked_first_wants_sse() {
        assert!(Accepts::parse(Some("text/event-stream")).wants_sse());
        assert!(Accepts::parse(Some("application/json;q=0.5, text/event-stream")).wants_sse());
        assert!(!Accepts::parse(Some("application/json")).sse_ok());
        assert!(!Accepts::parse(Some("text/html")).json_ok());
    }

    #[test]
    fn wildcards_and_a_missing_header_accept_both() {
        let a = Accepts::parse(Some("*/*"));
        assert!(a.json_ok() && a.sse_ok());
        let a = Accepts::parse(None);
        assert!(a.json_ok() && a.sse_ok());
    }
}

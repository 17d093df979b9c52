//! Reads the `[gateway]` section: where Manifold listens, how it names tools, which browsers and
//! host names may reach it, and the session key.

use std::net::SocketAddr;
use std::path::PathBuf;

use base64::Engine as _;
use toml::de::DeTable;

use super::reader::{Item, Reader, Show, Text, key_path};
use crate::environment::Var;
use crate::secret::Secret;
use crate::settings::{
    DEFAULT_LISTEN, DEFAULT_NAME_MAX_LEN, Discovery, GatewaySection, NAME_MAX_LEN_RANGE,
    NamingMode, SessionKey,
};
use manifold_server::allowlist::{HostAllowlist, HostPattern, OriginPattern, PatternError};

pub(crate) const GATEWAY_KEYS: &[&str] = &[
    "listen",
    "naming",
    "name_max_len",
    "strict_names",
    "allowed_origins",
    "allowed_hosts",
    "discovery",
    "session_key",
    "session_key_id",
    "data_dir",
    // Read by load/lifecycle.rs.
    "drain_timeout",
    "session_idle_ttl",
];

const GATEWAY_HINTS: &[(&str, &str)] = &[
    (
        "name_charset",
        "the character set is fixed: write strict_names = true for [A-Za-z0-9_-] (the default) or false to also allow \".\"",
    ),
    ("port", "write listen = \"127.0.0.1:PORT\""),
    ("host", "write listen = \"ADDRESS:PORT\""),
    ("bind", "write listen = \"ADDRESS:PORT\""),
    ("address", "write listen = \"ADDRESS:PORT\""),
];

fn patterns<T>(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    example: &str,
    parse: fn(&str) -> Result<T, PatternError>,
) -> Option<Vec<T>> {
    let texts = reader.string_list(field, item, Show::Value, example)?;
    let mut out = Vec::with_capacity(texts.len());
    let mut ok = true;
    for text in &texts {
        match parse(&text.value) {
            Ok(p) => out.push(p),
            Err(PatternError { problem, fix, .. }) => {
                reader.report_text(&text.field, text, problem, fix);
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

/// Reads `[gateway]` (absent: every default).
#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
pub(crate) fn read_gateway(reader: &mut Reader<'_>, section: Option<&Item<'_>>) -> GatewaySection {
    let empty = DeTable::new();
    let table = match section {
        Some(item) => reader
            .table("gateway", item, "write a [gateway] section")
            .unwrap_or(&empty),
        None => &empty,
    };
    reader.check_keys("gateway", table, GATEWAY_KEYS, GATEWAY_HINTS);
    let field = |key: &str| key_path("gateway", key);

    let listen = table
        .get("listen")
        .and_then(|item| read_listen(reader, &field("listen"), item))
        .unwrap_or(DEFAULT_LISTEN);

    let naming = table
        .get("naming")
        .and_then(|item| {
            reader.choice(
                &field("naming"),
                item,
                &[
                    ("always", NamingMode::Always),
                    ("never", NamingMode::Never),
                    ("conditional", NamingMode::Conditional),
                ],
            )
        })
        .unwrap_or_default();

    let name_max_len = table
        .get("name_max_len")
        .and_then(|item| {
            let example = format!(
                "write a number from {} to {}, e.g. {DEFAULT_NAME_MAX_LEN}",
                NAME_MAX_LEN_RANGE.start(),
                NAME_MAX_LEN_RANGE.end()
            );
            let n = reader.integer(&field("name_max_len"), item, &example)?;
            match usize::try_from(n)
                .ok()
                .filter(|n| NAME_MAX_LEN_RANGE.contains(n))
            {
                Some(n) => Some(n),
                None => {
                    reader.report_value(
                        &field("name_max_len"),
                        item,
                        Show::Value,
                        format!(
                            "must be from {} to {} (the protocol allows 128; most clients 64)",
                            NAME_MAX_LEN_RANGE.start(),
                            NAME_MAX_LEN_RANGE.end()
                        ),
                        format!("write e.g. {DEFAULT_NAME_MAX_LEN}"),
                    );
                    None
                }
            }
        })
        .unwrap_or(DEFAULT_NAME_MAX_LEN);

    let strict_names = table
        .get("strict_names")
        .and_then(|item| reader.boolean(&field("strict_names"), item))
        .unwrap_or(true);

    let allowed_origins = table
        .get("allowed_origins")
        .and_then(|item| {
            patterns(
                reader,
                &field("allowed_origins"),
                item,
                "write e.g. [\"http://localhost:*\"]",
                OriginPattern::parse,
            )
        })
        .unwrap_or_else(OriginPattern::loopback);

    // Absent: the loopback names and the address Manifold is bound to (see HostAllowlist).
    let allowed_hosts = match table.get("allowed_hosts") {
        Some(item) => HostAllowlist::only(
            patterns(
                reader,
                &field("allowed_hosts"),
                item,
                "write e.g. [\"localhost\", \"127.0.0.1\"]",
                HostPattern::parse,
            )
            .unwrap_or_default(),
        ),
        None => HostAllowlist::default(),
    };

    let discovery = table
        .get("discovery")
        .and_then(|item| {
            reader.choice(
                &field("discovery"),
                item,
                &[("full", Discovery::Full), ("search", Discovery::Search)],
            )
        })
        .unwrap_or_default();

    let key = table
        .get("session_key")
        .and_then(|item| read_session_key(reader, &field("session_key"), item));
    let key_id = table.get("session_key_id").and_then(|item| {
        let f = field("session_key_id");
        let text = reader.string(&f, item, Show::Value, "write e.g. \"k1\"")?;
        if !manifold_server::session_key::valid_id(&text.value) {
            reader.report_text(
                &f,
                &text,
                "is not a key id",
                format!(
                    "use 1 to {} of A-Z a-z 0-9 _ - (a \".\" ends the key id inside a session id), e.g. \"k1\"",
                    manifold_server::session_key::MAX_KEY_ID_LEN
                ),
            );
            return None;
        }
        if !table.contains_key("session_key") {
            reader.report_text(
                &f,
                &text,
                "names a key, but there is no session_key",
                "add session_key, or remove session_key_id",
            );
        }
        Some(text.value)
    });
    // Both parts were checked by the server's own rules above, so neither step can refuse.
    let session_key = key
        .and_then(|key| SessionKey::from_bytes(key.expose()).ok())
        .and_then(|key| match &key_id {
            Some(id) => key.with_id(id).ok(),
            None => Some(key),
        });

    let data_dir = match table.get("data_dir") {
        Some(item) => {
            let f = field("data_dir");
            reader
                .string(
                    &f,
                    item,
                    Show::Value,
                    "write a directory, e.g. \"/var/lib/manifold\"",
                )
                .and_then(|text| reader.path(&f, &text))
                .unwrap_or_default()
        }
        None => default_data_dir(reader).unwrap_or_default(),
    };

    GatewaySection {
        listen,
        naming,
        name_max_len,
        strict_names,
        allowed_origins,
        allowed_hosts,
        discovery,
        session_key,
        data_dir,
    }
}

fn read_listen(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Option<SocketAddr> {
    let text = reader.string(field, item, Show::Value, "write e.g. \"127.0.0.1:7391\"")?;
    if let Ok(addr) = text.value.trim().parse::<SocketAddr>() {
        return Some(addr);
    }
    let port_only = text.value.trim().parse::<u16>().ok();
    let localhost_port = text
        .value
        .trim()
        .strip_prefix("localhost:")
        .and_then(|p| p.parse::<u16>().ok());
    let fix = match (port_only.or(localhost_port), text.interpolated) {
        (Some(port), false) => format!("write \"127.0.0.1:{port}\""),
        _ => "write e.g. \"127.0.0.1:7391\" (this machine only) or \"0.0.0.0:7391\" (every interface)"
            .to_owned(),
    };
    reader.report_text(field, &text, "is not an IP address and port", fix);
    None
}

/// Decodes a 32-byte key written in hex (64 digits) or base64 (standard or URL-safe, padded
/// or not).
pub(crate) fn decode_session_key(text: &str) -> Result<[u8; 32], String> {
    let text = text.trim();
    let bytes = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
        (0..32)
            .map(|i| {
                text.get(i * 2..i * 2 + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| "is not valid hex".to_owned())?
    } else {
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
            .iter()
            .find_map(|engine| engine.decode(text).ok())
            .ok_or_else(|| "is neither 64 hex digits nor base64".to_owned())?
    };
    let n = bytes.len();
    <[u8; 32]>::try_from(bytes).map_err(|_| format!("decodes to {n} bytes, not 32"))
}

fn read_session_key(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
) -> Option<Secret<[u8; 32]>> {
    let fix = "write 32 random bytes in base64 or hex, e.g. session_key = \"${file:/etc/manifold/session.key}\" with the file made by `openssl rand -base64 32`";
    let text: Text = reader.string(field, item, Show::Hidden, fix)?;
    match decode_session_key(&text.value) {
        Ok(key) => Some(Secret::new(key)),
        Err(problem) => {
            reader.report_text(field, &text, problem, fix);
            None
        }
    }
}

fn default_data_dir(reader: &mut Reader<'_>) -> Option<PathBuf> {
    if let Var::Set(xdg) = reader.env.var("XDG_DATA_HOME") {
        let xdg = PathBuf::from(xdg);
        // The XDG specification says relative values are to be ignored.
        if xdg.is_absolute() {
            return Some(xdg.join("manifold"));
        }
    }
    if let Var::Set(home) = reader.env.var("HOME")
        && !home.is_empty()
    {
        return Some(PathBuf::from(home).join(".local/share/manifold"));
    }
    reader.report_unplaced(
        "gateway.data_dir",
        "is not set, and neither XDG_DATA_HOME nor HOME is, so there is no default",
        "write data_dir = \"/var/lib/manifold\" in [gateway]",
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_keys_decode_from_hex_and_base64() {
        let hex = "00".repeat(31) + "ff";
        let key = decode_session_key(&hex).unwrap();
        assert_eq!(key[31], 0xff);
        assert_eq!(key[0], 0);
        let b64 = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        assert_eq!(decode_session_key(&b64).unwrap(), [9u8; 32]);
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xfbu8; 32]);
        assert_eq!(decode_session_key(&url).unwrap(), [0xfbu8; 32]);
    }

    #[test]
    fn session_keys_of_other_lengths_are_refused() {
        let short = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        assert_eq!(
            decode_session_key(&short).unwrap_err(),
            "decodes to 16 bytes, not 32"
        );
        assert_eq!(
            decode_session_key("not a key!").unwrap_err(),
            "is neither 64 hex digits nor base64"
        );
    }
}

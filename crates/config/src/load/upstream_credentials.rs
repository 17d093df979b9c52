//! Reads what an HTTP server needs besides static headers to let Manifold in: the
//! `[servers.NAME.oauth]` table (Manifold as an OAuth client of that server) and
//! `token_passthrough = true` (forward the downstream caller's own token, by explicit choice
//! only). Both are checked against each other and against a static `Authorization` header, with
//! positions, so a contradiction is found at `manifold check` rather than as a 401 at run time.

use toml::de::{DeTable, DeValue};
use url::Url;

use super::reader::{Reader, Show, Text, key_path};
use crate::server::{Interpolated, ServerKind};
use manifold_upstream::auth::{Grant, HttpAuth, OAuthSettings};

/// The keys of `[servers.NAME.oauth]`.
pub(crate) const OAUTH_KEYS: &[&str] = &[
    "grant",
    "client_id",
    "client_secret",
    "client_metadata_url",
    "scopes",
    "redirect_uri",
    "client_name",
];

const OAUTH_HINTS: &[(&str, &str)] = &[
    ("scope", "write scopes = [\"read\", \"write\"]"),
    (
        "grant_type",
        "write grant = \"client_credentials\" or \"authorization_code\"",
    ),
    ("secret", "write client_secret = \"${ENV_VAR}\""),
    (
        "issuer",
        "Manifold discovers the authorization server from the server's metadata",
    ),
    (
        "token_passthrough",
        "token_passthrough belongs in the server's own section, next to url",
    ),
];

/// Reads `oauth` and `token_passthrough` of an HTTP server's table. Problems are reported;
/// the result is then meaningless (the server is dropped by its reader).
pub(crate) fn read_credentials(
    reader: &mut Reader<'_>,
    table: &DeTable<'_>,
    path: &str,
    interpolated: &mut Interpolated,
) -> HttpAuth {
    let passthrough = table
        .get("token_passthrough")
        .and_then(|i| reader.boolean(&key_path(path, "token_passthrough"), i))
        .unwrap_or(false);
    let oauth = table
        .get("oauth")
        .and_then(|i| read_oauth(reader, i, &key_path(path, "oauth"), interpolated));
    let has_oauth = table.contains_key("oauth");
    if has_oauth
        && passthrough
        && let Some((key, _)) = table.get_key_value("token_passthrough")
    {
        reader.report(
            &key.span(),
            &key_path(path, "token_passthrough"),
            None,
            "a server takes either Manifold's own OAuth token or the caller's, not both",
            "remove token_passthrough, or remove the [oauth] table",
        );
    }
    if (has_oauth || passthrough)
        && let Some(DeValue::Table(headers)) = table.get("headers").map(|h| h.get_ref())
    {
        for (key, _) in headers.iter() {
            let name: &str = key.get_ref();
            if name.eq_ignore_ascii_case("authorization") {
                reader.report(
                    &key.span(),
                    &key_path(&key_path(path, "headers"), name),
                    None,
                    if has_oauth {
                        "is set by the OAuth client configured for this server"
                    } else {
                        "is the caller's token with token_passthrough = true"
                    },
                    "remove it",
                );
            }
        }
    }
    match oauth {
        Some(settings) => HttpAuth::oauth(settings),
        None if passthrough => HttpAuth::Passthrough,
        None => HttpAuth::None,
    }
}

/// Puts the credentials into an HTTP server's connection settings, noting which of their
/// fields came from `${...}`.
pub(crate) fn with_credentials(
    kind: ServerKind,
    auth: HttpAuth,
    from_references: Interpolated,
) -> ServerKind {
    match kind {
        ServerKind::Http {
            mut spec,
            mut interpolated,
            openapi,
        } => {
            spec.auth = auth;
            for f in from_references.fields() {
                interpolated.insert(f.to_owned());
            }
            ServerKind::Http {
                spec,
                interpolated,
                openapi,
            }
        }
        other => other,
    }
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
fn read_oauth(
    reader: &mut Reader<'_>,
    item: &super::reader::Item<'_>,
    path: &str,
    interpolated: &mut Interpolated,
) -> Option<OAuthSettings> {
    let table = reader.table(
        path,
        item,
        "write an [servers.NAME.oauth] table, e.g. client_id = \"...\" and scopes = [\"read\"]",
    )?;
    reader.check_keys(path, table, OAUTH_KEYS, OAUTH_HINTS);
    let before = reader.problem_count();
    let field = |k: &str| key_path(path, k);
    let mut note = |k: &str, t: &Text| {
        if t.interpolated {
            interpolated.insert(format!("oauth.{k}"));
        }
    };
    let grant = table.get("grant").and_then(|i| {
        reader.choice(
            &field("grant"),
            i,
            &[
                ("authorization_code", Grant::AuthorizationCode),
                ("client_credentials", Grant::ClientCredentials),
            ],
        )
    });
    let client_id = table.get("client_id").and_then(|i| {
        reader.string(
            &field("client_id"),
            i,
            Show::Value,
            "write the client id the authorization server issued, e.g. client_id = \"manifold\"",
        )
    });
    let client_secret = table.get("client_secret").and_then(|i| {
        reader.string(
            &field("client_secret"),
            i,
            Show::Hidden,
            "write client_secret = \"${ENV_VAR}\" or \"${file:/path/to/secret}\"",
        )
    });
    let metadata_url = table.get("client_metadata_url").and_then(|i| {
        reader.string(
            &field("client_metadata_url"),
            i,
            Show::Value,
            "write the HTTPS URL of this client's metadata document, e.g. \"https://example.com/manifold.json\"",
        )
    });
    let scopes = table.get("scopes").and_then(|i| {
        reader.string_list(
            &field("scopes"),
            i,
            Show::Value,
            "write e.g. scopes = [\"read\", \"write\"]",
        )
    });
    let redirect_uri = table.get("redirect_uri").and_then(|i| {
        reader.string(
            &field("redirect_uri"),
            i,
            Show::Value,
            "write e.g. redirect_uri = \"http://127.0.0.1:8976/callback\"",
        )
    });
    let client_name = table.get("client_name").and_then(|i| {
        reader.string(
            &field("client_name"),
            i,
            Show::Value,
            "write e.g. client_name = \"Manifold (team gateway)\"",
        )
    });
    for (k, t) in [
        ("client_id", &client_id),
        ("client_secret", &client_secret),
        ("client_metadata_url", &metadata_url),
        ("redirect_uri", &redirect_uri),
        ("client_name", &client_name),
    ] {
        if let Some(t) = t {
            note(k, t);
        }
    }
    for t in scopes.iter().flatten() {
        if t.value.trim().is_empty() || t.value.contains(char::is_whitespace) {
            reader.report_text(
                &t.field,
                t,
                "is not one scope (empty, or holds spaces)",
                "write each scope as its own string, e.g. [\"read\", \"write\"]",
            );
        }
    }
    if let Some(t) = &metadata_url {
        check_metadata_url(reader, t);
    }
    if let Some(t) = &redirect_uri {
        check_redirect_uri(reader, t);
    }
    for t in [&client_id, &client_name].into_iter().flatten() {
        if t.value.trim().is_empty() {
            reader.report_text(&t.field, t, "is empty", "write a value, or remove the key");
        }
    }
    let grant = grant.unwrap_or_default();
    let (has_id, has_secret) = (client_id.is_some(), client_secret.is_some());
    if let (Some(secret), false) = (&client_secret, has_id) {
        reader.report_text(
            &secret.field,
            secret,
            "is a client secret without a client_id",
            "add client_id = \"...\" (the id the secret belongs to)",
        );
    }
    if grant == Grant::ClientCredentials && !(has_id && has_secret) {
        let span = table
            .get_key_value("grant")
            .map(|(k, _)| k.span())
            .unwrap_or_else(|| item.span());
        reader.report(
            &span,
            &field("grant"),
            None,
            "the client_credentials grant needs client_id and client_secret",
            "add client_id = \"...\" and client_secret = \"${ENV_VAR}\"",
        );
    }
    if grant == Grant::ClientCredentials
        && let Some(t) = &metadata_url
    {
        reader.report_text(
            &t.field,
            t,
            "only applies to the authorization_code grant",
            "remove it (client_credentials uses client_id and client_secret)",
        );
    }
    if reader.problem_count() > before {
        return None;
    }
    Some(OAuthSettings {
        grant,
        client_id: client_id.map(|t| t.value),
        client_secret: client_secret.map(|t| t.value),
        client_metadata_url: metadata_url.map(|t| t.value),
        scopes: scopes.map(|list| list.into_iter().map(|t| t.value).collect()),
        redirect_uri: redirect_uri.map(|t| t.value),
        client_name: client_name
            .map(|t| t.value)
            .unwrap_or_else(|| manifold_upstream::auth::settings::DEFAULT_CLIENT_NAME.to_owned()),
    })
}

/// A client ID metadata document URL: `https` with a path, as the specification requires.
fn check_metadata_url(reader: &mut Reader<'_>, t: &Text) {
    match Url::parse(t.value.trim()) {
        Ok(u) if u.scheme() == "https" && u.path() != "/" && u.fragment().is_none() => {}
        Ok(_) => reader.report_text(
            &t.field,
            t,
            "is not an https:// URL with a path (a client ID metadata document is served over HTTPS at a path, e.g. /manifold.json)",
            "write e.g. \"https://example.com/oauth/manifold.json\"",
        ),
        Err(e) => reader.report_text(
            &t.field,
            t,
            format!("is not a valid absolute URL ({e})"),
            "write e.g. \"https://example.com/oauth/manifold.json\"",
        ),
    }
}

/// A redirect URI `manifold login` can listen on: plain HTTP to a loopback address, with a port.
fn check_redirect_uri(reader: &mut Reader<'_>, t: &Text) {
    let fix = "write e.g. \"http://127.0.0.1:8976/callback\" (the port registered with the authorization server)";
    match Url::parse(t.value.trim()) {
        Ok(u)
            if u.scheme() == "http"
                && manifold_upstream::http_client::is_loopback(&u)
                && u.port().is_some()
                && u.query().is_none()
                && u.fragment().is_none() => {}
        Ok(_) => reader.report_text(
            &t.field,
            t,
            "is not a loopback http:// URL with a port (manifold login listens on this machine for the redirect)",
            fix,
        ),
        Err(e) => reader.report_text(&t.field, t, format!("is not a valid absolute URL ({e})"), fix),
    }
}

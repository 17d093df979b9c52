//! Following `nextCursor` through a server's list pages, within bounds.
//!
//! A hostile or buggy server can hand out cursors forever or repeat one; lists are therefore
//! capped in pages and items, and a repeated cursor stops with an error instead of looping.

use std::collections::HashSet;

use manifold_wire::{Kind, Message};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::connection::{CallOptions, Connection};
use crate::error::UpstreamError;

/// Pages followed at most for one list.
pub const MAX_LIST_PAGES: usize = 1_000;
/// Items accepted at most in one list (tools per upstream, resources, ...).
pub const MAX_LIST_ITEMS: usize = 100_000;

/// One of the list methods and the member its items live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl ListKind {
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
            ListKind::Prompts => "prompts/list",
        }
    }

    pub fn member(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
            ListKind::Prompts => "prompts",
        }
    }
}

#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow, default)]
    items: Vec<&'a RawValue>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

impl Connection {
    /// Every item of a list, in server order, each as raw JSON.
    pub async fn list_all(
        &self,
        kind: ListKind,
        options: CallOptions,
    ) -> Result<Vec<Box<RawValue>>, UpstreamError> {
        let method = kind.method();
        let fail = |detail: String| UpstreamError::Pagination {
            server: self.server().to_owned(),
            method: method.to_owned(),
            detail,
        };
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = cursor
                .as_ref()
                .map(|c| format!("{{\"cursor\":{}}}", manifold_wire::id::json_string(c)));
            let response = self.call(method, params.as_deref(), options).await?;
            let raw = result_or_error(self, method, &response)?;
            let renamed = rename_member(raw, kind.member());
            let page: Page<'_> = serde_json::from_str(&renamed)
                .map_err(|e| fail(format!("a page is malformed: {e}")))?;
            if items.len() + page.items.len() > MAX_LIST_ITEMS {
                return Err(fail(format!(
                    "the server lists more than {MAX_LIST_ITEMS} items; refusing the rest"
                )));
            }
            if kind == ListKind::Tools {
                // The transport learns which arguments travel as Mcp-Param-* headers; a tool whose
                // annotation is invalid must not be offered at all (2026-07-28).
                let raws: Vec<&str> = page.items.iter().map(|r| r.get()).collect();
                let rejected = self.learn_tool_headers(&raws);
                for r in &rejected {
                    tracing::warn!(server = %self.server(), tool = %r.name, reason = %r.reason, "left out a tool with an invalid x-mcp-header annotation");
                }
                items.extend(
                    page.items
                        .into_iter()
                        .filter(|t| {
                            let name = manifold_wire::patch::get_str(t.get(), &["name"])
                                .ok()
                                .flatten();
                            !rejected.iter().any(|r| Some(&r.name) == name.as_ref())
                        })
                        .map(|r| r.to_owned()),
                );
            } else {
                items.extend(page.items.into_iter().map(|r| r.to_owned()));
            }
            match page.next_cursor {
                None => return Ok(items),
                Some(next) => {
                    if !seen.insert(next.clone()) {
                        return Err(fail(format!(
                            "the server repeated the cursor {next:?}; the list would never end"
                        )));
                    }
                    cursor = Some(next);
                }
            }
        }
        Err(fail(format!(
            "the list did not end within {MAX_LIST_PAGES} pages"
        )))
    }
}

/// The raw result, or the server's error as an [`UpstreamError::Rpc`].
pub fn result_or_error<'a>(
    conn: &Connection,
    method: &str,
    response: &'a Message,
) -> Result<&'a str, UpstreamError> {
    if response.kind() == Kind::Error {
        return Err(UpstreamError::Rpc {
            server: conn.server().to_owned(),
            method: method.to_owned(),
            error: response.error_object().unwrap_or_else(|| {
                manifold_wire::ErrorObject::new(
                    manifold_wire::ErrorCode::InternalError,
                    "unreadable error",
                )
            }),
        });
    }
    Ok(response.result_raw().unwrap_or("{}"))
}

/// Lets one `Page` view read any list by presenting its member under the name `items`.
fn rename_member(raw: &str, member: &str) -> String {
    match manifold_wire::patch::locate(raw, &[member]) {
        Ok(Some(span)) => format!(
            "{{\"items\":{},\"nextCursor\":{}}}",
            raw.get(span).unwrap_or("[]"),
            manifold_wire::patch::get(raw, &["nextCursor"])
                .ok()
                .flatten()
                .unwrap_or("null")
        ),
        _ => "{}".to_owned(),
    }
}

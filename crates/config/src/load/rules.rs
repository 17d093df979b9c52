//! Reads `[[rules]]` (who may see and call which tools, resources and prompts) and
//! `[rate_limits]` (how often) straight into the gateway's own specs (`RuleSpec`,
//! `RateLimitSpec`), which the gateway compiles as they are. Every problem is reported at its
//! place in the file: a server no section configures, a pattern that is not a glob, a rule
//! without an effect, a rate that is not "N per period".

use std::collections::HashMap;
use std::time::Duration;

use manifold_gateway::policy::{ASK_ANNOTATIONS, Approver, Effect, RuleSpec};
use manifold_gateway::rate_limit::{Limit, RateLimitSpec, ToolLimitSpec};
use toml::de::{DeTable, DeValue};

use super::patterns::read_patterns;
use super::reader::{Item, Reader, Show, Text, key_path};
use crate::did_you_mean::closest;
use crate::duration::{DurationError, MAX_DURATION, parse_duration};
use crate::server::ServerConfig;

pub(crate) const RULE_KEYS: &[&str] = &[
    "name",
    "effect",
    "explain",
    "identities",
    "groups",
    "scopes",
    "anonymous",
    "servers",
    "tools",
    "resources",
    "prompts",
    "approvers",
    "annotations",
];

const RULE_HINTS: &[(&str, &str)] = &[
    ("action", "write effect = \"allow\" or effect = \"deny\""),
    (
        "allow",
        "write effect = \"allow\" and list what it covers in tools, resources, prompts",
    ),
    (
        "deny",
        "write effect = \"deny\" and list what it covers in tools, resources, prompts",
    ),
    ("users", "write identities = [\"NAME\", ...]"),
    (
        "subjects",
        "write identities, groups, scopes or anonymous = true",
    ),
    ("identity", "write identities = [\"NAME\"]"),
    (
        "templates",
        "resource templates are covered by resources = [\"PATTERN\"], matched against their uriTemplate",
    ),
    (
        "resource_templates",
        "resource templates are covered by resources = [\"PATTERN\"], matched against their uriTemplate",
    ),
];

pub(crate) const RATE_LIMIT_KEYS: &[&str] = &["per_identity", "per_tool", "tools"];
const TOOL_LIMIT_KEYS: &[&str] = &["match", "rate", "burst"];
const LIMIT_KEYS: &[&str] = &["rate", "burst"];

/// The largest count a rate or burst may name.
pub const MAX_RATE_COUNT: u32 = 1_000_000;

const RATE_EXAMPLE: &str = "write e.g. \"60/minute\": a number of requests per second, minute, hour or day, or per a duration such as \"10s\"";

/// Reads `[[rules]]` (absent: no rules, everyone sees everything).
pub(crate) fn read_rules(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
    servers: &[ServerConfig],
) -> Vec<RuleSpec> {
    let Some(item) = section else {
        return Vec::new();
    };
    let DeValue::Array(elements) = item.get_ref() else {
        reader.report(
            &item.span(),
            "rules",
            None,
            "must be an array of tables, one per rule",
            "write each rule as its own [[rules]] section, in the order they are tried",
        );
        return Vec::new();
    };
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut rules = Vec::with_capacity(elements.len());
    for (index, element) in elements.iter().enumerate() {
        if let Some(rule) = read_rule(reader, index, element, servers, &mut names) {
            rules.push(rule);
        }
    }
    rules
}

#[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
fn read_rule(
    reader: &mut Reader<'_>,
    index: usize,
    item: &Item<'_>,
    servers: &[ServerConfig],
    names: &mut HashMap<String, usize>,
) -> Option<RuleSpec> {
    let path = format!("rules[{index}]");
    let before = reader.problem_count();
    let table = reader.table(&path, item, "write each rule as a [[rules]] section")?;
    reader.check_keys(&path, table, RULE_KEYS, RULE_HINTS);
    let field = |k: &str| key_path(&path, k);

    let name = table.get("name").and_then(|i| {
        let f = field("name");
        let text = reader.string(
            &f,
            i,
            Show::Value,
            "write e.g. name = \"no-push-for-interns\"",
        )?;
        if text.value.trim().is_empty() || text.value.chars().count() > 64 {
            reader.report_text(
                &f,
                &text,
                "must be 1 to 64 characters",
                "write e.g. \"no-push-for-interns\"",
            );
            return None;
        }
        if let Some(first) = names.get(&text.value) {
            reader.report_text(
                &f,
                &text,
                format!("is also the name of rules[{first}]"),
                "give each rule its own name: errors name the rule that refused a call",
            );
            return None;
        }
        names.insert(text.value.clone(), index);
        Some(text.value)
    });

    let effect = match table.get("effect") {
        Some(i) => reader.choice(
            &field("effect"),
            i,
            &[
                ("allow", Effect::Allow),
                ("deny", Effect::Deny),
                ("ask", Effect::Ask),
            ],
        ),
        None => {
            reader.report(
                &item.span(),
                &path,
                None,
                "has no effect",
                "write effect = \"allow\", \"deny\" or \"ask\"",
            );
            None
        }
    };

    let explain = table
        .get("explain")
        .and_then(|i| {
            let explain = reader.boolean(&field("explain"), i)?;
            if explain && matches!(effect, Some(Effect::Allow | Effect::Ask)) {
                reader.report_value(
                    &field("explain"),
                    i,
                    Show::Value,
                    "only a deny rule can explain a refusal",
                    "remove explain, or write effect = \"deny\"",
                );
                return None;
            }
            Some(explain)
        })
        .unwrap_or(false);

    let mut subjects = |key: &str, example: &str| -> Vec<String> {
        let Some(i) = table.get(key) else {
            return Vec::new();
        };
        let texts = reader
            .string_list(&field(key), i, Show::Value, example)
            .unwrap_or_default();
        non_empty(reader, texts, example)
    };
    let identities = subjects(
        "identities",
        "write e.g. identities = [\"alice\", \"ci-bot\"]",
    );
    let groups = subjects("groups", "write e.g. groups = [\"admins\"]");
    let scopes = subjects("scopes", "write e.g. scopes = [\"tools:write\"]");

    let anonymous = table
        .get("anonymous")
        .and_then(|i| reader.boolean(&field("anonymous"), i))
        .unwrap_or(false);

    let rule_servers = match table.get("servers") {
        Some(i) => read_servers(reader, &field("servers"), i, servers),
        None => Vec::new(),
    };

    let mut patterns = |key: &str, example: &str| -> Vec<String> {
        table
            .get(key)
            .map(|i| read_patterns(reader, &field(key), i, example))
            .unwrap_or_default()
    };
    let tools = patterns("tools", "write e.g. tools = [\"git__push*\"]");
    let resources = patterns(
        "resources",
        "write e.g. resources = [\"fs+file:///secrets/*\"]",
    );
    let prompts = patterns("prompts", "write e.g. prompts = [\"admin__*\"]");

    let is_ask = effect == Some(Effect::Ask);
    if is_ask {
        for key in ["resources", "prompts"] {
            if let Some(i) = table.get(key) {
                reader.report_value(
                    &field(key),
                    i,
                    Show::Value,
                    "an ask rule holds tool calls only",
                    "list tools in this rule, and cover resources and prompts with allow or deny rules",
                );
            }
        }
    }
    let approvers = read_approvers(reader, &field("approvers"), table.get("approvers"), is_ask);
    let annotations = read_annotations(
        reader,
        &field("annotations"),
        table.get("annotations"),
        is_ask,
    );

    if reader.problem_count() > before {
        return None;
    }
    Some(RuleSpec {
        index,
        name,
        effect: effect?,
        explain,
        identities,
        groups,
        scopes,
        anonymous,
        servers: rule_servers,
        tools,
        resources,
        prompts,
        approvers,
        annotations,
    })
}

const APPROVER_EXAMPLE: &str =
    "write e.g. approvers = [\"caller\", \"group:ops\", \"identity:alice\"]";

/// `approvers` of an ask rule: `caller`, `group:NAME`, `identity:NAME`; absent: the caller.
fn read_approvers(
    reader: &mut Reader<'_>,
    field: &str,
    item: Option<&Item<'_>>,
    is_ask: bool,
) -> Vec<Approver> {
    let Some(item) = item else {
        return if is_ask {
            vec![Approver::Caller]
        } else {
            Vec::new()
        };
    };
    if !is_ask {
        reader.report_value(
            field,
            item,
            Show::Value,
            "only an ask rule has approvers",
            "remove approvers, or write effect = \"ask\"",
        );
        return Vec::new();
    }
    let texts = reader
        .string_list(field, item, Show::Value, APPROVER_EXAMPLE)
        .unwrap_or_default();
    if texts.is_empty() {
        reader.report_value(
            field,
            item,
            Show::Value,
            "names nobody, so no call could ever be approved",
            APPROVER_EXAMPLE,
        );
        return Vec::new();
    }
    let mut out = Vec::with_capacity(texts.len());
    for text in texts {
        let v = text.value.trim();
        let parsed = match v.split_once(':') {
            None if v == "caller" => Some(Approver::Caller),
            Some(("group", g)) if !g.trim().is_empty() => {
                Some(Approver::Group(g.trim().to_owned()))
            }
            Some(("identity", i)) if !i.trim().is_empty() => {
                Some(Approver::Identity(i.trim().to_owned()))
            }
            _ => None,
        };
        match parsed {
            Some(a) => out.push(a),
            None => {
                let fix = if v.contains(':') {
                    APPROVER_EXAMPLE.to_owned()
                } else {
                    format!("write \"identity:{v}\" for a person, or \"group:{v}\" for a group")
                };
                reader.report_text(
                    &text.field.clone(),
                    &text,
                    "is not caller, group:NAME or identity:NAME",
                    fix,
                );
            }
        }
    }
    out
}

/// `annotations` of an ask rule: tool annotation names that, when `true`, make the rule apply.
fn read_annotations(
    reader: &mut Reader<'_>,
    field: &str,
    item: Option<&Item<'_>>,
    is_ask: bool,
) -> Vec<String> {
    let Some(item) = item else {
        return Vec::new();
    };
    if !is_ask {
        reader.report_value(
            field,
            item,
            Show::Value,
            "only an ask rule can match annotations (an upstream's annotations may make a call need approval, never exempt one)",
            "remove annotations, or write effect = \"ask\"",
        );
        return Vec::new();
    }
    let example = "write e.g. annotations = [\"destructiveHint\", \"openWorldHint\"]";
    let texts = reader
        .string_list(field, item, Show::Value, example)
        .unwrap_or_default();
    let mut out = Vec::with_capacity(texts.len());
    for text in texts {
        if ASK_ANNOTATIONS.contains(&text.value.as_str()) {
            out.push(text.value);
        } else {
            let fix = match closest(&text.value, ASK_ANNOTATIONS) {
                Some(near) => format!("did you mean {near:?}?"),
                None => format!("the annotations are {}", ASK_ANNOTATIONS.join(", ")),
            };
            reader.report_text(&text.field.clone(), &text, "is not a tool annotation", fix);
        }
    }
    out
}

/// The values of `texts`, reporting the empty ones.
pub(crate) fn non_empty(reader: &mut Reader<'_>, texts: Vec<Text>, example: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(texts.len());
    for text in texts {
        if text.value.trim().is_empty() {
            reader.report_text(&text.field.clone(), &text, "is empty", example);
        } else {
            out.push(text.value);
        }
    }
    out
}

pub(crate) fn read_servers(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    servers: &[ServerConfig],
) -> Vec<String> {
    let texts = reader
        .string_list(field, item, Show::Value, "write e.g. servers = [\"git\"]")
        .unwrap_or_default();
    let known: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    let mut out = Vec::with_capacity(texts.len());
    for text in texts {
        if known.contains(&text.value.as_str()) {
            out.push(text.value);
            continue;
        }
        let fix = match closest(&text.value, &known) {
            Some(near) if !text.interpolated => format!("did you mean {near:?}?"),
            _ if known.is_empty() => "no [servers.NAME] section is configured".to_owned(),
            _ => format!("the servers are {}", known.join(", ")),
        };
        reader.report_text(
            &text.field.clone(),
            &text,
            "names no configured server",
            fix,
        );
    }
    out
}

/// Reads `[rate_limits]` (absent: no limits).
pub(crate) fn read_rate_limits(
    reader: &mut Reader<'_>,
    section: Option<&Item<'_>>,
) -> RateLimitSpec {
    let Some(item) = section else {
        return RateLimitSpec::default();
    };
    let empty = DeTable::new();
    let table = reader
        .table("rate_limits", item, "write a [rate_limits] section")
        .unwrap_or(&empty);
    reader.check_keys("rate_limits", table, RATE_LIMIT_KEYS, &[]);
    let field = |k: &str| key_path("rate_limits", k);
    let per_identity = table
        .get("per_identity")
        .and_then(|i| read_limit(reader, &field("per_identity"), i));
    let per_tool = table
        .get("per_tool")
        .and_then(|i| read_limit(reader, &field("per_tool"), i));
    let tools = table
        .get("tools")
        .map(|i| read_tool_limits(reader, &field("tools"), i))
        .unwrap_or_default();
    RateLimitSpec {
        per_identity,
        per_tool,
        tools,
    }
}

/// A limit written as `"N/PERIOD"` or `{ rate = "N/PERIOD", burst = B }`.
fn read_limit(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Option<Limit> {
    if let DeValue::Table(table) = item.get_ref() {
        reader.check_keys(field, table, LIMIT_KEYS, &[]);
        return read_rate_and_burst(reader, field, item, table);
    }
    let text = reader.string(field, item, Show::Value, RATE_EXAMPLE)?;
    let (count, period) = rate(reader, field, &text)?;
    Some(Limit::per(count, period))
}

fn read_rate_and_burst(
    reader: &mut Reader<'_>,
    field: &str,
    item: &Item<'_>,
    table: &DeTable<'_>,
) -> Option<Limit> {
    let rate_field = key_path(field, "rate");
    let counted = match table.get("rate") {
        Some(i) => reader
            .string(&rate_field, i, Show::Value, RATE_EXAMPLE)
            .and_then(|text| rate(reader, &rate_field, &text)),
        None => {
            reader.report(
                &item.span(),
                field,
                None,
                "has no rate",
                "write rate = \"60/minute\"",
            );
            None
        }
    };
    // Read even when the rate is wrong, so that both problems are reported at once.
    let burst = match table.get("burst") {
        Some(i) => {
            let burst_field = key_path(field, "burst");
            let example = format!("write a number from 1 to {MAX_RATE_COUNT}, e.g. burst = 10");
            let n = reader.integer(&burst_field, i, &example)?;
            match u32::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_RATE_COUNT).contains(n))
            {
                Some(n) => Some(n),
                None => {
                    reader.report_value(
                        &burst_field,
                        i,
                        Show::Value,
                        format!("must be from 1 to {MAX_RATE_COUNT}"),
                        example,
                    );
                    return None;
                }
            }
        }
        None => None,
    };
    let (count, period) = counted?;
    Some(Limit {
        count,
        period,
        burst: burst.unwrap_or(count),
    })
}

fn read_tool_limits(reader: &mut Reader<'_>, field: &str, item: &Item<'_>) -> Vec<ToolLimitSpec> {
    let DeValue::Array(elements) = item.get_ref() else {
        reader.report(
            &item.span(),
            field,
            None,
            "must be an array of tables",
            "write [[rate_limits.tools]] sections with match = [\"PATTERN\"] and rate = \"N/PERIOD\"",
        );
        return Vec::new();
    };
    let mut out = Vec::with_capacity(elements.len());
    for (index, element) in elements.iter().enumerate() {
        let path = format!("{field}[{index}]");
        let Some(table) = reader.table(&path, element, "write a [[rate_limits.tools]] section")
        else {
            continue;
        };
        reader.check_keys(
            &path,
            table,
            TOOL_LIMIT_KEYS,
            &[("tools", "write match = [\"PATTERN\"]")],
        );
        let before = reader.problem_count();
        let patterns = match table.get("match") {
            Some(i) => read_patterns(
                reader,
                &key_path(&path, "match"),
                i,
                "write e.g. match = [\"git__push*\"]",
            ),
            None => {
                reader.report(
                    &element.span(),
                    &path,
                    None,
                    "has no match",
                    "write match = [\"PATTERN\"]: the exposed tool names this limit is for",
                );
                Vec::new()
            }
        };
        let limit = read_rate_and_burst(reader, &path, element, table);
        if reader.problem_count() > before {
            continue;
        }
        if let Some(limit) = limit {
            out.push(ToolLimitSpec {
                tools: patterns,
                limit,
            });
        }
    }
    out
}

/// Reads `"N/PERIOD"`, reporting what is wrong.
fn rate(reader: &mut Reader<'_>, field: &str, text: &Text) -> Option<(u32, Duration)> {
    match parse_rate(&text.value) {
        Ok(rate) => Some(rate),
        Err(problem) => {
            reader.report_text(field, text, problem, RATE_EXAMPLE);
            None
        }
    }
}

/// `"60/minute"`, `"5/s"`, `"100/10s"` -> (count, period).
pub(crate) fn parse_rate(text: &str) -> Result<(u32, Duration), String> {
    let Some((count, period)) = text.split_once('/') else {
        return Err("is not a rate".to_owned());
    };
    let count = count
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_RATE_COUNT).contains(n))
        .ok_or_else(|| format!("the count must be a whole number from 1 to {MAX_RATE_COUNT}"))?;
    let period = period.trim();
    let unit = match period.to_ascii_lowercase().as_str() {
        "s" | "sec" | "second" | "seconds" => Some(Duration::from_secs(1)),
        "m" | "min" | "minute" | "minutes" => Some(Duration::from_secs(60)),
        "h" | "hour" | "hours" => Some(Duration::from_secs(3600)),
        "d" | "day" | "days" => Some(Duration::from_secs(86_400)),
        _ => None,
    };
    let period = match unit {
        Some(d) => d,
        None => match parse_duration(period) {
            Ok(d) => d,
            Err(DurationError::TooLong) => {
                return Err("the period must be at most a day".to_owned());
            }
            Err(_) => {
                return Err(format!(
                    "{period:?} is not a period (second, minute, hour, day, or a duration such as \"10s\")"
                ));
            }
        },
    };
    if period > MAX_DURATION {
        return Err("the period must be at most a day".to_owned());
    }
    Ok((count, period))
}

#[cfg(test)]
mod tests;

//! Property tests of the rule docs/security.md ("Resource URIs") states: a resource rule holds for
//! every spelling of a URI. Generated URIs and rules, generated spellings (case of scheme and
//! host, `file://localhost`, percent-encoded unreserved characters in either hex case, `.` and
//! `..` segments, doubled slashes, and the readings upstreams add: trailing slashes, `%2F` and `\`
//! for `/`, a query or fragment); then the same spellings against a real upstream, whose refusal
//! must be the bytes a URI naming nothing gets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use manifold_gateway::catalog::uri_normal::{normal_form, readings};
use manifold_gateway::policy::{Decision, Effect, ItemKind, Policy, RuleSpec};
use manifold_gateway::{Gateway, GatewaySettings, RequestContext, UpstreamDefinition};
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{EraChoice, Target};
use manifold_wire::{Id, Message, Revision};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// A path segment that is neither `.` nor `..`, of unreserved characters only.
fn segment() -> impl Strategy<Value = String> {
    "[a-z0-9_~-][a-z0-9._~-]{0,5}".prop_filter("not a dot segment", |s| s != "." && s != "..")
}

/// How to misspell a URI: one choice per byte, read in turn.
#[derive(Debug, Clone)]
struct Misspelling {
    choices: Vec<u8>,
    /// Also the non-RFC readings: trailing slash, `%2F` or `\` separators, query, fragment.
    upstream_readings: bool,
}

fn misspelling() -> impl Strategy<Value = Misspelling> {
    (proptest::collection::vec(any::<u8>(), 64), any::<bool>()).prop_map(
        |(choices, upstream_readings)| Misspelling {
            choices,
            upstream_readings,
        },
    )
}

impl Misspelling {
    /// Spells `scheme://host/` + `segments` (`scheme:///` + `segments` without a host) another
    /// way the rule must see through.
    fn spell(&self, scheme: &str, host: Option<&str>, segments: &[String]) -> String {
        let mut at = 0usize;
        let mut next = || {
            let c = self
                .choices
                .get(at % self.choices.len())
                .copied()
                .unwrap_or(0);
            at += 1;
            c
        };
        let mut out: String = scheme
            .chars()
            .map(|c| {
                if next() % 2 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect();
        out.push(':');
        match host {
            None => out.push_str(
                ["///", "//localhost/", "//LOCALHOST/", "//LocalHost/"][usize::from(next() % 4)],
            ),
            Some(host) => {
                out.push_str("//");
                for c in host.chars() {
                    match next() % 4 {
                        0 => out.push(c.to_ascii_uppercase()),
                        1 => out.push_str(&format!("%{:02x}", u32::from(c))),
                        _ => out.push(c),
                    }
                }
                out.push('/');
            }
        }
        let slash = |n: u8| -> &'static str {
            match (self.upstream_readings, n % 8) {
                (true, 0) => "%2F",
                (true, 1) => "%2f",
                (true, 2) => "\\",
                (_, 3) => "//",
                _ => "/",
            }
        };
        for (i, seg) in segments.iter().enumerate() {
            match next() % 6 {
                0 => out.push_str("./"),
                1 => out.push_str("decoy/../"),
                2 => out.push_str("a/b/../../"),
                _ => {}
            }
            for c in seg.chars() {
                match next() % 5 {
                    0 => out.push_str(&format!("%{:02X}", u32::from(c))),
                    1 => out.push_str(&format!("%{:02x}", u32::from(c))),
                    _ => out.push(c),
                }
            }
            if i + 1 < segments.len() {
                out.push_str(slash(next()));
            }
        }
        if self.upstream_readings {
            match next() % 4 {
                0 => out.push('/'),
                1 => out.push_str("?v=1"),
                2 => out.push_str("#top"),
                _ => {}
            }
        }
        out
    }
}

fn deny(resources: &[String]) -> Policy {
    Policy::compile(vec![RuleSpec {
        resources: resources.to_vec(),
        ..RuleSpec::new(0, Effect::Deny)
    }])
    .unwrap()
}

fn decision(policy: &Policy, uri: &str) -> Decision {
    policy
        .for_caller(None)
        .decide(ItemKind::Resource, Some("fs"), uri)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// An RFC 3986 equivalent spelling has the normal form of the URI it spells.
    #[test]
    fn every_equivalent_spelling_has_one_normal_form(
        dir in proptest::collection::vec(segment(), 1..3),
        rest in proptest::collection::vec(segment(), 1..4),
        how in misspelling(),
    ) {
        let segments: Vec<String> = dir.iter().chain(&rest).cloned().collect();
        let normal = format!("fs+file:///{}", segments.join("/"));
        let how = Misspelling { upstream_readings: false, ..how };
        let spelling = how.spell("fs+file", None, &segments);
        prop_assert_eq!(normal_form(&spelling), normal.clone(), "{}", spelling);
        prop_assert!(readings(&spelling).contains(&normal));
    }

    /// A deny rule over a directory (its glob, or the exact URI) covers every spelling of every
    /// URI in it, the readings upstreams add included; and a URI outside it stays visible.
    #[test]
    fn every_spelling_of_a_covered_uri_is_refused(
        dir in proptest::collection::vec(segment(), 1..3),
        rest in proptest::collection::vec(segment(), 1..4),
        how in misspelling(),
        exact in any::<bool>(),
    ) {
        let covered = format!("fs+file:///{}/{}", dir.join("/"), rest.join("/"));
        let pattern = if exact { covered.clone() } else { format!("fs+file:///{}/*", dir.join("/")) };
        let policy = deny(std::slice::from_ref(&pattern));
        let segments: Vec<String> = dir.iter().chain(&rest).cloned().collect();
        let spelling = how.spell("fs+file", None, &segments);
        prop_assert_eq!(decision(&policy, &spelling), Decision::Hide, "{} under {}", spelling, pattern);
        let elsewhere = format!("fs+file:///elsewhere-{}", rest.join("/"));
        prop_assert_eq!(decision(&policy, &elsewhere), Decision::Allow);
    }

    /// An allowlist (allow one directory, deny the rest) cannot be left with `..`.
    #[test]
    fn an_allowlist_cannot_be_climbed_out_of(
        public in segment(),
        secret in proptest::collection::vec(segment(), 1..3),
        how in misspelling(),
    ) {
        prop_assume!(secret.first() != Some(&public));
        let policy = Policy::compile(vec![
            RuleSpec { resources: vec![format!("fs+file:///{public}/*")], ..RuleSpec::new(0, Effect::Allow) },
            RuleSpec { resources: vec!["*".to_owned()], ..RuleSpec::new(1, Effect::Deny) },
        ]).unwrap();
        let segments: Vec<String> = secret.clone();
        let spelled = how.spell("fs+file", None, &segments);
        let climbing = spelled.replacen(":///", &format!(":///{public}/../"), 1)
            .replacen("localhost/", &format!("localhost/{public}/../"), 1)
            .replacen("LOCALHOST/", &format!("LOCALHOST/{public}/../"), 1)
            .replacen("LocalHost/", &format!("LocalHost/{public}/../"), 1);
        prop_assert_eq!(decision(&policy, &climbing), Decision::Hide, "{}", climbing);
    }
}

fn fixture() -> UpstreamDefinition {
    let bin = manifold_testkit::workspace_binary(
        "manifold-conformance-fixture",
        "manifold-conformance-fixture",
    )
    .unwrap();
    let mut def = UpstreamDefinition::new(
        "fx",
        Target::Stdio(StdioSpec {
            command: bin.display().to_string(),
            args: vec!["stdio".to_owned()],
            ..StdioSpec::default()
        }),
    );
    def.era = EraChoice::Legacy;
    def
}

fn legacy() -> RequestContext {
    RequestContext::silent(Revision::V2025_11_25)
}

/// The bytes of an answer with the URI it quotes (`{uri:?}` inside a JSON string) replaced, to
/// compare with another answer's.
fn shape(answer: &Message, uri: &str) -> String {
    let quoted = |s: &str| {
        let json = serde_json::to_string(&format!("{s:?}")).unwrap();
        json.trim_matches('"').to_owned()
    };
    answer.as_str().replace(&quoted(uri), &quoted("URI"))
}

/// Generated spellings of the fixture's template resources, under a deny rule, through the
/// gateway to the real upstream: each is refused with exactly the bytes a URI of no server gets,
/// and the same URI in normal form is still served to a caller the rule does not cover.
#[tokio::test]
async fn a_hidden_uri_is_refused_in_every_spelling_like_one_that_names_nothing() {
    let rules = vec![RuleSpec {
        resources: vec!["fx+test://template/*".to_owned()],
        ..RuleSpec::new(0, Effect::Deny)
    }];
    let settings = GatewaySettings {
        rules: Policy::compile(rules).unwrap(),
        ..GatewaySettings::default()
    };
    let g = Gateway::start(settings, vec![fixture()]);
    g.wait_started(Duration::from_secs(60)).await;
    let c = legacy();
    let read = |uri: &str| {
        let params = serde_json::json!({ "uri": uri }).to_string();
        Message::request(&Id::Num(7), "resources/read", Some(&params))
    };
    let nothing = "nosuch+test://template/7/data";
    let expected = shape(&g.handle(&c, &read(nothing)).await, nothing);
    assert!(expected.contains("resource not found"), "{expected}");

    let mut runner = TestRunner::deterministic();
    let mut spellings = vec![
        "fx+test://TEMPLATE/7/data".to_owned(),
        "FX+Test://template/7/data".to_owned(),
        "fx+test://template/7/data/".to_owned(),
        "fx+test://template/7/./data".to_owned(),
        "fx+test://template/7/x/../data".to_owned(),
        "fx+test://template//7//data".to_owned(),
        "fx+test://%74emplate/7/%64ata".to_owned(),
        "fx+test://template%2F7%2Fdata".to_owned(),
    ];
    for _ in 0..64 {
        let how = misspelling().new_tree(&mut runner).unwrap().current();
        spellings.push(how.spell(
            "fx+test",
            Some("template"),
            &["7".to_owned(), "data".to_owned()],
        ));
    }
    for spelling in &spellings {
        let answer = g.handle(&c, &read(spelling)).await;
        assert_eq!(shape(&answer, spelling), expected, "{spelling}");
    }
    g.shutdown().await;
}

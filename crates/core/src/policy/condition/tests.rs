//! Each operator and combinator, context fields, the three truths, and hostile
//! conditions and arguments.

use serde_json::json;

use super::*;
use crate::policy::{PolicySet, PolicySource};

fn policy(when: &str) -> PolicySet {
    let text = format!("name: p\ntype: tool_access\nwhen: {when}\nrules: {{deny: ['*']}}\n");
    PolicySet::parse(&[PolicySource {
        name: "t.yaml",
        text: &text,
    }])
    .unwrap_or_else(|e| panic!("{when}: {e:?}"))
}

fn refused(when: &str) -> String {
    let text = format!("name: p\ntype: tool_access\nwhen: {when}\nrules: {{deny: ['*']}}\n");
    let errors = PolicySet::parse(&[PolicySource {
        name: "t.yaml",
        text: &text,
    }])
    .expect_err(when);
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

fn truth(when: &str, args: serde_json::Value) -> Truth {
    let set = policy(when);
    let ctx = RequestContext::new("support", &[], "alice")
        .tool("t")
        .arguments(&args);
    set.policies()[0].selects(&ctx)
}

#[test]
fn equals_compares_json_values_and_numbers_by_value() {
    assert_eq!(
        truth("{arg: /program, equals: git}", json!({"program": "git"})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /program, equals: git}", json!({"program": "gi"})),
        Truth::No
    );
    assert_eq!(truth("{arg: /n, equals: 5}", json!({"n": 5.0})), Truth::Yes);
    assert_eq!(
        truth("{arg: /flag, equals: true}", json!({"flag": true})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /flag, equals: true}", json!({"flag": "true"})),
        Truth::No
    );
    // On an array: the whole array, or any element.
    assert_eq!(
        truth(
            "{arg: /args, equals: push}",
            json!({"args": ["push", "origin"]})
        ),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /args, equals: [a, b]}", json!({"args": ["a", "b"]})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /args, equals: push}", json!({"args": ["pull"]})),
        Truth::No
    );
}

#[test]
fn in_holds_for_any_listed_value() {
    assert_eq!(
        truth("{arg: /env, in: [prod, staging]}", json!({"env": "prod"})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /env, in: [prod, staging]}", json!({"env": "dev"})),
        Truth::No
    );
    assert!(refused("{arg: /env, in: []}").contains("empty"));
    assert!(refused("{arg: /env, in: prod}").contains("takes a list"));
}

#[test]
fn matches_is_an_unanchored_regular_expression_compiled_at_load() {
    assert_eq!(
        truth(
            "{arg: /to, matches: '@co\\.com$'}",
            json!({"to": "a@co.com"})
        ),
        Truth::Yes
    );
    assert_eq!(
        truth(
            "{arg: /to, matches: '@co\\.com$'}",
            json!({"to": "a@co.com.evil"})
        ),
        Truth::No
    );
    assert_eq!(
        truth("{arg: /n, matches: '5'}", json!({"n": 5})),
        Truth::No,
        "numbers are not text"
    );
    assert!(refused("{arg: /to, matches: '(a'}").contains("not a regular expression"));
    assert!(refused("{arg: /to, matches: '(a)\\1'}").contains("not a regular expression"));
    assert!(refused("{arg: /to, matches: '(?=a)'}").contains("not a regular expression"));
}

#[test]
fn catastrophic_and_oversized_patterns_are_refused_at_load() {
    for pattern in ["(a+)+$", "(a*)*b", "(\\w+\\s?)*$", "((ab)+)+", "(x+x+)+y"] {
        let message = refused(&format!("{{arg: /x, matches: '{pattern}'}}"));
        assert!(
            message.contains("repeats a repetition"),
            "{pattern}: {message}"
        );
    }
    assert!(refused("{arg: /x, matches: 'a{1000}{1000}'}").contains("refused"));
    let long = "a".repeat(2000);
    assert!(refused(&format!("{{arg: /x, matches: '{long}'}}")).contains("at most 1024 bytes"));
    // One repetition per round, each round one way: fine.
    policy("{arg: /host, matches: '^([a-z0-9-]+\\.)*example\\.com$'}");
    policy("{arg: /x, matches: '(ab+c)*'}");
}

#[test]
fn glob_uses_the_name_patterns_of_targets() {
    assert_eq!(
        truth(
            "{arg: /branch, glob: 'release/*'}",
            json!({"branch": "release/1.2"})
        ),
        Truth::Yes
    );
    assert_eq!(
        truth(
            "{arg: /branch, glob: ['main', 'release/*']}",
            json!({"branch": "dev"})
        ),
        Truth::No
    );
}

#[test]
fn path_under_resolves_dots_and_the_workspace_root() {
    let t = |path: &str| {
        truth(
            "{arg: /path, path_under: [.github]}",
            json!({ "path": path }),
        )
    };
    for inside in [
        ".github",
        ".github/workflows/ci.yml",
        "./.github/x",
        "a/../.github/x",
        ".github//x",
        "src/../.github",
    ] {
        assert_eq!(t(inside), Truth::Yes, "{inside}");
    }
    for outside in [
        ".githubx/y",
        "src/.github/x",
        "../.github/x",
        "x/../../.github/y",
        "/etc/passwd",
        "",
    ] {
        assert_eq!(t(outside), Truth::No, "{outside}");
    }
    assert!(refused("{arg: /path, path_under: ['../up']}").contains("climbs out"));
}

#[test]
fn path_under_follows_symbolic_links_inside_the_workspace() {
    let root = tempfile_dir();
    std::fs::create_dir_all(root.join(".github/workflows")).expect("mkdir");
    std::os::unix::fs::symlink(".github", root.join("docs")).expect("symlink");
    let set = policy("{arg: /path, path_under: [.github]}");
    let args = json!({"path": "docs/workflows/new.yml"});
    let ctx = RequestContext::new("a", &[], "c")
        .tool("write_file")
        .arguments(&args);
    assert_eq!(
        set.policies()[0].selects(&ctx),
        Truth::No,
        "without the root: as written"
    );
    let ctx = ctx.workspace(root.as_path());
    assert_eq!(
        set.policies()[0].selects(&ctx),
        Truth::Yes,
        "through the link"
    );
    let absolute = json!({"path": root.join(".github/x").to_string_lossy()});
    let ctx = ctx.arguments(&absolute);
    assert_eq!(
        set.policies()[0].selects(&ctx),
        Truth::Yes,
        "absolute inside the root"
    );
    std::fs::remove_dir_all(&root).ok();
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agentplane-cond-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.canonicalize().expect("canonical")
}

#[test]
fn host_in_reads_the_host_of_a_url() {
    let t = |url: &str| {
        truth(
            "{arg: /url, host_in: ['api.github.com', '*.example.com']}",
            json!({ "url": url }),
        )
    };
    assert_eq!(t("https://api.github.com/repos"), Truth::Yes);
    assert_eq!(t("https://API.GitHub.com./x"), Truth::Yes);
    assert_eq!(t("http://docs.example.com:8080/a"), Truth::Yes);
    assert_eq!(t("api.github.com/x"), Truth::Yes, "a bare host");
    for other in [
        "https://api.github.com.evil.net/",
        "https://api.github.com@evil.net/",
        "https://evil.net/?https://api.github.com",
        "https://example.com/",
        "file:///etc/passwd",
        "not a url at all",
    ] {
        assert_eq!(t(other), Truth::No, "{other}");
    }
}

#[test]
fn numeric_comparisons_take_numbers_only() {
    assert_eq!(
        truth("{arg: /amount, gt: 100}", json!({"amount": 100.5})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /amount, gte: 100}", json!({"amount": 100})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /amount, lt: 100}", json!({"amount": 100})),
        Truth::No
    );
    assert_eq!(
        truth("{arg: /amount, lte: 100}", json!({"amount": "50"})),
        Truth::No
    );
    assert!(refused("{arg: /amount, gt: ten}").contains("takes a number"));
    assert!(refused("{arg: /amount, gt: .nan}").contains("takes a number"));
}

#[test]
fn combinators_and_the_missing_path() {
    let both = "{all: [{arg: /program, equals: git}, {arg: /args, equals: push}]}";
    assert_eq!(
        truth(both, json!({"program": "git", "args": ["push"]})),
        Truth::Yes
    );
    assert_eq!(
        truth(both, json!({"program": "git", "args": ["pull"]})),
        Truth::No
    );
    let either = "{any: [{arg: /a, equals: 1}, {arg: /b, equals: 1}]}";
    assert_eq!(truth(either, json!({"b": 1})), Truth::Yes);
    assert_eq!(truth(either, json!({})), Truth::No);
    // A list is `all`.
    assert_eq!(
        truth(
            "[{arg: /a, equals: 1}, {arg: /b, equals: 2}]",
            json!({"a": 1, "b": 2})
        ),
        Truth::Yes
    );
    // A test on a missing path does not hold; `not` of it does; `exists` tells.
    assert_eq!(truth("{arg: /missing, equals: x}", json!({})), Truth::No);
    assert_eq!(
        truth("{not: {arg: /missing, equals: x}}", json!({})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /missing, exists: false}", json!({})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /a/0/b, exists: true}", json!({"a": [{"b": null}]})),
        Truth::Yes
    );
    // Arguments that are not an object: every pointer is missing.
    assert_eq!(truth("{arg: /a, equals: 1}", json!("text")), Truth::No);
    assert_eq!(truth("{arg: '', equals: text}", json!("text")), Truth::Yes);
}

#[test]
fn without_arguments_a_test_on_them_is_unknown_and_the_policy_does_not_apply() {
    let set = policy("{not: {arg: /url, host_in: [a.com]}}");
    let listing = RequestContext::new("a", &[], "c").tool("fetch_url");
    assert_eq!(set.policies()[0].selects(&listing), Truth::Unknown);
    let known = policy("{all: [{context: client, equals: c}, {arg: /x, equals: 1}]}");
    assert_eq!(known.policies()[0].selects(&listing), Truth::Unknown);
    let no = policy("{all: [{context: client, equals: other}, {arg: /x, equals: 1}]}");
    assert_eq!(
        no.policies()[0].selects(&listing),
        Truth::No,
        "a known no decides"
    );
}

#[test]
fn context_fields() {
    let roles = vec!["operator".to_owned()];
    let tags = vec!["customer-facing".to_owned()];
    let args = json!({});
    let ctx = RequestContext::new("support", &tags, "ci-bot")
        .tool("send_email")
        .arguments(&args)
        .roles(&roles)
        .version("3")
        .at("2026-11-25T12:00:00Z".parse().expect("time"));
    let holds = |when: &str| policy(when).policies()[0].selects(&ctx);
    assert_eq!(holds("{context: client, glob: 'ci-*'}"), Truth::Yes);
    assert_eq!(holds("{context: roles, equals: operator}"), Truth::Yes);
    assert_eq!(holds("{context: roles, equals: admin}"), Truth::No);
    assert_eq!(holds("{context: agent, in: [support, ops]}"), Truth::Yes);
    assert_eq!(holds("{context: version, equals: '3'}"), Truth::Yes);
    assert_eq!(holds("{context: tags, matches: '^customer-'}"), Truth::Yes);
    assert_eq!(holds("{context: tool, equals: send_email}"), Truth::Yes);
    assert_eq!(
        holds("{context: time, gte: '2026-11-25T00:00:00Z'}"),
        Truth::Yes
    );
    assert_eq!(
        holds("{context: time, lt: '2026-11-25T00:00:00Z'}"),
        Truth::No
    );
    assert!(refused("{context: time, equals: now}").contains("gt, gte, lt or lte"));
    assert!(refused("{context: client, gt: 3}").contains("compares numbers"));
    assert!(refused("{context: weather, equals: sunny}").contains("one of client"));
}

#[test]
fn malformed_conditions_are_refused_with_their_place() {
    assert!(refused("{arg: to, equals: x}").contains("starting with `/`"));
    assert!(refused("{arg: /to}").contains("exactly one operator"));
    assert!(refused("{arg: /to, equals: a, in: [b]}").contains("exactly one operator"));
    assert!(refused("{equals: a}").contains("needs a subject"));
    assert!(refused("{arg: /to, context: client, equals: a}").contains("not both"));
    assert!(refused("{all: [], }").contains("empty"));
    assert!(refused("{all: {arg: /a, equals: 1}}").contains("takes a list"));
    assert!(refused("{any: [{arg: /a, equals: 1}], arg: /b}").contains("stands alone"));
    assert!(refused("{arg: /a, equal: 1}").contains("unknown key `equal`"));
    assert!(refused("42").contains("expected a condition"));
    let located = refused("{all: [{arg: /a, equals: 1}, {arg: /b, matches: '(x+)+'}]}");
    assert!(located.contains("when.all[1].matches"), "{located}");
}

#[test]
fn hostile_conditions_are_bounded() {
    // Deep nesting: refused with a message, no stack overflow.
    let mut deep = "{arg: /a, equals: 1}".to_owned();
    for _ in 0..20 {
        deep = format!("{{not: {deep}}}");
    }
    let message = refused(&deep);
    assert!(
        message.contains("nested deeper") || message.contains("deeper than"),
        "{message}"
    );
    // Too many tests.
    let many: Vec<String> = (0..300)
        .map(|i| format!("{{arg: /a, equals: {i}}}"))
        .collect();
    assert!(refused(&format!("{{any: [{}]}}", many.join(", "))).contains("more than 256"));
    // A long `in` list.
    let values: Vec<String> = (0..1001).map(|i| i.to_string()).collect();
    assert!(refused(&format!("{{arg: /a, in: [{}]}}", values.join(", "))).contains("at most 1000"));
}

#[test]
fn hostile_arguments_are_evaluated_without_harm() {
    // A huge array: every element is looked at (a deny condition cannot be dodged
    // by hiding the value at the end).
    let mut items: Vec<serde_json::Value> = (0..200_000).map(|i| json!(i.to_string())).collect();
    items.push(json!("push"));
    assert_eq!(
        truth("{arg: /args, equals: push}", json!({ "args": items })),
        Truth::Yes
    );
    // Deeply nested arguments: a pointer walks them, nothing recurses over them.
    let mut nested = json!("x");
    for _ in 0..1_000 {
        nested = json!([nested]);
    }
    assert_eq!(
        truth("{arg: /a/0/0/0, exists: true}", json!({ "a": nested })),
        Truth::Yes
    );
    // A long string against a regex: linear time.
    let long = "a".repeat(1 << 20);
    assert_eq!(
        truth("{arg: /s, matches: 'a*b'}", json!({ "s": long })),
        Truth::No
    );
    // Odd pointers: escaped `~1`, an index past the end, a number key.
    assert_eq!(
        truth("{arg: /a~1b, equals: 1}", json!({"a/b": 1})),
        Truth::Yes
    );
    assert_eq!(
        truth("{arg: /a/99, exists: true}", json!({"a": [1]})),
        Truth::No
    );
}

#[test]
fn explanations_name_the_deciding_test_without_argument_values() {
    let set = policy("{all: [{arg: /program, equals: git}, {arg: /args, equals: push}]}");
    let args = json!({"program": "git", "args": ["pull", "SECRET-VALUE"]});
    let ctx = RequestContext::new("a", &[], "c")
        .tool("run_command")
        .arguments(&args);
    let why = set.policies()[0].when().expect("when").explain(&ctx);
    assert_eq!(why, "arg /args equals \"push\" does not hold");
    assert!(!why.contains("SECRET-VALUE"));
    let missing = json!({});
    let why = set.policies()[0]
        .when()
        .expect("when")
        .explain(&ctx.arguments(&missing));
    assert!(why.contains("no such argument"), "{why}");
    let listing = RequestContext::new("a", &[], "c").tool("run_command");
    let why = set.policies()[0].when().expect("when").explain(&listing);
    assert!(why.contains("depends on the call's arguments"), "{why}");
}

#[test]
fn every_asks_all_elements_of_an_array() {
    let internal = "{not: {arg: /to, every: true, matches: '@co\\.com$'}}";
    assert_eq!(
        truth(internal, json!({"to": ["a@co.com", "b@co.com"]})),
        Truth::No
    );
    assert_eq!(
        truth(internal, json!({"to": ["a@co.com", "x@evil.net"]})),
        Truth::Yes
    );
    assert_eq!(truth(internal, json!({"to": "x@evil.net"})), Truth::Yes);
    assert_eq!(truth(internal, json!({"to": "a@co.com"})), Truth::No);
    assert!(refused("{context: tags, every: true, equals: a}").contains("for arguments"));
}

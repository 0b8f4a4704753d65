//! Parsing and validation of policy files: every kind, the seed's format, located
//! errors (file, line, field), duplicates across files, hostile input, and time windows
//! across daylight-saving changes (New York and Berlin, spring and autumn).

use agentplane_core::policy::{
    BudgetPeriod, CountKey, Day, PolicyError, PolicyKind, PolicySet, PolicySource, Rule,
    parse_source,
};

fn errors(name: &str, text: &str) -> Vec<PolicyError> {
    parse_source(name, text).expect_err("should be invalid")
}

fn one_error(name: &str, text: &str) -> String {
    let e = errors(name, text);
    assert_eq!(e.len(), 1, "{e:?}");
    e[0].to_string()
}

#[test]
fn every_kind_parses() {
    let text = r#"
- name: approve-mail
  type: approval_required
  targets: {tools: [send_email]}
  rules: {approvers: [lead@example.com]}
- name: github-rate
  type: rate_limit
  targets: {tools: ["mcp__github__*"]}
  rules: {window: 1m, max: 30, per: [agent, client]}
- name: office-hours
  type: time_window
  targets: {tags: [customer-facing]}
  rules: {timezone: Europe/Berlin, days: [mon, tue, wednesday, Thu, fri], hours: "09:00-17:00"}
- name: monthly
  type: budget
  targets: {agents: [support]}
  rules: {usd: 25.5, period: month, per: [client]}
- name: no-shell
  type: tool_access
  rules: {allow: ["mcp__*", read_file], deny: [shell]}
- name: support-data
  type: data_scope
  targets: {agents: [support]}
  rules: {paths: ["/srv/tickets/*"], hosts: ["*.example.com"], secrets: [ZENDESK_TOKEN]}
- name: no-cards
  type: content
  rules: {detectors: [card, iban, {name: ticket, regex: 'TCK-[0-9]{6}'}], surfaces: [model_output, tool_results], action: redact}
"#;
    let policies = parse_source("all.yaml", text).unwrap();
    let kinds: Vec<PolicyKind> = policies.iter().map(|p| p.kind()).collect();
    // One policy of every kind, in `ALL`'s order: a new kind fails here until this
    // example (the format's whole surface) shows it. Each names itself in its summary,
    // which `policy check` prints.
    assert_eq!(kinds, PolicyKind::ALL);
    for (policy, kind) in policies.iter().zip(PolicyKind::ALL) {
        let named = format!("{}: {} ", policy.name(), kind.as_str());
        assert!(policy.summary().starts_with(&named), "{}", policy.summary());
        assert_eq!(PolicyKind::parse(kind.as_str()), Some(*kind));
    }
    assert_eq!(PolicyKind::parse("other"), None);
    match policies[1].rule() {
        Rule::RateLimit(r) => {
            assert_eq!(r.max, 30);
            assert_eq!(r.window.as_secs(), 60);
            assert_eq!(r.per, [CountKey::Agent, CountKey::Client]);
        }
        other => panic!("{other:?}"),
    }
    match policies[2].rule() {
        Rule::TimeWindow(w) => {
            assert_eq!(w.days, [Day::Mon, Day::Tue, Day::Wed, Day::Thu, Day::Fri]);
            assert_eq!(w.timezone.name(), "Europe/Berlin");
        }
        other => panic!("{other:?}"),
    }
    match policies[3].rule() {
        Rule::Budget(b) => {
            assert_eq!(b.usd_micros, 25_500_000);
            assert_eq!(b.period, BudgetPeriod::Month);
            assert_eq!(b.timezone.name(), "UTC");
        }
        other => panic!("{other:?}"),
    }
    assert!(policies.iter().all(|p| p.source() == "all.yaml"));
    assert!(
        policies[4].summary().contains("deny shell"),
        "{}",
        policies[4].summary()
    );
}

#[test]
fn the_seed_example_parses_with_its_field_names() {
    // ADR-002's example, with `applies_to`/`target_tags` written as `targets`.
    let text = "policy_name: customer-email-approval
policy_type: approval_required
targets:
  tags: [customer-facing]
rules:
  require_approval_for: [send_email]
  approvers: [manager@co.com]
";
    let p = &parse_source("seed.yaml", text).unwrap()[0];
    assert_eq!(p.name(), "customer-email-approval");
    match p.rule() {
        Rule::ApprovalRequired(a) => {
            assert_eq!(a.tools.as_ref().unwrap()[0].as_str(), "send_email");
            assert_eq!(a.approvers, ["manager@co.com"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn several_documents_in_one_file() {
    let text = "name: a\ntype: tool_access\nrules: {deny: [x]}\n---\nname: b\ntype: tool_access\nrules: {deny: [y]}\n";
    assert_eq!(parse_source("two.yaml", text).unwrap().len(), 2);
    assert!(parse_source("none.yaml", "[]\n").unwrap().is_empty());
}

/// A truncated file must not pass as "0 policies OK": a file with no YAML in it (empty,
/// blank, or comments only) is an error; one meant to hold none says `[]`.
#[test]
fn an_empty_blank_or_comment_only_file_is_an_error() {
    for text in ["", "\n", "  \n\t\n", "# nothing yet\n"] {
        let e = one_error("empty.yaml", text);
        assert!(
            e.starts_with("empty.yaml: no policy in the file: it is empty"),
            "{text:?}: {e}"
        );
    }
}

/// Every error of a file, each at its own line: two fields of one policy, a field of
/// another type, and a second bad policy in the same list.
#[test]
fn every_error_of_a_file_is_reported_at_its_line() {
    let text = "\
- name: approve
  type: approval_required
  rules:
    tools: [send_email]
    window: 5m
- name: 'bad name'
  type: rate_limit
  targets: {agent: [x]}
  rules:
    window: 10x
    max: 0
- name: fine
  type: tool_access
  rules: {deny: [x]}
";
    let shown: Vec<String> = errors("many.yaml", text)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            "many.yaml:5: [0].rules.window: unknown field `window` for approval_required \
             policies, expected one of `tools`, `approvers`, `separate_approver`",
            "many.yaml:6: [1].name: `bad name` is not a policy name (letters, digits, `_`, \
             `-`, `.`; at most 128)",
            "many.yaml:8: [1].targets.agent: unknown field `agent`, expected one of \
             `agents`, `tags`, `tools`, `clients`",
            "many.yaml:10: [1].rules.window: `10x` is not a window like 30s, 5m, 1h or 1d",
            "many.yaml:11: [1].rules.max: must be at least 1",
        ],
    );
}

#[test]
fn an_unknown_rule_field_lists_only_the_fields_of_its_type() {
    let e = one_error(
        "a.yaml",
        "name: a\ntype: approval_required\nrules:\n  tools: [x]\n  window: 5m\n",
    );
    assert_eq!(
        e,
        "a.yaml:5: rules.window: unknown field `window` for approval_required policies, \
         expected one of `tools`, `approvers`, `separate_approver`"
    );
    let e = one_error(
        "b.yaml",
        "name: b\ntype: budget\nrules: {usd: 5, period: day, bogus: 1}\n",
    );
    assert!(
        e.ends_with(
            "unknown field `bogus` for budget policies, expected one of `usd`, \
                     `period`, `timezone`, `per`"
        ),
        "{e}"
    );
    assert!(!e.contains("allow"), "{e}");
}

#[test]
fn a_bad_value_names_file_line_and_field() {
    let text = "name: mail\ntype: rate_limit\nrules:\n  window: 1m\n  max: 0\n";
    assert_eq!(
        one_error("policies/email.yaml", text),
        "policies/email.yaml:5: rules.max: must be at least 1"
    );
    let e = one_error(
        "w.yaml",
        "name: w\ntype: rate_limit\nrules:\n  window: 10x\n  max: 3\n",
    );
    assert!(
        e.starts_with("w.yaml:4: rules.window: `10x` is not a window"),
        "{e}"
    );
}

#[test]
fn unknown_fields_are_errors_with_their_name() {
    let e = errors(
        "u.yaml",
        "name: u\ntype: tool_access\nrules: {deny: [x]}\ncolour: red\n",
    );
    assert_eq!(e[0].line, Some(4), "{e:?}");
    assert_eq!(e[0].field.as_deref(), Some("colour"), "{e:?}");
    let e = errors(
        "u.yaml",
        "name: u\ntype: tool_access\nrules:\n  deny: [x]\n  alow: [y]\n",
    );
    assert_eq!(e[0].line, Some(5), "{e:?}");
    assert_eq!(e[0].field.as_deref(), Some("rules.alow"), "{e:?}");
    let e = one_error(
        "t.yaml",
        "name: t\ntype: tool_access\ntargets: {agent: [x]}\nrules: {deny: [x]}\n",
    );
    assert!(
        e.starts_with("t.yaml:3: targets.agent: unknown field `agent`"),
        "{e}"
    );
}

#[test]
fn fields_of_another_kind_and_missing_fields_are_errors() {
    let e = one_error(
        "k.yaml",
        "name: k\ntype: tool_access\nrules: {deny: [x], max: 3}\n",
    );
    assert_eq!(
        e,
        "k.yaml:3: rules.max: unknown field `max` for tool_access policies, expected one \
         of `allow`, `deny`"
    );
    // A missing field is shown at its parent's line.
    let e = one_error("k.yaml", "name: k\ntype: rate_limit\nrules: {window: 1m}\n");
    assert_eq!(e, "k.yaml:3: rules.max: required for rate_limit policies");
    let e = one_error("k.yaml", "name: k\ntype: tool_access\n");
    assert!(e.contains("needs `allow` or `deny`"), "{e}");
    let e = one_error(
        "k.yaml",
        "name: k\ntype: budget\nrules: {usd: 5, period: day, per: [tool]}\n",
    );
    assert!(
        e.contains("rules.per: budgets are per agent or client"),
        "{e}"
    );
    let e = one_error("k.yaml", "type: budget\nrules: {usd: 5, period: day}\n");
    assert!(e.contains("missing field `name`"), "{e}");
    let e = one_error("k.yaml", "name: k\ntype: forbid_everything\n");
    assert!(e.starts_with("k.yaml:2: type: unknown variant"), "{e}");
}

#[test]
fn list_form_errors_name_the_element() {
    let text = "- name: a\n  type: tool_access\n  rules: {deny: [x]}\n- name: b\n  type: rate_limit\n  rules: {window: 1m}\n";
    let e = one_error("l.yaml", text);
    assert_eq!(
        e,
        "l.yaml:6: [1].rules.max: required for rate_limit policies"
    );
}

#[test]
fn bad_values_of_each_kind_are_refused() {
    for (text, expect) in [
        (
            "name: t\ntype: time_window\nrules: {timezone: Mars/Base}\n",
            "3: rules.timezone: `Mars/Base` is not an IANA time zone",
        ),
        (
            "name: t\ntype: time_window\nrules: {timezone: UTC, hours: '17:00-17:00'}\n",
            "rules.hours",
        ),
        (
            "name: t\ntype: time_window\nrules: {timezone: UTC, days: [someday]}\n",
            "rules.days",
        ),
        (
            "name: t\ntype: time_window\nrules: {timezone: UTC, days: []}\n",
            "must name at least one day",
        ),
        (
            "name: t\ntype: budget\nrules: {usd: -1, period: day}\n",
            "rules.usd: must be more than 0",
        ),
        (
            "name: t\ntype: budget\nrules: {usd: .nan, period: day}\n",
            "rules.usd",
        ),
        (
            "name: t\ntype: budget\nrules: {usd: 5, period: fortnight}\n",
            "rules.period",
        ),
        (
            "name: t\ntype: rate_limit\nrules: {window: 0s, max: 1}\n",
            "rules.window: must be at least 1s",
        ),
        (
            "name: t\ntype: rate_limit\nrules: {window: 1s, max: 99999999999}\n",
            "rules.max",
        ),
        (
            "name: t\ntype: tool_access\nrules: {deny: ['']}\n",
            "rules.deny",
        ),
        (
            "name: t\ntype: tool_access\ntargets: {tools: ['a b']}\nrules: {deny: [x]}\n",
            "targets.tools",
        ),
        (
            "name: 'bad name'\ntype: tool_access\nrules: {deny: [x]}\n",
            "1: name: `bad name` is not a policy name",
        ),
        ("just a string\n", "a policy (a mapping) or a list"),
    ] {
        let e = one_error("v.yaml", text);
        assert!(e.contains(expect), "{text:?}: {e}");
    }
}

#[test]
fn duplicate_names_across_files_are_errors() {
    let a = "name: mail\ntype: tool_access\nrules: {deny: [x]}\n";
    let b = "# second\nname: other\ntype: tool_access\nrules: {deny: [x]}\n---\nname: \"mail\"\ntype: tool_access\nrules: {deny: [y]}\n";
    let e = PolicySet::parse(&[
        PolicySource {
            name: "a.yaml",
            text: a,
        },
        PolicySource {
            name: "b.yaml",
            text: b,
        },
    ])
    .unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0].to_string(),
        "b.yaml:6: name: duplicate policy name `mail` (first in a.yaml)"
    );
    let ok = PolicySet::parse(&[PolicySource {
        name: "a.yaml",
        text: a,
    }])
    .unwrap();
    assert_eq!(ok.len(), 1);
    assert!(ok.get("mail").is_some());
}

#[test]
fn all_errors_of_all_files_are_reported() {
    let e = PolicySet::parse(&[
        PolicySource {
            name: "a.yaml",
            text: "name: a\ntype: nope\n",
        },
        PolicySource {
            name: "b.yaml",
            text: "name: [\n",
        },
    ])
    .unwrap_err();
    assert!(e.len() >= 2, "{e:?}");
    assert_eq!(e[0].source, "a.yaml");
    assert!(
        e[1..]
            .iter()
            .all(|e| e.source == "b.yaml" && e.line.is_some()),
        "{e:?}"
    );
}

#[test]
fn a_file_over_one_mebibyte_is_refused() {
    // Too big.
    let huge = format!("description: \"{}\"\n", "x".repeat(1024 * 1024));
    assert!(one_error("huge.yaml", &huge).contains("larger than"));
}

#[test]
fn deeply_nested_yaml_is_refused() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(parse_source("deep.yaml", &deep).is_err());
    let deep = format!(
        "name: d\ntype: data_scope\nrules: {{paths: {}{}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(parse_source("deep.yaml", &deep).is_err());
    let deep = format!(
        "name: d\ntype: data_scope\ndescription: {}x{}\n",
        "{a: ".repeat(50_000),
        "}".repeat(50_000)
    );
    assert!(parse_source("deep.yaml", &deep).is_err());
}

#[test]
fn an_alias_bomb_is_refused() {
    // Billion laughs: each alias level multiplies by ten.
    let mut bomb = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in b'b'..=b'j' {
        let prev = (level - 1) as char;
        let cur = level as char;
        bomb.push_str(&format!("{cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
    }
    let started = std::time::Instant::now();
    let e = one_error("bomb.yaml", &bomb);
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{e}");
    let in_a_field = format!("- name: x\n  type: data_scope\n  description: {bomb}");
    assert!(parse_source("bomb2.yaml", &in_a_field).is_err());
}

#[test]
fn binary_garbage_is_refused() {
    // Control characters and stray tabs.
    assert!(parse_source("bin.yaml", "\u{1}\u{2}\u{7f}\u{0}garbage").is_err());
}

#[test]
fn the_pre_scan_leaves_ordinary_text_alone() {
    let text = "name: g\ntype: tool_access\ndescription: R & D's tools # a * comment\nrules: {deny: [\"*_email\", 'mcp__*'], allow: [mcp__github__*]}\n";
    let p = parse_source("g.yaml", text).unwrap();
    assert_eq!(p.len(), 1);
    let e = one_error(
        "g.yaml",
        "name: g\ntype: tool_access\nrules: {deny: [*_email]}\n",
    );
    assert!(e.starts_with("g.yaml:3: YAML anchors and aliases"), "{e}");
    let e = one_error(
        "g.yaml",
        "name: g\ntype: tool_access\nrules:\n  deny: [x]\n\u{1}\n",
    );
    assert!(e.starts_with("g.yaml:5: control character U+0001"), "{e}");
}

#[test]
fn plain_scalars_and_block_text_parse_as_written() {
    let text = "name: h\ntype: time_window\ndescription: |\n  Weekdays only. Globs like mcp__* are fine here; so is R&D.\nrules:\n  timezone: America/New_York\n  days: [Monday, SAT]\n  hours: 22:00-06:00\n";
    let p = parse_source("h.yaml", text).unwrap();
    match p[0].rule() {
        Rule::TimeWindow(w) => {
            assert_eq!(w.days, [Day::Mon, Day::Sat]);
            assert_eq!(w.hours.to_string(), "22:00-06:00");
        }
        other => panic!("{other:?}"),
    }
    assert!(p[0].description().unwrap().contains("mcp__*"));
}

// ----- time windows across daylight-saving changes --------------------------------------

/// The time window of a policy with these rules.
fn window(rules: &str) -> agentplane_core::policy::TimeWindow {
    let text = format!("name: w\ntype: time_window\nrules: {rules}\n");
    match parse_source("w.yaml", &text)
        .expect("valid")
        .remove(0)
        .rule()
    {
        Rule::TimeWindow(w) => w.clone(),
        other => panic!("{other:?}"),
    }
}

/// Whether the window holds at each UTC instant, as `(instant, expected)` pairs.
#[track_caller]
fn assert_inside(w: &agentplane_core::policy::TimeWindow, cases: &[(&str, bool)]) {
    for (at, expected) in cases {
        let at: agentplane_core::policy::Timestamp = at.parse().expect("instant");
        assert_eq!(w.contains(at), *expected, "{at} in {}", w.summary());
    }
}

#[test]
fn new_york_office_hours_follow_the_spring_change() {
    // Sunday 2026-03-08, 02:00 EST becomes 03:00 EDT: 09:00 local is 14:00Z before,
    // 13:00Z after.
    let w = window("{timezone: America/New_York, hours: '09:00-17:00'}");
    assert_inside(
        &w,
        &[
            ("2026-03-07T13:30:00Z", false), // Sat 08:30 EST
            ("2026-03-07T14:00:00Z", true),  // Sat 09:00 EST
            ("2026-03-07T21:59:00Z", true),  // Sat 16:59 EST
            ("2026-03-07T22:00:00Z", false), // Sat 17:00 EST
            ("2026-03-08T12:59:00Z", false), // Sun 08:59 EDT
            ("2026-03-08T13:00:00Z", true),  // Sun 09:00 EDT
            ("2026-03-08T13:30:00Z", true),  // Sun 09:30 EDT (08:30 by the old offset)
            ("2026-03-08T20:59:00Z", true),  // Sun 16:59 EDT
            ("2026-03-08T21:00:00Z", false), // Sun 17:00 EDT
            ("2026-03-09T13:00:00Z", true),  // Mon 09:00 EDT
        ],
    );
}

#[test]
fn new_york_office_hours_follow_the_autumn_change() {
    // Sunday 2026-11-01, 02:00 EDT becomes 01:00 EST: 09:00 local is 13:00Z before,
    // 14:00Z after.
    let w = window("{timezone: America/New_York, hours: '09:00-17:00'}");
    assert_inside(
        &w,
        &[
            ("2026-10-31T13:00:00Z", true),  // Sat 09:00 EDT
            ("2026-10-31T20:59:00Z", true),  // Sat 16:59 EDT
            ("2026-10-31T21:00:00Z", false), // Sat 17:00 EDT
            ("2026-11-01T13:30:00Z", false), // Sun 08:30 EST (09:30 by the old offset)
            ("2026-11-01T14:00:00Z", true),  // Sun 09:00 EST
            ("2026-11-01T21:59:00Z", true),  // Sun 16:59 EST
            ("2026-11-01T22:00:00Z", false), // Sun 17:00 EST
        ],
    );
}

#[test]
fn the_hour_skipped_in_spring_is_never_inside_and_the_repeated_one_counts_twice() {
    let night = window("{timezone: America/New_York, hours: '02:00-03:00'}");
    assert_inside(
        &night,
        &[
            ("2026-03-07T07:30:00Z", true),  // Sat 02:30 EST: an ordinary night
            ("2026-03-08T06:59:00Z", false), // Sun 01:59 EST
            ("2026-03-08T07:00:00Z", false), // Sun 03:00 EDT: 02:xx never happens
            ("2026-03-08T07:30:00Z", false), // Sun 03:30 EDT
        ],
    );
    let repeated = window("{timezone: America/New_York, hours: '01:00-02:00'}");
    assert_inside(
        &repeated,
        &[
            ("2026-11-01T04:59:00Z", false), // 00:59 EDT
            ("2026-11-01T05:00:00Z", true),  // 01:00 EDT, the first time
            ("2026-11-01T05:59:00Z", true),  // 01:59 EDT
            ("2026-11-01T06:00:00Z", true),  // 01:00 EST, the second time
            ("2026-11-01T06:59:00Z", true),  // 01:59 EST
            ("2026-11-01T07:00:00Z", false), // 02:00 EST
        ],
    );
}

#[test]
fn berlin_weekdays_start_at_local_midnight_on_both_sides_of_each_change() {
    // 2026-03-29 (CET → CEST) and 2026-10-25 (CEST → CET) are Sundays; the following
    // Monday starts at 22:00Z and 23:00Z respectively.
    let w = window("{timezone: Europe/Berlin, days: [mon, tue, wed, thu, fri]}");
    assert_inside(
        &w,
        &[
            ("2026-03-27T22:59:00Z", true),  // Fri 23:59 CET
            ("2026-03-27T23:00:00Z", false), // Sat 00:00 CET
            ("2026-03-29T21:59:00Z", false), // Sun 23:59 CEST
            ("2026-03-29T22:00:00Z", true),  // Mon 00:00 CEST
            ("2026-10-23T21:59:00Z", true),  // Fri 23:59 CEST
            ("2026-10-23T22:00:00Z", false), // Sat 00:00 CEST
            ("2026-10-25T22:59:00Z", false), // Sun 23:59 CET
            ("2026-10-25T23:00:00Z", true),  // Mon 00:00 CET
        ],
    );
    let office = window("{timezone: Europe/Berlin, hours: '09:00-17:00'}");
    assert_inside(
        &office,
        &[
            ("2026-03-28T07:59:00Z", false), // Sat 08:59 CET
            ("2026-03-28T08:00:00Z", true),  // Sat 09:00 CET
            ("2026-03-29T07:00:00Z", true),  // Sun 09:00 CEST
            ("2026-03-29T15:00:00Z", false), // Sun 17:00 CEST
            ("2026-10-25T07:30:00Z", false), // Sun 08:30 CET
            ("2026-10-25T08:00:00Z", true),  // Sun 09:00 CET
            ("2026-10-25T15:59:00Z", true),  // Sun 16:59 CET
        ],
    );
}

#[test]
fn an_overnight_window_across_the_autumn_change_is_read_within_the_day() {
    // 22:00-06:00 in Berlin on Saturdays only: Saturday's early hours and late evening,
    // never Sunday's early hours, even when Sunday's night is an hour longer.
    let w = window("{timezone: Europe/Berlin, days: [sat], hours: '22:00-06:00'}");
    assert_inside(
        &w,
        &[
            ("2026-10-24T03:00:00Z", true),  // Sat 05:00 CEST
            ("2026-10-24T04:00:00Z", false), // Sat 06:00 CEST
            ("2026-10-24T19:59:00Z", false), // Sat 21:59 CEST
            ("2026-10-24T20:00:00Z", true),  // Sat 22:00 CEST
            ("2026-10-24T21:59:00Z", true),  // Sat 23:59 CEST
            ("2026-10-24T22:00:00Z", false), // Sun 00:00 CEST
            ("2026-10-25T00:30:00Z", false), // Sun 02:30 CEST
            ("2026-10-25T01:30:00Z", false), // Sun 02:30 CET, the repeated hour
        ],
    );
}

/// Found by the `policy_yaml` fuzz target: a syntax error the YAML parser does not
/// advance past (`mapping values are not allowed`, here after a mangled key) came back
/// for every next document, and parsing collected it until memory ran out. Each error
/// is reported once now, and parsing ends there.
#[test]
fn a_syntax_error_the_parser_repeats_is_reported_once() {
    let text = "# What tools agents may call.\n-\u{591}ame: no-shell-for-support\n  type: tool_access\n  targets:\n  # maiSe";
    let e = errors("tools.yaml", text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].to_string().contains("mapping values are not allowed"),
        "{e:?}"
    );
    assert_eq!(e[0].line, Some(3));
}

/// Found by the `policy_yaml` fuzz target: lone carriage returns before an alias made
/// the YAML parser panic ("unexpected end of mapping"). A CR not followed by LF is
/// refused before parsing, located at its line; CRLF files still parse.
#[test]
fn a_lone_carriage_return_is_refused_before_parsing() {
    let text = "ule-s:\n  paths: [rulas:\r\r\r\r\r\r*xes:\n  paths: [\"/";
    let e = errors("cr.yaml", text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].line, Some(2));
    assert!(e[0].to_string().contains("carriage return"), "{e:?}");

    let crlf = "- name: crlf-file\r\n  type: tool_access\r\n  targets: {tools: [shell]}\r\n  rules: {allow: [read_file]}\r\n";
    assert_eq!(
        parse_source("crlf.yaml", crlf).expect("CRLF parses").len(),
        1
    );
}

/// Found by the fuzzer: a document the YAML parser rejects without a syntax error
/// (here a repeated key), followed by more documents. Reading on after such an error
/// made the parser panic ("unexpected end of mapping"); now the first error ends the
/// stream, and the file is refused with it.
#[test]
fn a_document_error_ends_the_stream_instead_of_panicking() {
    let text =
        include_str!("../../../fuzz/corpus/policy_yaml/regression-multi-document-after-error");
    let errors = parse_source("p.yaml", text).expect_err("refused");
    assert!(!errors.is_empty());
}

#[test]
fn content_policies_refuse_unknown_detectors_and_missing_fields() {
    let errors = |rules: &str| {
        let text = format!("name: c\ntype: content\nrules: {rules}\n");
        agentplane_core::policy::PolicySet::parse(&[agentplane_core::policy::PolicySource {
            name: "c.yaml",
            text: &text,
        }])
        .expect_err(rules)
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
    };
    assert!(errors("{detectors: [cards], action: redact}").contains("unknown detector `cards`"));
    assert!(errors("{detectors: [], action: redact}").contains("at least one detector"));
    assert!(errors("{detectors: [card]}").contains("rules.action"));
    assert!(errors("{detectors: [card], action: hide}").contains("action"));
    assert!(
        errors("{detectors: [card], action: flag, surfaces: [everywhere]}").contains("surfaces")
    );
    assert!(
        errors("{detectors: [{name: t, regex: '[0-9]+'}], action: flag}").contains("c.yaml:3"),
        "an unbounded custom pattern is refused at its line"
    );
    assert!(
        errors("{detectors: [card], action: flag, window: 1m}").contains("unknown field `window`")
    );
}

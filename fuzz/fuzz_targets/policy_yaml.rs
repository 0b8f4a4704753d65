//! A policy file (YAML), as the runtime loads it, then as part of a policy set.
#![no_main]

use agentplane_core::policy::{PolicySet, PolicySource, parse_source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_source("fuzz.yaml", text);
    let _ = PolicySet::parse(&[PolicySource {
        name: "fuzz.yaml",
        text,
    }]);
});

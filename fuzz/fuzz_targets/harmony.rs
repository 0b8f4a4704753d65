//! A model's text in the Harmony format (gpt-oss), as the engine reads it.
#![no_main]

use agentplane_engine::harmony;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = harmony::contains_harmony(&text);
    let _ = harmony::parse(&text);
});

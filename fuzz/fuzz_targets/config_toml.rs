//! `agentplane.toml`: the bytes as the config file, loaded as `--config` loads it (no
//! environment).
#![no_main]

use std::sync::OnceLock;

use agentplane_runtime::Config;
use agentplane_runtime::config::ConfigSource;
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temp dir"))
}

fuzz_target!(|data: &[u8]| {
    let root = dir().path();
    let file = root.join("agentplane.toml");
    if std::fs::write(&file, data).is_err() {
        return;
    }
    let env = |_: &str| None;
    let _ = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: root,
        env: &env,
    });
});

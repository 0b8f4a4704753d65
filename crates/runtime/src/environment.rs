//! The process keeps its secrets to itself (issue 17, ADR 0025): credentials read from
//! the environment are taken out of it, and other processes of the same user cannot
//! read this one's memory or `/proc/<pid>/environ`.
//!
//! [`seal`] runs once, first thing in `main`, while the process has one thread: it
//! reads every variable that holds a credential (the fixed `AGENTPLANE_*` ones and
//! each `[secrets.NAME] env = "VAR"` of the configuration), keeps their values here,
//! overwrites them in the environment block the kernel shows as `/proc/<pid>/environ`,
//! and removes them from the environment children inherit. The configuration and
//! secret loaders then read variables through [`var`], which answers from what was
//! kept. [`forbid_dumps`] clears `PR_SET_DUMPABLE`: no core dumps, and `/proc/<pid>/`
//! (`environ`, `mem`, `maps`) and `ptrace` are refused to every process of the same
//! user without `CAP_SYS_PTRACE`.
//!
//! `Config::load` is here too: the configuration read under this process's (sealed)
//! environment, while the loader itself (`config.rs`) only reads what it is handed.
//!
//! What must not live here: which secrets exist (`settings/secrets.rs`), how they are
//! redacted (core's `secret`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use crate::config::{Config, ConfigError, ConfigSource};
use crate::settings::secrets::SecretSource;

/// Variables that hold a credential whatever the configuration says: the auth token,
/// the model API key, and the store and Redis URLs (which may carry a password).
pub const CREDENTIAL_VARIABLES: &[&str] = &[
    "AGENTPLANE_AUTH_TOKEN",
    "AGENTPLANE_LLM_API_KEY",
    "AGENTPLANE_DB",
    "AGENTPLANE_REDIS_URL",
];

/// The values taken out of the environment by [`seal`].
static SEALED: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// An environment variable: what [`seal`] kept, else the process environment.
pub fn var(name: &str) -> Option<String> {
    SEALED
        .get()
        .and_then(|sealed| sealed.get(name).cloned())
        .or_else(|| std::env::var(name).ok())
}

impl Config {
    /// Loads the configuration from this process's environment (what [`seal`] kept
    /// included) and current directory.
    pub fn load(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let cwd = std::env::current_dir()
            .map_err(|e| ConfigError::new("current directory", e.to_string()))?;
        Self::load_from(&ConfigSource {
            explicit,
            cwd: &cwd,
            env: &var,
        })
    }
}

/// Takes every credential variable out of the environment (see the module comment)
/// and returns their names. `config` is the `--config` path; a configuration that
/// does not load seals only [`CREDENTIAL_VARIABLES`] (the command reports the error).
///
/// # Safety
///
/// No other thread may exist while this runs: it changes the process environment,
/// which other threads could be reading (`std::env::remove_var`'s contract). Call it
/// at the top of `main`, before any async runtime or thread is started.
pub unsafe fn seal(config: Option<&Path>) -> Vec<String> {
    let mut names: Vec<String> = CREDENTIAL_VARIABLES
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    let env = |name: &str| std::env::var(name).ok();
    if let Ok(cwd) = std::env::current_dir()
        && let Ok(loaded) = Config::load_from(&ConfigSource {
            explicit: config,
            cwd: &cwd,
            env: &env,
        })
    {
        names.extend(
            loaded
                .secrets
                .sources
                .values()
                .filter_map(|source| match source {
                    SecretSource::Env(name) => Some(name.clone()),
                    SecretSource::File(_) => None,
                }),
        );
    }
    names.sort();
    names.dedup();
    let mut sealed = BTreeMap::new();
    for name in names {
        let Ok(value) = std::env::var(&name) else {
            continue;
        };
        // SAFETY: the caller guarantees a single thread.
        unsafe { scrub(&name) };
        sealed.insert(name, value);
    }
    let removed = sealed.keys().cloned().collect();
    let _ = SEALED.set(sealed);
    removed
}

/// Overwrites `name`'s value where the environment holds it (for variables the
/// process started with, the block `/proc/<pid>/environ` reads), then unsets it.
///
/// # Safety
///
/// Single-threaded only, as [`seal`].
unsafe fn scrub(name: &str) {
    #[cfg(unix)]
    if let Ok(c_name) = std::ffi::CString::new(name) {
        // SAFETY: getenv returns NULL or a pointer to the NUL-terminated value inside
        // the environment, which is writable memory (the initial block on the stack,
        // or a copy setenv made). No other thread reads it (the caller's guarantee),
        // and the entry is unset right after, so nobody reads the zeroed value.
        unsafe {
            let value = libc::getenv(c_name.as_ptr());
            if !value.is_null() {
                let len = libc::strlen(value);
                std::ptr::write_bytes(value, 0, len);
            }
        }
    }
    // SAFETY: single-threaded, as the caller guarantees.
    unsafe { std::env::remove_var(name) };
}

/// Clears `PR_SET_DUMPABLE` (Linux): no core dumps, and other processes of the same
/// user (a tool the server started included) can neither read `/proc/<pid>/environ`,
/// `mem` or `maps` nor `ptrace` it. Returns whether it took effect.
pub fn forbid_dumps() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_DUMPABLE takes one integer argument and touches no memory.
        let result = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if result != 0 {
            tracing::warn!(
                error = %std::io::Error::last_os_error(),
                "could not clear PR_SET_DUMPABLE: other processes of this user may read this one's memory"
            );
            return false;
        }
        true
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Raises the soft limit on open files to the hard one and returns the limit now in
/// force (`None` where unknown): the server sizes its connection cap to fit under it,
/// so a flood of connections meets the cap, never `EMFILE`.
pub fn raise_open_files_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit read or write the one struct passed.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return None;
            }
            if limit.rlim_cur < limit.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: limit.rlim_max,
                    rlim_max: limit.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    limit = raised;
                }
            }
        }
        // `rlim_t` is u64 on Linux but not on every unix.
        #[allow(clippy::unnecessary_cast)]
        Some(limit.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    None
}

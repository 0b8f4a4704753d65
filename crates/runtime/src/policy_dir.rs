//! Reading policy files from their directory, and keeping the active set in step with
//! it while the server runs.
//!
//! [`load_dir`] is the one way a policies directory is read (the server at start and on
//! every change, `agentplane policy check` in CI), so both accept and refuse exactly
//! the same files. [`watch`] loads the directory once (a broken directory stops the
//! server from starting) and then polls it: a valid change replaces the set in
//! [`ActivePolicies`]; a broken one keeps the previous set, records the errors for
//! `GET /v1/policies` and logs them. Parsing and validation are `agentplane_core`'s;
//! nothing here decides what a policy means.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentplane_core::policy::{MAX_SOURCE_BYTES, PolicyError, PolicySet, PolicySource, Timestamp};
use agentplane_engine::governance::ActivePolicies;
use agentplane_engine::ports::AuditStore;
use tokio_util::sync::CancellationToken;

use crate::settings::policies::PoliciesConfig;

/// Reads and validates every `*.yaml` / `*.yml` file directly in `dir` but the tests
/// (`*.test.yaml`, [`is_test_file`]) (not recursive,
/// sorted by name, so set order is stable). Each policy's source is its file name
/// (`email.yaml`). Returns every error of every file: a file larger than
/// [`MAX_SOURCE_BYTES`], unreadable or not UTF-8 is an error naming it, and a missing or
/// unreadable directory is one error naming the directory.
pub fn load_dir(dir: &Path) -> Result<PolicySet, Vec<PolicyError>> {
    parse(&read_dir(dir)?)
}

/// One file of the directory as read: its name and its text, or why it could not be
/// read.
struct SourceFile {
    name: String,
    modified: Option<SystemTime>,
    text: Result<String, String>,
    /// How many bytes were read (at most `MAX_SOURCE_BYTES + 1`) and their hash, for
    /// the fingerprint.
    size: usize,
    content_hash: u64,
}

/// Reads the policy files of `dir`, or says why the directory cannot be read.
fn read_dir(dir: &Path) -> Result<Vec<SourceFile>, Vec<PolicyError>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        vec![PolicyError {
            source: dir.display().to_string(),
            line: None,
            field: None,
            message: format!("cannot read policies directory: {e}"),
        }]
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .filter(|p| !is_test_file(p))
        .collect();
    paths.sort();
    Ok(paths.iter().map(|path| read_file(path)).collect())
}

/// Whether a file holds policy tests (`*.test.yaml`, `*.test.yml`): read by `policy
/// test`, never loaded as policies.
pub fn is_test_file(path: &Path) -> bool {
    path.file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|stem| stem.ends_with(".test"))
}

fn read_file(path: &Path) -> SourceFile {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|file| {
        file.take(MAX_SOURCE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
    });
    let size = bytes.len();
    let content_hash = {
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        hasher.finish()
    };
    let text = match read {
        Err(e) => Err(format!("cannot read: {e}")),
        Ok(_) if bytes.len() > MAX_SOURCE_BYTES => {
            Err(format!("file is larger than {MAX_SOURCE_BYTES} bytes"))
        }
        Ok(_) => String::from_utf8(bytes).map_err(|e| {
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            )
        }),
    };
    SourceFile {
        name,
        modified,
        text,
        size,
        content_hash,
    }
}

/// Validates what was read: errors of unreadable files first, then those of parsing.
fn parse(files: &[SourceFile]) -> Result<PolicySet, Vec<PolicyError>> {
    let mut errors: Vec<PolicyError> = files
        .iter()
        .filter_map(|f| {
            let message = f.text.as_ref().err()?;
            Some(PolicyError {
                source: f.name.clone(),
                line: None,
                field: None,
                message: message.clone(),
            })
        })
        .collect();
    let sources: Vec<PolicySource<'_>> = files
        .iter()
        .filter_map(|f| {
            Some(PolicySource {
                name: &f.name,
                text: f.text.as_deref().ok()?,
            })
        })
        .collect();
    match PolicySet::parse(&sources) {
        Ok(set) if errors.is_empty() => Ok(set),
        Ok(_) => Err(errors),
        Err(mut parse_errors) => {
            errors.append(&mut parse_errors);
            Err(errors)
        }
    }
}

/// What the directory looked like at one poll: names, sizes, modification times and a
/// hash of the contents (or of the reason the directory could not be read). Equal
/// fingerprints mean nothing to reload; the content hash catches an edit that keeps
/// size and modification time (coarse file system clocks).
fn fingerprint(read: &Result<Vec<SourceFile>, Vec<PolicyError>>) -> u64 {
    let mut hasher = DefaultHasher::new();
    match read {
        Ok(files) => {
            for f in files {
                f.name.hash(&mut hasher);
                f.size.hash(&mut hasher);
                f.modified.hash(&mut hasher);
                f.content_hash.hash(&mut hasher);
                f.text.as_ref().err().hash(&mut hasher);
            }
        }
        Err(errors) => {
            for e in errors {
                e.to_string().hash(&mut hasher);
            }
        }
    }
    hasher.finish()
}

/// Now, as RFC 3339 UTC with milliseconds, like the store's timestamps.
fn now() -> String {
    format!("{:.3}", Timestamp::now())
}

/// The errors as `file:line: field: message`, one per line.
/// The errors as `policy check` prints them and `serve` reports them, one line each:
/// `DIR/FILE:LINE: FIELD: MESSAGE`, the file named by its path under `dir` as `dir` is
/// written; an error about the directory itself is `error: …`.
pub fn error_lines(dir: &Path, errors: &[PolicyError]) -> Vec<String> {
    let shown = dir.display().to_string();
    errors
        .iter()
        .map(|error| {
            if error.source == shown {
                return format!("error: {error}");
            }
            PolicyError {
                source: dir.join(&error.source).display().to_string(),
                ..error.clone()
            }
            .to_string()
        })
        .collect()
}

fn lines(dir: &Path, errors: &[PolicyError]) -> String {
    error_lines(dir, errors).join("\n")
}

/// The task that keeps [`ActivePolicies`] in step with the policies directory. It
/// ends when this is stopped or dropped, so the watcher lives exactly as long as its
/// owner (the runtime) holds it.
pub struct PolicyWatcher {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl PolicyWatcher {
    /// Ends the polling task and waits for it, so no reload happens after this returns.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for PolicyWatcher {
    fn drop(&mut self) {
        // The task sees the cancellation at its next await point; a reload in flight
        // finishes, none starts.
        self.stop.cancel();
    }
}

/// Loads the configured policies and starts watching them. With no directory
/// configured the set is empty and nothing is watched. Otherwise the first load must
/// succeed: the `Err` lists every `file:line: field: message`, and a missing
/// directory is an error too, so a server never starts on policies it cannot read.
/// Must be called within a tokio runtime (the watcher is a task on it).
pub fn watch(
    config: &PoliciesConfig,
) -> Result<(Arc<ActivePolicies>, Option<PolicyWatcher>), String> {
    watch_recorded(config, None)
}

/// [`watch`], recording each set that takes effect on a reload in the audit ledger
/// (`ledger`: the store; the set in force at startup is the caller's to record).
pub fn watch_recorded(
    config: &PoliciesConfig,
    ledger: Option<Arc<dyn AuditStore>>,
) -> Result<(Arc<ActivePolicies>, Option<PolicyWatcher>), String> {
    let Some(dir) = &config.dir else {
        return Ok((
            Arc::new(ActivePolicies::new(PolicySet::default(), None, now())),
            None,
        ));
    };
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| "the policy watcher needs a tokio runtime".to_owned())?;
    let read = read_dir(dir);
    let seen = fingerprint(&read);
    let set = read.and_then(|files| parse(&files)).map_err(|errors| {
        format!(
            "invalid policies in {}:\n{}",
            dir.display(),
            lines(dir, &errors)
        )
    })?;
    tracing::info!(
        dir = %dir.display(),
        policies = set.len(),
        "policies loaded"
    );
    let active = Arc::new(ActivePolicies::new(
        set,
        Some(dir.display().to_string()),
        now(),
    ));
    let stop = CancellationToken::new();
    let task = runtime.spawn(poll(
        dir.clone(),
        config.reload_interval,
        seen,
        (active.clone(), ledger),
        stop.clone(),
    ));
    Ok((
        active,
        Some(PolicyWatcher {
            stop,
            task: Some(task),
        }),
    ))
}

/// Polls `dir` every `interval` until stopped, reloading on every change.
async fn poll(
    dir: PathBuf,
    interval: Duration,
    mut seen: u64,
    (active, ledger): (Arc<ActivePolicies>, Option<Arc<dyn AuditStore>>),
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // The first tick is immediate; the directory was just read.
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        // File reads block; keep them off the runtime's workers.
        let reading = dir.clone();
        let read = match tokio::task::spawn_blocking(move || read_dir(&reading)).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "reading policies failed");
                continue;
            }
        };
        let now_seen = fingerprint(&read);
        if now_seen == seen {
            continue;
        }
        seen = now_seen;
        if stop.is_cancelled() {
            return;
        }
        match read.and_then(|files| parse(&files)) {
            Ok(set) => {
                tracing::info!(
                    dir = %dir.display(),
                    policies = set.len(),
                    "policies reloaded"
                );
                let (hash, count) = (set.hash().to_owned(), set.len() as u64);
                active.replace(set, now());
                if let Some(ledger) = &ledger
                    && let Err(error) = ledger.record_policy_set(&hash, "reload", count).await
                {
                    tracing::error!(%error, %hash, "the reloaded policy set is not in the audit ledger");
                }
            }
            Err(errors) => {
                tracing::warn!(
                    dir = %dir.display(),
                    errors = %lines(&dir, &errors),
                    "policies not reloaded: the previous set stays in force"
                );
                active.reject(errors, now());
            }
        }
    }
}

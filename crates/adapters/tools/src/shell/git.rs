//! git, hardened: which subcommands and options the `shell` ensemble lets through, and
//! the configuration every git run gets from the environment.
//!
//! git runs programs named in its configuration (aliases with `!`, `core.fsmonitor`,
//! hooks, pagers, editors, filters, credential helpers) and in a few options
//! (`--upload-pack`, `--exec`, `rebase -x`, `bisect run`, `grep -O`). The model cannot
//! write configuration: `write_file` refuses `.git/`, and here `-c`, `--config-env`,
//! `git config` writes, `--template`, `clone -c` and `--git-dir` are refused. What is
//! left configurable is pinned from the environment, which beats every config file:
//! no system or global file, no hooks, no fsmonitor, no pager or editor, no `ext::`
//! transport, no implicit bare repositories, and network transports only when the agent
//! has network.
//!
//! What must not live here: paths (the argument screen in `paths.rs` checks them for
//! every program) and spawning.

/// Subcommands the agent may run; everything else (`submodule`, `filter-branch`,
/// `difftool`, `daemon`, `instaweb`, `send-email`, `help -w`…) runs other programs or
/// serves the repository, and is refused.
const SUBCOMMANDS: &[&str] = &[
    "add",
    "am",
    "apply",
    "bisect",
    "blame",
    "branch",
    "cat-file",
    "checkout",
    "cherry-pick",
    "clean",
    "clone",
    "commit",
    "config",
    "describe",
    "diff",
    "fetch",
    "format-patch",
    "grep",
    "init",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "merge",
    "mv",
    "pull",
    "push",
    "rebase",
    "reflog",
    "remote",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "stash",
    "status",
    "switch",
    "tag",
    "version",
    "worktree",
];

/// Subcommands that reach other repositories over a transport.
const REMOTE_SUBCOMMANDS: &[&str] = &["clone", "fetch", "pull", "push", "ls-remote", "remote"];

/// `git config` forms that only read.
const CONFIG_READS: &[&str] = &[
    "--get",
    "--get-all",
    "--get-regexp",
    "--get-urlmatch",
    "--list",
    "-l",
];

/// Why git arguments were refused: the message, and whether it is about network.
pub(super) struct Refusal {
    pub message: String,
    pub network: bool,
}

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal {
        message: message.into(),
        network: false,
    }
}

/// Checks git's arguments. `network` is the agent's `network.allowed`.
pub(super) fn screen(args: &[String], network: bool) -> Result<(), Refusal> {
    let mut rest = args.iter().map(String::as_str);
    // Global options, up to the subcommand.
    let subcommand = loop {
        let Some(arg) = rest.next() else {
            return Ok(()); // `git` alone, or only `--version`-like options: usage text.
        };
        match arg {
            "-C" | "--namespace" | "--work-tree" => {
                rest.next();
            }
            "-c" | "--config-env" => {
                return Err(refuse(
                    "git -c / --config-env refused: configuration cannot be set from \
                     the command line (aliases and hooks run programs)",
                ));
            }
            _ if arg.starts_with("--config-env")
                || arg.starts_with("--git-dir")
                || arg.starts_with("--exec-path")
                || (arg.starts_with("-c") && arg.len() > 2) =>
            {
                return Err(refuse(format!("git option {arg:?} refused")));
            }
            "--version" | "--help" => return Ok(()),
            _ if arg.starts_with("--work-tree=") || arg.starts_with("--namespace=") => {}
            _ if arg.starts_with('-') => {}
            _ => break arg,
        }
    };
    if !SUBCOMMANDS.contains(&subcommand) {
        return Err(refuse(format!(
            "git {subcommand} is not allowed; allowed: {}",
            SUBCOMMANDS.join(", ")
        )));
    }
    let args: Vec<&str> = rest.collect();
    if subcommand == "config" && !args.first().is_some_and(|a| CONFIG_READS.contains(a)) {
        return Err(refuse(format!(
            "git config may only read ({}); configuration is not writable",
            CONFIG_READS.join(", ")
        )));
    }
    if subcommand == "bisect" && args.first() == Some(&"run") {
        return Err(refuse("git bisect run refused: it runs a program"));
    }
    for arg in &args {
        let refused = arg.starts_with("--upload-pack")
            || arg.starts_with("--receive-pack")
            || arg.starts_with("--exec")
            || arg.starts_with("--extcmd")
            || arg.starts_with("--template")
            || arg.starts_with("--separate-git-dir")
            || arg.starts_with("--config")
            || arg.starts_with("--open-files-in-pager")
            || (subcommand == "grep" && arg.starts_with("-O"))
            || (subcommand == "rebase" && (*arg == "-x" || arg.starts_with("-x")))
            || (subcommand == "clone" && arg.starts_with("-c"))
            || (["clone", "fetch", "pull", "ls-remote", "archive"].contains(&subcommand)
                && arg.starts_with("-u"));
        if refused {
            return Err(refuse(format!(
                "git {subcommand} option {arg:?} refused: it runs a program or sets \
                 configuration"
            )));
        }
        if !network && REMOTE_SUBCOMMANDS.contains(&subcommand) && is_network_url(arg) {
            return Err(Refusal {
                message: format!(
                    "git {subcommand} {arg:?} refused: this agent has no network access"
                ),
                network: true,
            });
        }
    }
    Ok(())
}

/// `scheme://…` other than `file://`, or scp-like `host:path`.
fn is_network_url(arg: &str) -> bool {
    if arg.starts_with('-') {
        return false;
    }
    if let Some((scheme, _)) = arg.split_once("://") {
        return scheme != "file";
    }
    arg.split_once(':')
        .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'))
}

/// The environment every git run gets. Configuration from the environment overrides
/// the repository's own files.
pub(super) fn environment(network: bool) -> Vec<(String, String)> {
    let config: &[(&str, &str)] = &[
        ("core.fsmonitor", "false"),
        ("core.hooksPath", "/dev/null"),
        ("core.pager", "cat"),
        ("core.editor", "true"),
        ("core.sshCommand", "ssh"),
        ("sequence.editor", "true"),
        ("credential.helper", ""),
        ("protocol.ext.allow", "never"),
        ("safe.bareRepository", "explicit"),
    ];
    let mut env: Vec<(String, String)> = [
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_ASKPASS", ""),
        ("GIT_PAGER", "cat"),
        ("GIT_EDITOR", "true"),
        ("GIT_SEQUENCE_EDITOR", "true"),
        ("GIT_PROTOCOL_FROM_USER", "0"),
        (
            "GIT_ALLOW_PROTOCOL",
            if network {
                "file:git:http:https:ssh"
            } else {
                "file"
            },
        ),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    env.push(("GIT_CONFIG_COUNT".into(), config.len().to_string()));
    for (i, (key, value)) in config.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), (*key).to_owned()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), (*value).to_owned()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(args: &[&str]) -> Result<(), String> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        screen(&args, false).map_err(|r| r.message)
    }

    #[test]
    fn code_running_forms_are_refused_and_everyday_ones_pass() {
        for ok in [
            &["status", "--short"][..],
            &["-C", "sub", "log", "--oneline"],
            &["diff", "HEAD~1"],
            &["commit", "-m", "x"],
            &["config", "--get", "user.name"],
            &["clone", "../other"],
            &["add", "-u"],
        ] {
            assert!(check(ok).is_ok(), "{ok:?}");
        }
        for refused in [
            &["-c", "alias.x=!touch /tmp/x", "x"][..],
            &["-calias.x=!id", "x"],
            &["--config-env=core.pager=X", "log"],
            &["--git-dir=evil", "status"],
            &["--exec-path=.", "x"],
            &["ls-remote", "--upload-pack=touch /tmp/x; false", "."],
            &["ls-remote", "-u", "sh", "."],
            &["fetch", "--upload-pack", "sh", "."],
            &["push", "--receive-pack=x", "."],
            &["archive", "--exec=x", "--remote=."],
            &["rebase", "-x", "id"],
            &["rebase", "--exec", "id"],
            &["bisect", "run", "id"],
            &["grep", "-Oid", "x"],
            &["config", "alias.x", "!id"],
            &["config", "core.fsmonitor", "x"],
            &["init", "--template=tpl"],
            &["clone", "-c", "core.fsmonitor=x", "a", "b"],
            &["submodule", "foreach", "id"],
            &["filter-branch", "--tree-filter", "id"],
            &["difftool", "-x", "id"],
            &["ls-remote", "http://127.0.0.1:1/x"],
            &["clone", "git@example.com:x/y"],
        ] {
            assert!(check(refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn the_environment_pins_every_program_running_key() {
        let env = environment(false);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("GIT_CONFIG_NOSYSTEM"), Some("1"));
        assert_eq!(get("GIT_ALLOW_PROTOCOL"), Some("file"));
        let count: usize = get("GIT_CONFIG_COUNT")
            .and_then(|c| c.parse().ok())
            .unwrap();
        let keys: Vec<&str> = (0..count)
            .filter_map(|i| get(&format!("GIT_CONFIG_KEY_{i}")))
            .collect();
        for key in ["core.fsmonitor", "core.hooksPath", "protocol.ext.allow"] {
            assert!(keys.contains(&key), "{key}");
        }
    }
}

//! Built-in profiles: what differs between the ACP agents we know (the program, its
//! arguments, the keys it needs, its `authenticate` method). The protocol is the same
//! for all of them; a configured `[agents.x]` may override any field.

/// An agent's profile before secrets are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcpProfile {
    pub name: &'static str,
    pub command: &'static str,
    pub args: &'static [&'static str],
    /// Environment variables the agent needs, each filled from the secret of the same
    /// name (`[secrets]`), e.g. `GEMINI_API_KEY`.
    pub required_env: &'static [&'static str],
    /// The `authenticate` method to call, if the agent needs one.
    pub auth_method: Option<&'static str>,
    /// Arguments for installed versions that predate `args`: used when the program's
    /// `--help` does not mention the first of `args` (gemini before `--acp`).
    pub legacy_args: Option<&'static [&'static str]>,
    /// Where the agent keeps its state, sessions and caches, relative to `$HOME`:
    /// writable in its kernel sandbox (nothing else of `$HOME` is).
    pub state_dirs: &'static [&'static str],
}

const PROFILES: [AcpProfile; 4] = [
    AcpProfile {
        name: "codex",
        command: "codex-acp",
        args: &[],
        required_env: &["OPENAI_API_KEY"],
        auth_method: Some("openai-api-key"),
        legacy_args: None,
        // CODEX_HOME: config, sessions, logs.
        state_dirs: &[".codex"],
    },
    AcpProfile {
        name: "gemini",
        command: "gemini",
        // `--acp` since gemini-cli replaced `--experimental-acp` (0.61.0 has both).
        args: &["--acp"],
        required_env: &["GEMINI_API_KEY"],
        auth_method: Some("gemini-api-key"),
        legacy_args: Some(&["--experimental-acp"]),
        // Settings, chats (`.gemini/tmp`), and the npm cache of its extensions.
        state_dirs: &[".gemini", ".cache/gemini-cli"],
    },
    AcpProfile {
        name: "opencode",
        command: "opencode",
        args: &["acp"],
        required_env: &[],
        auth_method: None,
        legacy_args: None,
        // XDG data (sessions, its database), state, cache (models.dev, plugins), config.
        state_dirs: &[
            ".local/share/opencode",
            ".local/state/opencode",
            ".cache/opencode",
            ".config/opencode",
        ],
    },
    AcpProfile {
        // npm: @zed-industries/claude-agent-acp (formerly claude-code-acp).
        name: "claude",
        command: "claude-agent-acp",
        args: &[],
        required_env: &["ANTHROPIC_API_KEY"],
        auth_method: None,
        legacy_args: None,
        // Settings, sessions and todos (`~/.claude.json` is not reachable: set
        // CLAUDE_CONFIG_DIR under `[agents.NAME.acp.env]` to keep it in `.claude`).
        state_dirs: &[".claude"],
    },
];

/// Every built-in profile.
pub fn builtin_profiles() -> &'static [AcpProfile] {
    &PROFILES
}

/// The built-in profile of that name.
pub fn builtin_profile(name: &str) -> Option<&'static AcpProfile> {
    PROFILES.iter().find(|p| p.name == name)
}

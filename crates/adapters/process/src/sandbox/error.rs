//! Why a confinement could not be prepared, and so why no process was started.

/// Why a process was not started.
#[derive(Debug)]
pub enum SandboxError {
    /// The sandbox is required and the kernel cannot enforce it.
    Unsupported(String),
    /// Building the confinement failed (a ruleset, a filter).
    Setup(String),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsupported(missing) => write!(
                f,
                "the sandbox is required but the kernel lacks {missing}; no process is \
                 started (an operator may opt out with sandbox.required = false)"
            ),
            Self::Setup(e) => write!(f, "the sandbox could not be set up: {e}"),
        }
    }
}

impl std::error::Error for SandboxError {}

impl From<SandboxError> for std::io::Error {
    fn from(e: SandboxError) -> Self {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string())
    }
}

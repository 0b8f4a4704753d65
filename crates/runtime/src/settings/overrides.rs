//! The environment variables that override `agentplane.toml`, read in one step
//! ([`Overrides::read`]) so every section's check stays a pure function of the file's
//! text and this value. A variable set to the empty string counts as unset.
//!
//! | Variable | Overrides |
//! | --- | --- |
//! | `AGENTPLANE_CONFIG` | which file is read (the loader's, not a section's) |
//! | `AGENTPLANE_LLM_BASE_URL`, `AGENTPLANE_LLM_MODEL`, `AGENTPLANE_LLM_API_KEY` | `[llm]` |
//! | `AGENTPLANE_DB` | `[store]` (a path, `sqlite:PATH` or `postgres://…`) |
//! | `AGENTPLANE_LISTEN`, `AGENTPLANE_AUTH_TOKEN` | `[server]` |
//! | `AGENTPLANE_REDIS_URL` | `[rate_limits] redis` |
//! | `XDG_DATA_HOME`, `HOME` | where the default store file goes |

use std::path::PathBuf;

/// The overriding variables' values; `None` where unset or empty.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `AGENTPLANE_CONFIG`.
    pub config: Option<PathBuf>,
    /// `AGENTPLANE_LLM_BASE_URL`.
    pub llm_base_url: Option<String>,
    /// `AGENTPLANE_LLM_MODEL`.
    pub llm_model: Option<String>,
    /// `AGENTPLANE_LLM_API_KEY`.
    pub llm_api_key: Option<String>,
    /// `AGENTPLANE_DB`.
    pub db: Option<String>,
    /// `AGENTPLANE_LISTEN`.
    pub listen: Option<String>,
    /// `AGENTPLANE_AUTH_TOKEN`.
    pub auth_token: Option<String>,
    /// `AGENTPLANE_REDIS_URL`.
    pub redis_url: Option<String>,
    /// `XDG_DATA_HOME`.
    pub data_home: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
}

impl Overrides {
    /// Reads every overriding variable through `env` (the process's, or a test's).
    pub fn read(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| env(name).filter(|v| !v.is_empty());
        Self {
            config: var("AGENTPLANE_CONFIG").map(PathBuf::from),
            llm_base_url: var("AGENTPLANE_LLM_BASE_URL"),
            llm_model: var("AGENTPLANE_LLM_MODEL"),
            llm_api_key: var("AGENTPLANE_LLM_API_KEY"),
            db: var("AGENTPLANE_DB"),
            listen: var("AGENTPLANE_LISTEN"),
            auth_token: var("AGENTPLANE_AUTH_TOKEN"),
            redis_url: var("AGENTPLANE_REDIS_URL"),
            data_home: var("XDG_DATA_HOME").map(PathBuf::from),
            home: var("HOME").map(PathBuf::from),
        }
    }
}

/// Values may be credentials (the API key, the token, URLs with passwords): only which
/// variables are set is shown.
impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |value: &Option<String>| value.as_ref().map(|_| "<set>");
        f.debug_struct("Overrides")
            .field("config", &self.config)
            .field("llm_base_url", &set(&self.llm_base_url))
            .field("llm_model", &self.llm_model)
            .field("llm_api_key", &set(&self.llm_api_key))
            .field("db", &set(&self.db))
            .field("listen", &self.listen)
            .field("auth_token", &set(&self.auth_token))
            .field("redis_url", &set(&self.redis_url))
            .field("data_home", &self.data_home)
            .field("home", &self.home)
            .finish()
    }
}

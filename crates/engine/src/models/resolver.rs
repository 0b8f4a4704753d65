//! Which model an agent's turns use: the configured one if the server has it, else the
//! best available chat model. Resolutions are reused for a minute, so turns do not
//! list the server's models every time, yet a newly pulled model is noticed.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::choice as model_choice;
use crate::ports::{Capabilities, ChatModel, ModelError};

/// How long a resolution is reused.
const TTL: Duration = Duration::from_secs(60);

/// What an agent's model looks like on the server right now.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelStatus {
    /// The configured model is there.
    Ready { model: String },
    /// The configured model is missing; another one will be used.
    Substitute { wanted: String, model: String },
    /// No usable model; the error says why and what to do.
    Unavailable { wanted: String, error: String },
}

/// Resolves wanted model names against the server, with a short cache.
#[derive(Default)]
pub struct ModelResolver {
    cache: Mutex<HashMap<String, (String, Instant)>>,
    /// What the server said each resolved model can do (ADR 0032), reused like names.
    capabilities: Mutex<HashMap<String, (Capabilities, Instant)>>,
}

impl ModelResolver {
    /// The model to call for `wanted`. A server that cannot list its models gets the
    /// wanted name as it is.
    pub async fn resolve(&self, model: &dyn ChatModel, wanted: &str) -> Result<String, ModelError> {
        if let Some(hit) = self.cached(wanted) {
            return Ok(hit);
        }
        let resolved = match model.list_models().await {
            Ok(offered) => model_choice::choose_model(wanted, &offered)?,
            Err(ModelError::Upstream {
                status: 404 | 405 | 501,
                ..
            }) => wanted.to_owned(),
            Err(e) => return Err(e),
        };
        if let Ok(mut cache) = self.cache.lock() {
            let now = Instant::now();
            cache.insert(wanted.to_owned(), (resolved.clone(), now));
            // What the server offers resolves to itself: a call with the resolved name
            // (the turn loop's, after the hub resolved it) lists nothing again.
            cache.insert(resolved.clone(), (resolved.clone(), now));
        }
        Ok(resolved)
    }

    /// The status of `wanted` on the server.
    pub async fn status(&self, model: &dyn ChatModel, wanted: &str) -> ModelStatus {
        match self.resolve(model, wanted).await {
            Ok(model) if model == wanted => ModelStatus::Ready { model },
            Ok(model) => ModelStatus::Substitute {
                wanted: wanted.to_owned(),
                model,
            },
            Err(e) => ModelStatus::Unavailable {
                wanted: wanted.to_owned(),
                error: super::health::said(&e),
            },
        }
    }

    /// What the server says `resolved` (a name it offers) can do.
    pub async fn capabilities(&self, model: &dyn ChatModel, resolved: &str) -> Capabilities {
        if let Ok(cache) = self.capabilities.lock()
            && let Some((capabilities, at)) = cache.get(resolved)
            && at.elapsed() < TTL
        {
            return capabilities.clone();
        }
        let capabilities = model.capabilities(resolved).await;
        if let Ok(mut cache) = self.capabilities.lock() {
            cache.insert(resolved.to_owned(), (capabilities.clone(), Instant::now()));
        }
        capabilities
    }

    fn cached(&self, wanted: &str) -> Option<String> {
        let cache = self.cache.lock().ok()?;
        let (model, at) = cache.get(wanted)?;
        (at.elapsed() < TTL).then(|| model.clone())
    }
}

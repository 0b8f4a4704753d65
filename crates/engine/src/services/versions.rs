//! The versions service (ADR 0016): the catalogue of an agent's versions (its
//! configured baseline plus stored ones), promotion, traffic splits and their rollback,
//! the shadow version and the version a thread runs. Its port is `VersionStore`; the
//! hub asks it where a thread's turn routes. Shadow runs are the hub's (`shadows.rs`).
//!
//! What lives here: the rules (semver must increase, drafts are the only editable
//! versions, traffic goes to production versions only, who may change versions) and
//! the routing of a thread to its version. What must not: SQL (the `VersionStore` port
//! holds it) or the turn loop (shadow runs use `run_turn` with `shadow_of` set).

use crate::identity::{Access, AsCaller};
use std::collections::BTreeMap;
use std::sync::Arc;

use agentplane_core::version::{
    DEFAULT_VERSION, TrafficAction, draw_of, parse_version, traffic_stack,
};
use agentplane_core::{AgentSpec, SpecPatch, Stage, ThreadId, TrafficSplit, VersionSpec};

use super::identity::Identity;
use super::version_settings::VersionSettings;
use crate::error::HubError;
use crate::ports::{
    NewTraffic, NewVersion, ThreadRecord, TrafficRecord, VersionRecord, VersionStore,
};
use crate::schema::Schema;

/// Longest system prompt a version may have, in characters.
const MAX_PROMPT_CHARS: usize = 65_536;
/// Longest description, in characters.
const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// Longest model id, in characters.
const MAX_MODEL_CHARS: usize = 200;
/// Largest output schema, as JSON bytes.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most versions one traffic split may name.
const MAX_SPLIT_VERSIONS: usize = 16;

/// One version of an agent, as shown to clients.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentVersion {
    pub version: String,
    pub stage: Stage,
    pub spec: VersionSpec,
    /// The configured definition, not a stored version.
    pub baseline: bool,
    pub shadow: bool,
    /// Percent of new threads it gets now.
    pub weight: u32,
    pub created_by: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

/// An agent's versions and traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentVersions {
    pub agent: String,
    /// By semver, lowest first.
    pub versions: Vec<AgentVersion>,
    /// The split in force.
    pub traffic: TrafficSplit,
    /// The number of traffic changes so far.
    pub traffic_changes: u64,
    /// What a rollback would restore, if anything.
    pub rollback_to: Option<TrafficSplit>,
    pub shadow: Option<String>,
}

/// A version to create.
#[derive(Debug, Clone, Default)]
pub struct CreateVersion {
    pub version: String,
    /// The version whose spec the new one starts from; default the highest one.
    pub from: Option<String>,
    pub spec: SpecPatch,
}

/// Everything known about one agent's versions at one moment.
pub(crate) struct Catalog {
    agent: String,
    pub(crate) baseline: AgentSpec,
    baseline_version: String,
    stored: Vec<VersionRecord>,
    history: Vec<TrafficRecord>,
    stack: Vec<TrafficSplit>,
}

impl Catalog {
    /// A version's stage and spec; a stored version shadows a baseline of the same number.
    pub(crate) fn find(&self, version: &str) -> Option<(Stage, VersionSpec)> {
        if let Some(record) = self.stored.iter().find(|v| v.version == version) {
            return Some((record.stage, record.spec.clone()));
        }
        (version == self.baseline_version)
            .then(|| (Stage::Production, VersionSpec::of(&self.baseline)))
    }

    fn current(&self) -> &TrafficSplit {
        // The stack always holds the baseline split at the bottom.
        self.stack.last().unwrap_or(&self.stack[0])
    }

    pub(crate) fn shadow(&self) -> Option<&VersionRecord> {
        self.stored.iter().find(|v| v.shadow)
    }

    /// The highest version number of the agent, baseline included.
    fn highest(&self) -> Option<(semver::Version, String)> {
        std::iter::once(self.baseline_version.as_str())
            .chain(self.stored.iter().map(|v| v.version.as_str()))
            .filter_map(|v| parse_version(v).ok().map(|p| (p, v.to_owned())))
            .max_by(|a, b| a.0.cmp(&b.0))
    }

    fn view(&self) -> AgentVersions {
        let traffic = self.current().clone();
        let mut versions: Vec<AgentVersion> = self
            .stored
            .iter()
            .map(|v| AgentVersion {
                version: v.version.clone(),
                stage: v.stage,
                spec: v.spec.clone(),
                baseline: false,
                shadow: v.shadow,
                weight: traffic.weight(&v.version),
                created_by: Some(v.created_by.clone()),
                created_at: Some(v.created_at.clone()),
                updated_at: Some(v.updated_at.clone()),
            })
            .collect();
        if !self
            .stored
            .iter()
            .any(|v| v.version == self.baseline_version)
        {
            versions.push(AgentVersion {
                version: self.baseline_version.clone(),
                stage: Stage::Production,
                spec: VersionSpec::of(&self.baseline),
                baseline: true,
                shadow: false,
                weight: traffic.weight(&self.baseline_version),
                created_by: None,
                created_at: None,
                updated_at: None,
            });
        }
        versions.sort_by(|a, b| {
            let key = |v: &AgentVersion| parse_version(&v.version).ok();
            key(a).cmp(&key(b)).then_with(|| a.version.cmp(&b.version))
        });
        AgentVersions {
            agent: self.agent.clone(),
            versions,
            traffic,
            traffic_changes: self.history.len() as u64,
            rollback_to: (self.stack.len() > 1).then(|| self.stack[self.stack.len() - 2].clone()),
            shadow: self.shadow().map(|v| v.version.clone()),
        }
    }
}

/// Agent versions: their catalogue, changes and routing.
pub struct Versions {
    identity: Arc<Identity>,
    /// The configured agents: each one's baseline version.
    agents: Arc<BTreeMap<String, AgentSpec>>,
    versions: VersionSettings,
}

impl Versions {
    pub fn new(
        identity: Arc<Identity>,
        agents: Arc<BTreeMap<String, AgentSpec>>,
        versions: VersionSettings,
    ) -> Self {
        Self {
            identity,
            agents,
            versions,
        }
    }

    /// Whether versions are stored (else only the baselines exist).
    pub(crate) fn stored(&self) -> bool {
        self.versions.store.is_some()
    }

    /// The version number of an agent's configured definition.
    fn baseline_version(&self, agent: &str) -> String {
        self.versions
            .baselines
            .get(agent)
            .cloned()
            .unwrap_or_else(|| DEFAULT_VERSION.to_owned())
    }

    pub(crate) fn version_store(&self) -> Result<&Arc<dyn VersionStore>, HubError> {
        self.versions.store.as_ref().ok_or_else(|| {
            HubError::Conflict("agent versions need a store; this server has none".to_owned())
        })
    }

    /// `Forbidden` unless `client` may change versions (`[versions] admins`).
    fn may_change_versions(&self, client: &str) -> Result<(), HubError> {
        match &self.versions.admins {
            Some(admins) if !admins.iter().any(|a| a == client) => Err(HubError::Forbidden(
                format!("client `{client}` may not change agent versions (`[versions] admins`)"),
            )),
            _ => Ok(()),
        }
    }

    pub(crate) async fn catalog(&self, agent: &str) -> Result<Catalog, HubError> {
        let baseline = self
            .agents
            .get(agent)
            .cloned()
            .ok_or_else(|| HubError::NotFound(format!("agent `{agent}`")))?;
        let (stored, history) = match &self.versions.store {
            Some(store) => (store.versions_of(agent).await?, store.traffic(agent).await?),
            None => (Vec::new(), Vec::new()),
        };
        Ok(self.catalog_of(baseline, stored, history))
    }

    fn catalog_of(
        &self,
        baseline: AgentSpec,
        stored: Vec<VersionRecord>,
        history: Vec<TrafficRecord>,
    ) -> Catalog {
        let baseline_version = self.baseline_version(&baseline.name);
        let stack = traffic_stack(
            TrafficSplit::all_on(&baseline_version),
            history.iter().map(|h| (h.action, &h.split)),
        );
        Catalog {
            agent: baseline.name.clone(),
            baseline,
            baseline_version,
            stored,
            history,
            stack,
        }
    }

    /// Every agent's versions and traffic, by agent name, for `caller`.
    pub async fn all_agent_versions(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<BTreeMap<String, AgentVersions>, HubError> {
        self.identity
            .require(caller, Access::List, "listing agent versions")?;
        let mut all = match &self.versions.store {
            Some(store) => store.all_versions().await?,
            None => BTreeMap::new(),
        };
        let mut out = BTreeMap::new();
        for (name, baseline) in self.agents.iter() {
            let history = match &self.versions.store {
                Some(store) => store.traffic(name).await?,
                None => Vec::new(),
            };
            let catalog = self.catalog_of(
                baseline.clone(),
                all.remove(name).unwrap_or_default(),
                history,
            );
            out.insert(name.clone(), catalog.view());
        }
        Ok(out)
    }

    /// One agent's versions and traffic, for `caller`.
    pub async fn agent_versions(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
    ) -> Result<AgentVersions, HubError> {
        self.identity
            .require(caller, Access::List, "listing agent versions")?;
        self.versions_of(agent).await
    }

    /// One version of an agent, for `caller`.
    pub async fn agent_version(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
        version: &str,
    ) -> Result<AgentVersion, HubError> {
        self.identity
            .require(caller, Access::List, "listing agent versions")?;
        self.version_of(agent, version).await
    }

    /// One agent's versions and traffic (the caller was checked).
    async fn versions_of(&self, agent: &str) -> Result<AgentVersions, HubError> {
        Ok(self.catalog(agent).await?.view())
    }

    /// One version of an agent (the caller was checked).
    async fn version_of(&self, agent: &str, version: &str) -> Result<AgentVersion, HubError> {
        self.versions_of(agent)
            .await?
            .versions
            .into_iter()
            .find(|v| v.version == version)
            .ok_or_else(|| HubError::NotFound(format!("version {version} of agent `{agent}`")))
    }

    /// Creates a draft: `from`'s spec (default the highest version's) with the patch.
    /// The number must be a semantic version above every version of the agent.
    pub async fn create_version(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
        request: CreateVersion,
    ) -> Result<AgentVersion, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Administer, "creating an agent version")?;
        let client = caller.client();
        self.may_change_versions(client)?;
        let wanted = parse_version(&request.version).map_err(HubError::InvalidArgument)?;
        let catalog = self.catalog(agent).await?;
        let store = self.version_store()?;
        if catalog.find(&request.version).is_some() {
            return Err(HubError::Conflict(format!(
                "agent `{agent}` already has version {}",
                request.version
            )));
        }
        if let Some((highest, text)) = catalog.highest()
            && wanted <= highest
        {
            return Err(HubError::Conflict(format!(
                "version {} is not above {text}, the highest version of agent `{agent}`: \
                 versions must increase",
                request.version
            )));
        }
        let from = match &request.from {
            Some(from) => from.clone(),
            None => catalog
                .highest()
                .map(|(_, v)| v)
                .unwrap_or_else(|| catalog.baseline_version.clone()),
        };
        let (_, base) = catalog.find(&from).ok_or_else(|| {
            HubError::InvalidArgument(format!("`from`: agent `{agent}` has no version {from}"))
        })?;
        let spec = request.spec.apply(&base);
        validate_spec(&catalog.baseline, &spec)?;
        store
            .create_version(NewVersion {
                agent: agent.to_owned(),
                version: request.version.clone(),
                spec,
                created_by: client.to_owned(),
            })
            .await?;
        self.version_of(agent, &request.version).await
    }

    /// Changes a draft. Any other version is frozen: `Conflict`.
    pub async fn edit_version(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
        version: &str,
        patch: SpecPatch,
    ) -> Result<AgentVersion, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Administer, "editing an agent version")?;
        let client = caller.client();
        self.may_change_versions(client)?;
        let catalog = self.catalog(agent).await?;
        let (stage, spec) = catalog
            .find(version)
            .ok_or_else(|| HubError::NotFound(format!("version {version} of agent `{agent}`")))?;
        if stage != Stage::Draft {
            return Err(frozen(agent, version, stage));
        }
        let spec = patch.apply(&spec);
        validate_spec(&catalog.baseline, &spec)?;
        self.version_store()?
            .edit_draft(agent, version, spec)
            .await?;
        self.version_of(agent, version).await
    }

    /// Promotes a version one stage: draft → staging → production. `to`, when given,
    /// must be that next stage (no skipping). A new production version gets no traffic
    /// until a split names it.
    pub async fn promote_version(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
        version: &str,
        to: Option<Stage>,
    ) -> Result<AgentVersion, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Administer, "promoting an agent version")?;
        let client = caller.client();
        self.may_change_versions(client)?;
        let catalog = self.catalog(agent).await?;
        let (stage, _) = catalog
            .find(version)
            .ok_or_else(|| HubError::NotFound(format!("version {version} of agent `{agent}`")))?;
        let Some(next) = stage.next() else {
            return Err(HubError::Conflict(format!(
                "version {version} of agent `{agent}` is already in production"
            )));
        };
        if let Some(to) = to
            && to != next
        {
            return Err(HubError::Conflict(format!(
                "version {version} of agent `{agent}` is {}; it can only be promoted to {}",
                stage.as_str(),
                next.as_str()
            )));
        }
        self.version_store()?
            .set_stage(agent, version, stage, next)
            .await?;
        self.version_of(agent, version).await
    }

    /// Sets the traffic split over production versions (percent, summing to 100).
    pub async fn set_traffic(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
        split: TrafficSplit,
    ) -> Result<AgentVersions, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Administer, "routing traffic to versions")?;
        let client = caller.client();
        self.may_change_versions(client)?;
        let catalog = self.catalog(agent).await?;
        if split.0.is_empty() || split.0.len() > MAX_SPLIT_VERSIONS {
            return Err(HubError::InvalidArgument(format!(
                "a traffic split names 1 to {MAX_SPLIT_VERSIONS} versions"
            )));
        }
        let mut total = 0u64;
        for (version, weight) in &split.0 {
            if *weight > 100 {
                return Err(HubError::InvalidArgument(format!(
                    "weight {weight} of version {version} is above 100"
                )));
            }
            total += u64::from(*weight);
            match catalog.find(version) {
                None => {
                    return Err(HubError::InvalidArgument(format!(
                        "agent `{agent}` has no version {}",
                        version.escape_default()
                    )));
                }
                Some((stage, _)) if stage != Stage::Production => {
                    return Err(HubError::Conflict(format!(
                        "version {version} of agent `{agent}` is {}; only production versions \
                         take traffic (promote it first)",
                        stage.as_str()
                    )));
                }
                Some(_) => {}
            }
        }
        if total != 100 {
            return Err(HubError::InvalidArgument(format!(
                "traffic weights are percentages and must sum to 100, not {total}"
            )));
        }
        self.record_traffic(&catalog, client, TrafficAction::Set, split)
            .await
    }

    /// Restores the split in force before the current one, recorded as a rollback.
    /// Repeated rollbacks walk back to the baseline split; `Conflict` beyond it.
    pub async fn rollback_traffic(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
    ) -> Result<AgentVersions, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Administer, "rolling back traffic")?;
        let client = caller.client();
        self.may_change_versions(client)?;
        let catalog = self.catalog(agent).await?;
        let Some(previous) = catalog.view().rollback_to else {
            return Err(HubError::Conflict(format!(
                "agent `{agent}` has no earlier traffic split to roll back to"
            )));
        };
        self.record_traffic(&catalog, client, TrafficAction::Rollback, previous)
            .await
    }

    async fn record_traffic(
        &self,
        catalog: &Catalog,
        client: &str,
        action: TrafficAction,
        split: TrafficSplit,
    ) -> Result<AgentVersions, HubError> {
        self.version_store()?
            .record_traffic(NewTraffic {
                agent: catalog.agent.clone(),
                after_seq: catalog.history.last().map_or(0, |h| h.seq),
                action,
                split,
                by: client.to_owned(),
            })
            .await?;
        self.versions_of(&catalog.agent).await
    }

    /// Makes a staging or production version the agent's shadow, or clears it.
    pub async fn set_shadow(
        &self,
        caller: &(impl AsCaller + ?Sized),
        agent: &str,
        version: Option<&str>,
    ) -> Result<AgentVersions, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Administer, "setting a shadow version")?;
        let client = caller.client();
        self.may_change_versions(client)?;
        let catalog = self.catalog(agent).await?;
        if let Some(version) = version {
            let stored = catalog.stored.iter().find(|v| v.version == version);
            match stored {
                None if version == catalog.baseline_version => {
                    return Err(HubError::Conflict(format!(
                        "version {version} is agent `{agent}`'s configured definition; only a \
                         created version can be a shadow"
                    )));
                }
                None => {
                    return Err(HubError::NotFound(format!(
                        "version {version} of agent `{agent}`"
                    )));
                }
                Some(v) if v.stage == Stage::Draft => {
                    return Err(HubError::Conflict(format!(
                        "version {version} of agent `{agent}` is a draft; promote it to \
                         staging before running it as a shadow"
                    )));
                }
                Some(_) => {}
            }
        }
        self.version_store()?.set_shadow(agent, version).await?;
        self.versions_of(agent).await
    }

    /// The version a new thread of `agent` runs: `requested` (a staging or production
    /// version), else one drawn by the traffic weights from the thread's own id.
    pub(crate) async fn version_for_new_thread(
        &self,
        agent: &str,
        thread: &ThreadId,
        requested: Option<&str>,
    ) -> Result<String, HubError> {
        let catalog = self.catalog(agent).await?;
        match requested {
            Some(version) => match catalog.find(version) {
                None => Err(HubError::InvalidArgument(format!(
                    "agent `{agent}` has no version {}",
                    version.escape_default()
                ))),
                Some((Stage::Draft, _)) => Err(HubError::Conflict(format!(
                    "version {version} of agent `{agent}` is a draft and cannot run; promote \
                     it to staging first"
                ))),
                Some(_) => Ok(version.to_owned()),
            },
            None => Ok(pick(&catalog, thread)),
        }
    }

    /// The agent a thread's turn runs as, and its version. A thread created before
    /// versions existed is pinned now, by the weights. A thread pinned to a version that
    /// no longer exists (its baseline was renumbered) is refused rather than silently
    /// moved: pinning is a promise.
    pub(crate) async fn route(&self, thread: &ThreadRecord) -> Result<Routed, HubError> {
        if let Some(original) = &thread.shadow_of {
            return Err(HubError::Conflict(format!(
                "thread {} is the hidden shadow of {original}: it runs shadow copies only",
                thread.id
            )));
        }
        if !self.agents.contains_key(&thread.agent) {
            return Err(HubError::InvalidArgument(format!(
                "unknown agent `{}`; the agents are: {}",
                thread.agent,
                self.agents.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let catalog = self.catalog(&thread.agent).await?;
        let version = match &thread.agent_version {
            Some(version) => version.clone(),
            None => {
                let version = pick(&catalog, &thread.id);
                match &self.versions.store {
                    Some(store) => store.pin_thread(&thread.id, &version).await?,
                    None => version,
                }
            }
        };
        let (stage, spec) = catalog.find(&version).ok_or_else(|| {
            HubError::Conflict(format!(
                "thread {} is pinned to version {version} of agent `{}`, which no longer \
                 exists; start a new thread",
                thread.id, thread.agent
            ))
        })?;
        // Read here, from the catalog the turn is planned on, so a turn of an agent
        // without a shadow does not read its versions again when it ends.
        let shadowed = stage == Stage::Production
            && catalog
                .shadow()
                .is_some_and(|shadow| shadow.version != version);
        Ok(Routed {
            agent: spec.apply_to(&catalog.baseline),
            version,
            shadowed,
        })
    }
}

/// What [`Versions::route`] found for a thread's turn.
pub(crate) struct Routed {
    /// The agent's spec at the thread's version.
    pub(crate) agent: AgentSpec,
    /// The version the thread is pinned to.
    pub(crate) version: String,
    /// Whether a shadow version copies this turn: the version is in production and
    /// the agent has a shadow other than it.
    pub(crate) shadowed: bool,
}

/// A version drawn by the split in force, from the thread id; the baseline when the
/// split is empty.
fn pick(catalog: &Catalog, thread: &ThreadId) -> String {
    catalog
        .current()
        .pick(draw_of(thread.as_str()))
        .map(str::to_owned)
        .unwrap_or_else(|| catalog.baseline_version.clone())
}

fn frozen(agent: &str, version: &str, stage: Stage) -> HubError {
    HubError::Conflict(format!(
        "version {version} of agent `{agent}` is {} and immutable; create a new version \
         to change it",
        stage.as_str()
    ))
}

/// Checks a version's spec as configured agents are checked, and that its ensembles
/// are among the configured ones (a version changes behaviour, never reach).
fn validate_spec(baseline: &AgentSpec, spec: &VersionSpec) -> Result<(), HubError> {
    let bad =
        |field: &str, why: String| Err(HubError::InvalidArgument(format!("spec.{field}: {why}")));
    if spec.system_prompt.trim().is_empty() {
        return bad("system_prompt", "must not be empty".into());
    }
    if spec.system_prompt.chars().count() > MAX_PROMPT_CHARS {
        return bad(
            "system_prompt",
            format!("is longer than {MAX_PROMPT_CHARS} characters"),
        );
    }
    if spec.description.chars().count() > MAX_DESCRIPTION_CHARS {
        return bad(
            "description",
            format!("is longer than {MAX_DESCRIPTION_CHARS} characters"),
        );
    }
    if let Some(model) = &spec.model
        && (model.chars().count() > MAX_MODEL_CHARS || model.chars().any(char::is_control))
    {
        return bad(
            "model",
            format!("must be at most {MAX_MODEL_CHARS} printable characters"),
        );
    }
    for (i, ensemble) in spec.ensembles.iter().enumerate() {
        if !baseline.ensembles.contains(ensemble) {
            return bad(
                "ensembles",
                format!(
                    "`{}` is not one of the agent's configured ensembles ({})",
                    ensemble.escape_default(),
                    baseline.ensembles.join(", ")
                ),
            );
        }
        if spec.ensembles[..i].contains(ensemble) {
            return bad("ensembles", format!("`{ensemble}` is listed twice"));
        }
    }
    if spec.max_steps == 0 || spec.max_steps > 1_000 {
        return bad("max_steps", "must be 1 to 1000".into());
    }
    if spec.tool_timeout_ms == 0 || spec.tool_timeout_ms > 3_600_000 {
        return bad("tool_timeout_ms", "must be 1 to 3600000".into());
    }
    if spec.tool_output_cap_bytes < 256 || spec.tool_output_cap_bytes > 16 * 1024 * 1024 {
        return bad("tool_output_cap_bytes", "must be 256 to 16777216".into());
    }
    if let Some(schema) = &spec.output_schema {
        if schema.to_string().len() > MAX_SCHEMA_BYTES {
            return bad(
                "output_schema",
                format!("is larger than {MAX_SCHEMA_BYTES} bytes"),
            );
        }
        if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return bad(
                "output_schema",
                "must be a schema with \"type\": \"object\"".into(),
            );
        }
        Schema::compile(schema)
            .map_err(|e| HubError::InvalidArgument(format!("spec.output_schema: {e}")))?;
    }
    Ok(())
}

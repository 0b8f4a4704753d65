//! The pinned definitions of upstream MCP tools (ADR 0062): what each tool was approved
//! as, what it was last listed as, and an admin's approval of a changed definition.
//! The MCP client pins and quarantines (`agentplane-tools`' `mcp/pins.rs`); this
//! service shows the pins and approves changes, over `ToolPinStore`, for the API, the
//! command line and the web UI. Approving makes the definition last seen the approved
//! one and asks the gateway's upstreams to list the server again, so the tool is
//! offered at once on this replica (on others at their next connection).

use std::sync::Arc;

use agentplane_core::policy::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::error::HubError;
use crate::identity::{Access, AsCaller};
use crate::ports::tool_pins::{definition_diff, screen_definition};
use crate::ports::{McpUpstreams, ToolPin, ToolPinStore};
use crate::services::identity::Identity;

/// A pin as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PinView {
    pub server: String,
    pub tool: String,
    /// `pinned` (as approved) or `changed` (the last listing differs: quarantined under
    /// `pin = "strict"`, listed under `"warn"`).
    pub status: &'static str,
    pub approved_hash: String,
    pub seen_hash: String,
    pub first_seen_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// What changed, field by field, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// What the description screen finds in the definition last seen.
    pub findings: Vec<String>,
    pub approved: Value,
    pub seen: Value,
}

impl PinView {
    fn of(pin: ToolPin) -> Self {
        let changed = pin.changed();
        Self {
            status: if changed { "changed" } else { "pinned" },
            diff: changed.then(|| definition_diff(&pin.approved, &pin.seen)),
            findings: screen_definition(&pin.seen),
            server: pin.server,
            tool: pin.tool,
            approved_hash: pin.approved_hash,
            seen_hash: pin.seen_hash,
            first_seen_at: pin.first_seen_at,
            changed_at: pin.changed_at,
            approved_by: pin.approved_by,
            approved: pin.approved,
            seen: pin.seen,
        }
    }
}

/// The pins service.
pub struct ToolPins {
    identity: Arc<Identity>,
    store: Option<Arc<dyn ToolPinStore>>,
    upstreams: Option<Arc<dyn McpUpstreams>>,
}

impl ToolPins {
    pub(crate) fn new(
        identity: Arc<Identity>,
        store: Option<Arc<dyn ToolPinStore>>,
        upstreams: Option<Arc<dyn McpUpstreams>>,
    ) -> Self {
        Self {
            identity,
            store,
            upstreams,
        }
    }

    fn store(&self) -> Result<&Arc<dyn ToolPinStore>, HubError> {
        self.store
            .as_ref()
            .ok_or_else(|| HubError::NotFound("pinned MCP tool definitions".into()))
    }

    /// Every pin (of `server`, when named), changed ones first.
    pub async fn list(
        &self,
        caller: &(impl AsCaller + ?Sized),
        server: Option<&str>,
    ) -> Result<Vec<PinView>, HubError> {
        self.identity
            .require(caller, Access::Read, "reading pinned MCP tools")?;
        let mut pins: Vec<PinView> = self
            .store()?
            .tool_pins(server)
            .await?
            .into_iter()
            .map(PinView::of)
            .collect();
        pins.sort_by_key(|p| p.status == "pinned");
        Ok(pins)
    }

    /// Approves the definition last seen of `server`'s `tool`. With `hash`, only if
    /// that is still the definition seen (what the admin looked at); `Conflict`
    /// otherwise. A definition a person approved already stays as it is.
    pub async fn approve(
        &self,
        caller: &(impl AsCaller + ?Sized),
        server: &str,
        tool: &str,
        hash: Option<&str>,
    ) -> Result<PinView, HubError> {
        let caller =
            self.identity
                .require(caller, Access::Administer, "approving MCP tool definitions")?;
        let store = self.store()?;
        let pin = store
            .tool_pins(Some(server))
            .await?
            .into_iter()
            .find(|p| p.tool == tool)
            .ok_or_else(|| HubError::NotFound(format!("pinned tool `{tool}` of `{server}`")))?;
        if let Some(hash) = hash
            && hash != pin.seen_hash
        {
            return Err(HubError::Conflict(format!(
                "the definition of `{tool}` last seen is {}, not {hash}: look again before \
                 approving",
                pin.seen_hash
            )));
        }
        // Nothing to do for a definition a person approved already; one pinned at first
        // sight is approved now (clearing the description screen's quarantine).
        if !pin.changed() && pin.approved_by.is_some() {
            return Ok(PinView::of(pin));
        }
        let approved = ToolPin {
            approved_hash: pin.seen_hash.clone(),
            approved: pin.seen.clone(),
            changed_at: None,
            approved_by: Some(format!("{} ({})", caller.principal(), caller.client())),
            ..pin
        };
        store.put_tool_pin(&approved).await?;
        tracing::info!(
            target: "agentplane::security",
            event_type = "tool_definition_approved",
            server,
            tool,
            hash = %approved.approved_hash,
            client = %caller.client(),
            principal = %caller.principal(),
            at = %Timestamp::now(),
            "a changed MCP tool definition was approved"
        );
        if let Some(upstreams) = &self.upstreams {
            upstreams.refresh(server).await;
        }
        Ok(PinView::of(approved))
    }
}

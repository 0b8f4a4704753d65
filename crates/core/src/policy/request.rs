//! The facts of one request that policies select on: who asks (client, roles), which
//! agent and version, which tool with which arguments, and when. Targets read the names,
//! `when:` conditions read everything.

use std::path::Path;

use jiff::Timestamp;

/// The facts of one request. Built by [`RequestContext::new`] and its setters only, so
/// every caller (a turn, a tool call, an external agent's ask, a gateway call, a data
/// scope, `policy explain`) gives the same facts the same way.
#[derive(Debug, Clone, Copy)]
pub struct RequestContext<'a> {
    pub(crate) agent: &'a str,
    pub(crate) tags: &'a [String],
    pub(crate) tool: Option<&'a str>,
    pub(crate) arguments: Option<&'a serde_json::Value>,
    pub(crate) client: &'a str,
    pub(crate) roles: &'a [String],
    pub(crate) version: Option<&'a str>,
    pub(crate) workspace: Option<&'a Path>,
    pub(crate) at: Timestamp,
}

impl<'a> RequestContext<'a> {
    /// A turn-level request of `client` to `agent` (with its `tags`), now.
    pub fn new(agent: &'a str, tags: &'a [String], client: &'a str) -> Self {
        Self {
            agent,
            tags,
            tool: None,
            arguments: None,
            client,
            roles: &[],
            version: None,
            workspace: None,
            at: Timestamp::now(),
        }
    }

    /// The same request as a call of `tool` (`None`: turn-level again). Without
    /// [`arguments`](Self::arguments) it asks what holds whatever the arguments are:
    /// whether the tool may be offered at all.
    pub fn tool(self, tool: impl Into<Option<&'a str>>) -> Self {
        Self {
            tool: tool.into(),
            ..self
        }
    }

    /// The same request with the tool call's arguments.
    pub fn arguments(self, arguments: &'a serde_json::Value) -> Self {
        Self {
            arguments: Some(arguments),
            ..self
        }
    }

    /// The same request by a caller holding `roles`.
    pub fn roles(self, roles: &'a [String]) -> Self {
        Self { roles, ..self }
    }

    /// The same request to this version of the agent.
    pub fn version(self, version: impl Into<Option<&'a str>>) -> Self {
        Self {
            version: version.into(),
            ..self
        }
    }

    /// The same request in this workspace (`path_under` resolves symbolic links in
    /// it).
    pub fn workspace(self, root: impl Into<Option<&'a Path>>) -> Self {
        Self {
            workspace: root.into(),
            ..self
        }
    }

    /// The same request with another agent (and its tags).
    pub fn agent(self, agent: &'a str, tags: &'a [String]) -> Self {
        Self {
            agent,
            tags,
            ..self
        }
    }

    /// The same request by another client.
    pub fn client(self, client: &'a str) -> Self {
        Self { client, ..self }
    }

    /// The same request at another instant.
    pub fn at(self, at: Timestamp) -> Self {
        Self { at, ..self }
    }

    /// The agent's name.
    pub fn agent_name(&self) -> &'a str {
        self.agent
    }
    /// The agent's tags.
    pub fn agent_tags(&self) -> &'a [String] {
        self.tags
    }
    /// The tool called, if any.
    pub fn tool_name(&self) -> Option<&'a str> {
        self.tool
    }
    /// The tool call's arguments, if given.
    pub fn call_arguments(&self) -> Option<&'a serde_json::Value> {
        self.arguments
    }
    /// The client's id.
    pub fn client_id(&self) -> &'a str {
        self.client
    }
    /// The agent version, if known.
    pub fn agent_version(&self) -> Option<&'a str> {
        self.version
    }
    /// The workspace root, if known.
    pub fn workspace_root(&self) -> Option<&'a Path> {
        self.workspace
    }
    /// The caller's roles.
    pub fn caller_roles(&self) -> &'a [String] {
        self.roles
    }
    /// The same request without its arguments: what holds whatever they are.
    pub fn without_arguments(self) -> Self {
        Self {
            arguments: None,
            ..self
        }
    }
    /// When the request happens.
    pub fn instant(&self) -> Timestamp {
        self.at
    }
}

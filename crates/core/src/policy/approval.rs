//! `approval_required`: a matching tool call waits for a person's decision. Only the
//! rule lives here; storing, suspending and deciding approvals is a later part's job.

use super::glob::Glob;

/// Which calls need approval and who may give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequired {
    /// Tool patterns that need approval; `None` means every tool call the targets select.
    pub tools: Option<Vec<Glob>>,
    /// Who may approve (free-form ids such as e-mail addresses); empty means anyone
    /// allowed to decide approvals. `role:NAME` names every caller holding role `NAME`.
    pub approvers: Vec<String>,
    /// Four eyes: the client whose turn made the call may not decide it, even when
    /// it is one of the approvers.
    pub separate_approver: bool,
}

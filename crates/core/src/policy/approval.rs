//! `approval_required`: a matching tool call waits for a person's decision. Only the
//! rule lives here; storing, suspending and deciding approvals is a later part's job.

use super::glob::Glob;

/// Which calls need approval and who may give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequired {
    /// Tool patterns that need approval; `None` means every tool call the targets select.
    pub tools: Option<Vec<Glob>>,
    /// Who may approve (free-form ids such as e-mail addresses); empty means anyone
    /// allowed to decide approvals.
    pub approvers: Vec<String>,
}

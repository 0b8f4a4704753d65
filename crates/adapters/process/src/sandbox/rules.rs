//! The Landlock rulesets, built in the parent (opening each path, adding each rule)
//! so that the child only calls `landlock_restrict_self` on the descriptor.
//!
//! What must not live here: deciding which paths (that is [`super::Sandbox`]).

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

use super::{Sandbox, SandboxError};

/// The ruleset of a tool's process: every file access handled, rights granted beneath
/// the sandbox's roots only; TCP handled (so refused) without network; scopes when the
/// kernel has them. Roots that do not exist are skipped.
pub(super) fn confined(
    sandbox: &Sandbox,
    workspace: &std::path::Path,
    kernel_abi: i32,
) -> Result<RulesetCreated, SandboxError> {
    let abi = ABI::from(kernel_abi);
    let setup = |e: landlock::RulesetError| SandboxError::Setup(e.to_string());
    let mut ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(setup)?;
    if !sandbox.network && kernel_abi >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(setup)?;
    }
    if kernel_abi >= 6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(setup)?;
    }
    ruleset
        .create()
        .map_err(setup)?
        .add_rules(path_beneath_rules(
            sandbox.read_only(),
            AccessFs::from_read(abi),
        ))
        .map_err(setup)?
        .add_rules(path_beneath_rules(
            sandbox.read_write(workspace),
            AccessFs::from_all(abi),
        ))
        .map_err(setup)
}

/// A ruleset that restricts nothing a server does with files (only creating block
/// devices, which no server needs, is handled) but makes a Landlock domain: processes
/// outside it cannot be traced, read through `/proc/PID/{environ,mem,fd}` or (with
/// ABI 6) signalled from inside. `None` when the kernel has no Landlock.
pub(super) fn domain_only(kernel_abi: i32) -> Option<RulesetCreated> {
    if kernel_abi < 1 {
        return None;
    }
    let mut ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::MakeBlock)
        .ok()?;
    if kernel_abi >= 6 {
        ruleset = ruleset.scope(Scope::Signal).ok()?;
    }
    ruleset.create().ok()
}

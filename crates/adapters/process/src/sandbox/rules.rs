//! The Landlock rulesets, built in the parent (opening each path, adding each rule)
//! so that the child only calls `landlock_restrict_self` on the descriptor.
//!
//! What must not live here: deciding which paths (that is [`super::Sandbox`]).

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope, path_beneath_rules,
};

use super::{Sandbox, SandboxError};

/// The ruleset of a tool's process: every file access handled, rights granted beneath
/// the sandbox's roots only; TCP handled (so refused) without network; scopes when the
/// kernel has them. Roots that do not exist are skipped.
pub(super) fn confined(
    sandbox: &Sandbox,
    (read_only, read_write): (&[std::path::PathBuf], &[std::path::PathBuf]),
    workspace: &std::os::fd::OwnedFd,
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
        .add_rules(path_beneath_rules(read_only, AccessFs::from_read(abi)))
        .map_err(setup)?
        .add_rule(PathBeneath::new(workspace, writable(abi)))
        .map_err(setup)?
        .add_rules(path_beneath_rules(read_write, writable(abi)))
        .map_err(setup)
}

/// What a writable root is granted: everything but creating device nodes.
fn writable(abi: ABI) -> landlock::BitFlags<AccessFs> {
    AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// The rights of a writable root as the kernel's bits (granted to the private
/// `/tmp` between fork and exec).
pub(super) fn workspace_rights(kernel_abi: i32) -> u64 {
    writable(ABI::from(kernel_abi)).bits()
}

/// A second layer for an agent with network: TCP `connect` and `bind` handled, and
/// granted on every port but `forbidden` (agentplane's own listeners). Landlock rules
/// are per port, so that is up to 65,536 rules: built once per set of ports and shared
/// (each process gets a duplicate of the descriptor). `None` when nothing is forbidden.
pub(super) fn own_ports(
    forbidden: &[u16],
    kernel_abi: i32,
) -> Result<Option<RulesetCreated>, SandboxError> {
    static BUILT: std::sync::Mutex<Option<(Vec<u16>, RulesetCreated)>> =
        std::sync::Mutex::new(None);
    if forbidden.is_empty() {
        return Ok(None);
    }
    let setup = |e: landlock::RulesetError| SandboxError::Setup(e.to_string());
    let mut built = match BUILT.lock() {
        Ok(built) => built,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some((ports, ruleset)) = built.as_ref()
        && ports == forbidden
    {
        return ruleset
            .try_clone()
            .map(Some)
            .map_err(|e| SandboxError::Setup(e.to_string()));
    }
    let abi = ABI::from(kernel_abi);
    let tcp = AccessNet::from_all(abi);
    let ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(tcp)
        .map_err(setup)?
        .create()
        .map_err(setup)?
        .add_rules(
            (0..=u16::MAX)
                .filter(|port| forbidden.binary_search(port).is_err())
                .map(|port| Ok::<_, landlock::RulesetError>(NetPort::new(port, tcp))),
        )
        .map_err(setup)?;
    let copy = ruleset
        .try_clone()
        .map_err(|e| SandboxError::Setup(e.to_string()))?;
    *built = Some((forbidden.to_vec(), ruleset));
    Ok(Some(copy))
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

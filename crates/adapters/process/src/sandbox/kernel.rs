//! What the running kernel offers a confinement: Landlock's ABI, seccomp, namespaces.
//!
//! What must not live here: what an agent is granted (`super::confinement`).

#[cfg(target_os = "linux")]
use super::namespaces;

/// The Landlock ABI that carries everything a required sandbox needs: files (1–3) and
/// TCP (4). Scopes (6) are applied when the kernel has them.
pub const REQUIRED_LANDLOCK_ABI: i32 = 4;

/// What the running kernel offers, asked once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    /// Landlock's ABI version; 0 when Landlock is not built in or not enabled.
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
}

impl Kernel {
    /// The running kernel (probed on first use).
    pub fn get() -> Kernel {
        static KERNEL: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *KERNEL.get_or_init(Kernel::probe)
    }

    #[cfg(target_os = "linux")]
    fn probe() -> Kernel {
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
        // returns the ABI version (or -1 with ENOSYS/EOPNOTSUPP); prctl(PR_GET_SECCOMP)
        // reads the caller's mode (EINVAL without seccomp). Neither touches our memory.
        let (abi, seccomp) = unsafe {
            (
                libc::syscall(
                    libc::SYS_landlock_create_ruleset,
                    std::ptr::null::<libc::c_void>(),
                    0usize,
                    1u32,
                ),
                libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0),
            )
        };
        Kernel {
            landlock_abi: i32::try_from(abi.max(0)).unwrap_or(0),
            seccomp: seccomp >= 0,
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn probe() -> Kernel {
        Kernel {
            landlock_abi: 0,
            seccomp: false,
        }
    }

    /// What a required sandbox needs and this kernel lacks, in words; `None` when
    /// everything is there.
    pub fn missing(&self) -> Option<String> {
        let mut missing = Vec::new();
        if self.landlock_abi < REQUIRED_LANDLOCK_ABI {
            missing.push(format!(
                "Landlock ABI {REQUIRED_LANDLOCK_ABI} (it offers {})",
                self.landlock_abi
            ));
        }
        if !self.seccomp {
            missing.push("seccomp".to_owned());
        }
        (!missing.is_empty()).then(|| missing.join(" and "))
    }
}

/// Whether tools' programs get namespaces of their own here, or why not.
pub fn namespaces_available() -> Result<(), String> {
    #[cfg(target_os = "linux")]
    return namespaces::availability();
    #[cfg(not(target_os = "linux"))]
    Err("namespaces exist on Linux only".to_owned())
}

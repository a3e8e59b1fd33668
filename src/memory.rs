//! The process's use of memory pages: transparent huge pages (`server.transparent_huge_pages`).
//!
//! The allocator (mimalloc) asks the kernel for huge pages on its heap where it may. Every
//! connection actix-http holds keeps a read and a write buffer of 8 KiB each, written only at
//! their start: on 4 KiB pages the untouched rest of them is never resident, on 2 MiB pages it
//! is. A replica holding thousands of GET streams pays for that: measured with
//! `mcp-harbor-bench --phase streams` (4,000 sessions each holding its GET stream), 24.2 KB per
//! session with huge pages against 16.2 KB without, for about 3 % more CPU per `tools/call`
//! without them (bench/results/2026-11-25-compare-3.txt).

use std::io;

/// Turns transparent huge pages on or off for this process's page faults from now on (Linux's
/// `PR_SET_THP_DISABLE`; the setting is inherited by children). Elsewhere it does nothing.
pub fn set_transparent_huge_pages(enabled: bool) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let disable = libc::c_ulong::from(!enabled);
        let zero: libc::c_ulong = 0;
        // SAFETY: PR_SET_THP_DISABLE takes one integer flag (the other arguments must be
        // zero); no memory is passed to the kernel.
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, disable, zero, zero, zero) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = enabled;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Whether transparent huge pages are allowed for this process, read back from the kernel.
    fn transparent_huge_pages() -> Option<bool> {
        // SAFETY: PR_GET_THP_DISABLE takes no arguments and returns the flag.
        let rc = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        (rc >= 0).then_some(rc == 0)
    }

    /// What the kernel reports for the process, independently of the prctl read-back.
    fn status_thp_enabled() -> Option<String> {
        std::fs::read_to_string("/proc/self/status")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim().to_string()))
    }

    #[test]
    fn huge_pages_are_turned_off_and_on_for_the_process() {
        set_transparent_huge_pages(false).expect("prctl off");
        assert_eq!(transparent_huge_pages(), Some(false));
        if let Some(status) = status_thp_enabled() {
            assert_eq!(status, "0", "/proc/self/status after turning them off");
        }
        set_transparent_huge_pages(true).expect("prctl on");
        assert_eq!(transparent_huge_pages(), Some(true));
        if let Some(status) = status_thp_enabled() {
            assert_eq!(status, "1", "/proc/self/status after turning them on");
        }
    }
}

//! The process's memory: the global allocator (`Allocator`) and transparent huge pages
//! (`server.transparent_huge_pages`).
//!
//! The allocator (mimalloc) asks the kernel for huge pages on its heap where it may. Every
//! connection actix-http holds keeps a read and a write buffer of 8 KiB each, written only at
//! their start: on 4 KiB pages the untouched rest of them is never resident, on 2 MiB pages it
//! is. A replica holding thousands of GET streams pays for that: measured with
//! `mcp-harbor-bench --phase streams` (4,000 sessions each holding its GET stream), 24.2 KB per
//! session with huge pages against 16.2 KB without, for about 3 % more CPU per `tools/call`
//! without them (bench/results/2026-11-25-compare-3.txt).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::io;

/// The global allocator of the `mcp-harbor` binary: mimalloc, asked the way Rust's own `System`
/// allocator asks malloc. For the alignments every mimalloc block has (up to a machine word)
/// it calls plain `mi_malloc` / `mi_zalloc` / `mi_realloc`; only larger alignments go to the
/// aligned entry points, through the `mimalloc` crate's `MiMalloc`.
///
/// `MiMalloc` calls `mi_malloc_aligned` for every allocation. Its fast path covers only blocks
/// of up to 1 KiB that happen to be aligned already; every larger one (request bodies,
/// response and snapshot buffers) took its generic path, about 170 instructions more under
/// callgrind: 7 per `tools/call`, 19 per session opening (`bench/profile.sh`).
pub struct Allocator;

/// The alignment of every block mimalloc hands out (its size classes are whole words).
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: each call keeps `GlobalAlloc`'s contract by handing it to mimalloc, which returns
// blocks of at least the requested size aligned to at least a word (or null), frees any block
// it returned with `mi_free`, and reallocates one keeping its contents. Layouts aligned beyond
// a word go to `MiMalloc`'s aligned calls; `mi_free` frees blocks of both kinds.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD {
            libmimalloc_sys::mi_malloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc(layout)
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD {
            libmimalloc_sys::mi_zalloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        libmimalloc_sys::mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= WORD {
            libmimalloc_sys::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
        } else {
            mimalloc::MiMalloc.realloc(ptr, layout, new_size)
        }
    }
}

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

    /// Every size class and alignment the allocator sees: blocks are aligned as asked, hold
    /// what was written, come zeroed when asked, keep their contents when they grow or shrink,
    /// and are freed whichever call made them.
    #[test]
    fn the_allocator_honours_size_alignment_zeroing_and_realloc() {
        let sizes = [1, 3, 8, 24, 40, 100, 1024, 1500, 5000, 70_000, 3 << 20];
        for &size in &sizes {
            for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
                let layout = Layout::from_size_align(size, align).expect("layout");
                // SAFETY: the layouts are non-zero in size; each block is written only within
                // its size, read back, and freed once with the layout it was made with.
                unsafe {
                    let p = Allocator.alloc(layout);
                    assert!(!p.is_null(), "alloc {size}/{align}");
                    assert_eq!(p as usize % align, 0, "alloc {size}/{align} misaligned");
                    for i in 0..size {
                        *p.add(i) = (i % 251) as u8;
                    }
                    let grown = size * 3 + 7;
                    let q = Allocator.realloc(p, layout, grown);
                    assert!(!q.is_null(), "realloc {size}/{align}");
                    assert_eq!(q as usize % align, 0, "realloc {size}/{align} misaligned");
                    assert!(
                        (0..size).all(|i| *q.add(i) == (i % 251) as u8),
                        "contents kept"
                    );
                    let grown_layout = Layout::from_size_align(grown, align).expect("layout");
                    let r = Allocator.realloc(q, grown_layout, size / 2 + 1);
                    assert!(
                        (0..=size / 2).all(|i| *r.add(i) == (i % 251) as u8),
                        "shrunk"
                    );
                    Allocator.dealloc(
                        r,
                        Layout::from_size_align(size / 2 + 1, align).expect("layout"),
                    );

                    let z = Allocator.alloc_zeroed(layout);
                    assert!(!z.is_null(), "alloc_zeroed {size}/{align}");
                    assert_eq!(
                        z as usize % align,
                        0,
                        "alloc_zeroed {size}/{align} misaligned"
                    );
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed {size}/{align}");
                    Allocator.dealloc(z, layout);
                }
            }
        }
    }

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

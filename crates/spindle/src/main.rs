//! The `spindle` binary, with Spindle's built-in job types.

/// mimalloc instead of the system allocator: a 100,000-job run spends a third of its time
/// in glibc's malloc and free (BENCHMARKS.md, session 8). Without transparent huge pages,
/// so that a small process does not hold 2 MiB pages it barely uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    give_back_freed_memory_soon();
    spindle::main(job::Registry::builtin())
}

/// mimalloc's `mi_option_purge_delay` (`mi_option_e` in mimalloc.h, 15 in its v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has mimalloc give memory freed back to the system after 10 ms (its v2 default) rather
/// than after a second (its v3 default; ten in its arenas): a request of 100,000 hosts
/// builds, stores and hands over its chain in quick succession, and with the default every
/// step's freed memory stayed committed beside the next one's (`spindle server`'s peak 381
/// MiB, 304 MiB so). At once (0) it was 263 MiB, but the open loop's server spent 12% more
/// CPU on a request (`BENCHMARKS.md`, 2026-12-06). `MIMALLOC_PURGE_DELAY` still decides
/// when it is set.
#[expect(unsafe_code, reason = "mimalloc's options are set through its C API")]
fn give_back_freed_memory_soon() {
    // SAFETY: mi_option_set_default takes any option and value, and runs before any
    // other thread does.
    unsafe { libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, 10) }
}

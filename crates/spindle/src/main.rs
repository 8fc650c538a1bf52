//! The `spindle` binary, with Spindle's built-in job types.

/// mimalloc instead of the system allocator: a 100,000-job run spends a third of its time
/// in glibc's malloc and free (BENCHMARKS.md, session 8). Without transparent huge pages,
/// so that a small process does not hold 2 MiB pages it barely uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    spindle::main(job::Registry::builtin())
}

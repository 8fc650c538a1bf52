//! The `spindle` binary, with Spindle's built-in job types.

fn main() -> std::process::ExitCode {
    spindle::main(job::Registry::builtin())
}

//! The `spindle` binary, with Spindle's built-in job types.

fn main() -> std::process::ExitCode {
    cli::main(job::Registry::builtin())
}

//! `my-spindle`: the `spindle` command line with the `greet` job type added.

fn main() -> std::process::ExitCode {
    spindle::main(custom_job::registry())
}

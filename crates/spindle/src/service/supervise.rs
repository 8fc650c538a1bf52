//! `spindle __supervise PARENT_PID -- PROGRAM [ARGS...]`: what a Job Runner runs a
//! `shell-command` job's program under, so that the program dies with the runner.
//!
//! The runner starts this process as the leader of a new process group; the program it
//! starts is in that group too, so a stop (the runner signals the group) reaches both.
//! This process asks the kernel for a signal when its parent dies (PR_SET_PDEATHSIG, through
//! nix's safe wrapper: no `unsafe` code), and on that signal kills the whole group, the
//! program's own children included. Stop signals (SIGTERM, SIGINT) it leaves to the
//! program: it waits for the program and exits as the program did (128 + N for a
//! program ended by signal N), so the runner sees the program's exit status.
//!
//! The kernel sends the parent-death signal when the thread that started this process
//! ends; the runner starts jobs from its tokio worker threads, which live as long as the
//! runtime.

use std::ffi::OsString;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpgrp, getppid};
use tokio::signal::unix::{SignalKind, signal};

/// The hidden command's name; `job::set_supervisor` is told to run it.
pub(crate) const COMMAND: &str = "__supervise";

/// The exit code when the program cannot be started (as a shell says).
const CANNOT_START: i32 = 127;

/// Runs the supervisor with the arguments after [`COMMAND`]; returns the exit code.
pub(crate) fn run(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter();
    let parent = args
        .next()
        .and_then(|pid| pid.to_str().and_then(|pid| pid.parse::<i32>().ok()));
    let separator = args.next();
    let (Some(parent), Some("--"), Some(program)) = (
        parent,
        separator.as_ref().and_then(|s| s.to_str()),
        args.next(),
    ) else {
        #[allow(clippy::print_stderr, reason = "the supervisor's one usage line")]
        {
            eprintln!("usage: spindle {COMMAND} PARENT_PID -- PROGRAM [ARGS...]");
        }
        return 2;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return cannot_start(&program, &err),
    };
    runtime.block_on(supervise(Pid::from_raw(parent), program, args.collect()))
}

fn cannot_start(program: &OsString, err: &dyn std::fmt::Display) -> i32 {
    #[allow(
        clippy::print_stderr,
        reason = "the job's stderr says why it did not start"
    )]
    {
        eprintln!(
            "{}`{}`: {err}",
            job::SUPERVISOR_CANNOT_START,
            program.to_string_lossy()
        );
    }
    CANNOT_START
}

async fn supervise(parent: Pid, program: OsString, args: Vec<OsString>) -> i32 {
    // Handlers first: from here on these signals no longer end this process by default.
    let (Ok(mut parent_died), Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::user_defined1()),
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return cannot_start(&program, &"cannot watch signals");
    };
    if let Err(err) = nix::sys::prctl::set_pdeathsig(Signal::SIGUSR1) {
        return cannot_start(
            &program,
            &format!("cannot ask for the parent-death signal: {err}"),
        );
    }
    // The runner may have died before the request took effect.
    if getppid() != parent {
        return 128 + Signal::SIGKILL as i32;
    }
    let mut child = match tokio::process::Command::new(&program).args(&args).spawn() {
        Ok(child) => child,
        Err(err) => return cannot_start(&program, &err),
    };
    loop {
        tokio::select! {
            status = child.wait() => {
                return match status {
                    Ok(status) => exit_code(status),
                    Err(_) => 1,
                };
            }
            _ = parent_died.recv() => {
                // The runner is gone: nothing of the job may run on.
                let _ = killpg(getpgrp(), Signal::SIGKILL);
                return 128 + Signal::SIGKILL as i32;
            }
            // A stop: the program, in the same group, got it too and decides.
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    }
}

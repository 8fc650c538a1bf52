//! One call of a job program: the process started with its protocol descriptor, its call
//! written on stdin, its lines read and its end awaited. `describe` and `create` block
//! (the grapher is synchronous and runs on a blocking thread); `run` is a try's future.

use std::future::Future;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt as _, FdMapping};
use nix::sys::signal::Signal;
use proto::{JobArgs, State, Stream};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

use super::Program;
use super::fork::ForkServer;
use super::wire::{self, Call, Line, PROTOCOL, PROTOCOL_FD};
use crate::builtin::shell::{
    Captured, DRAIN_WAIT, capture, exit_code, quote, signal_group, supervised,
};
use crate::{Outcome, RunContext};

/// Bytes a program may write on its protocol descriptor in one call; past them the rest
/// is not read (the answer is then missing, which fails the call).
const PROTOCOL_BYTES: u64 = 64 * 1024 * 1024;

/// Set for a try of a program that is not supervised: the pid of the Job Runner that
/// started it, which the program must outlive by nothing (docs/job-protocol.md).
pub(crate) const PARENT_PID_ENV: &str = "SPINDLE_JOB_PARENT_PID";

/// The environment a program gets besides Spindle's own.
pub(crate) fn env(call: &str) -> [(&'static str, String); 3] {
    [
        ("SPINDLE_JOB_PROTOCOL", PROTOCOL.to_string()),
        ("SPINDLE_JOB_CALL", call.to_owned()),
        ("SPINDLE_JOB_FD", PROTOCOL_FD.to_string()),
    ]
}

fn protocol_pipe() -> Result<(std::io::PipeReader, FdMapping), String> {
    let (reader, writer) =
        std::io::pipe().map_err(|err| format!("cannot make its protocol pipe: {err}"))?;
    Ok((
        reader,
        FdMapping {
            parent_fd: OwnedFd::from(writer),
            child_fd: PROTOCOL_FD,
        },
    ))
}

/// The lines' verdict: the answer (the last line), or what was wrong.
fn answer_of(
    lines: impl IntoIterator<Item = String>,
) -> Result<Option<Map<String, Value>>, String> {
    let mut answer = None;
    for text in lines {
        if text.trim().is_empty() {
            continue;
        }
        match wire::line(&text)? {
            Line::Status(_) => {}
            Line::Answer(object) => answer = Some(object),
        }
    }
    Ok(answer)
}

/// What stderr said, for an error: its last lines, quoted.
pub(crate) fn stderr_note(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.len() {
        0 => String::new(),
        n => format!(
            "; its stderr ends: {}",
            quote(&lines[n.saturating_sub(5)..].join("\n"))
        ),
    }
}

/// `describe` or `create`: runs the program to its answer within `timeout`. The error
/// says what went wrong (the caller names the program and the call).
pub(crate) fn call_blocking(
    program: &Program,
    call: &Call<'_>,
    timeout: Duration,
) -> Result<Map<String, Value>, String> {
    let input = serde_json::to_vec(call).map_err(|err| format!("cannot encode the call: {err}"))?;
    let (reader, mapping) = protocol_pipe()?;
    let mut command = std::process::Command::new(&program.path);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    command
        .args(&program.args)
        .envs(env(call.name()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
        .fd_mappings(vec![mapping])
        .map_err(|err| format!("cannot pass its protocol descriptor: {err}"))?;
    let spawned = command.spawn();
    // The command holds the pipe's write end: dropped, the reader sees the end of it.
    drop(command);
    let mut child = spawned.map_err(|err| format!("cannot start it: {err}"))?;
    let pid = child.id();
    let mut stdin = child.stdin.take();
    std::thread::spawn(move || {
        if let Some(stdin) = &mut stdin {
            // A program that does not read its call is told so by its missing answer.
            let _ = stdin.write_all(&input);
        }
    });
    let stderr = Captured::default();
    let drains = [
        crate::builtin::shell::drain_thread(
            child.stdout.take().map(|p| Box::new(p) as _),
            Captured::default(),
        ),
        crate::builtin::shell::drain_thread(
            child.stderr.take().map(|p| Box::new(p) as _),
            stderr.clone(),
        ),
    ];
    let (lines_tx, lines_rx) = mpsc::channel();
    let lines = std::thread::spawn(move || {
        let mut reader = BufReader::new(reader.take(PROTOCOL_BYTES));
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let _ = lines_tx.send(String::from_utf8_lossy(&line).into_owned());
            line.clear();
        }
    });
    let (exited_tx, exited_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = exited_tx.send(child.wait());
    });
    let status = match exited_rx.recv_timeout(timeout) {
        Ok(status) => status.map_err(|err| format!("cannot wait for it: {err}"))?,
        Err(_) => {
            signal_group(Some(pid), Signal::SIGKILL);
            let _ = exited_rx.recv();
            return Err(format!(
                "did not answer within {} and was killed",
                proto::duration::format(timeout)
            ));
        }
    };
    let deadline = Instant::now() + DRAIN_WAIT;
    for handle in drains.iter().chain(std::iter::once(&lines)) {
        while !handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let stderr = stderr.text();
    match answer_of(lines_rx.try_iter()) {
        Err(err) => Err(format!("{err}{}", stderr_note(&stderr))),
        Ok(Some(answer)) => match wire::error_of(&answer) {
            Some(error) => Err(error),
            None => Ok(answer),
        },
        Ok(None) => Err(format!(
            "exited with status {} without its answer (a last line {{\"protocol\": {PROTOCOL}, ...}} on descriptor {PROTOCOL_FD}){}",
            exit_code(status),
            stderr_note(&stderr)
        )),
    }
}

/// What the reader of a running program's protocol descriptor ends with.
type Lines = Result<Option<Map<String, Value>>, String>;

/// Reads a running program's lines: status lines go to the try's status as they come;
/// the first bad line is the verdict (the rest is still read, so the program never
/// blocks on a full pipe).
async fn read_lines(reader: std::io::PipeReader, status: crate::Status) -> Lines {
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|err| format!("cannot read its protocol descriptor: {err}"))?;
    let mut reader = tokio::io::BufReader::new(receiver.take(PROTOCOL_BYTES));
    let mut verdict: Lines = Ok(None);
    let mut line = Vec::new();
    while reader
        .read_until(b'\n', &mut line)
        .await
        .is_ok_and(|n| n > 0)
    {
        let text = String::from_utf8_lossy(&line).into_owned();
        line.clear();
        if text.trim().is_empty() || verdict.is_err() {
            continue;
        }
        match wire::line(&text) {
            Ok(Line::Status(text)) => status.set(text),
            Ok(Line::Answer(answer)) => verdict = Ok(Some(answer)),
            Err(err) => verdict = Err(err),
        }
    }
    verdict
}

/// One try: the outcome and, when the program said it, the job data after it.
// Long because it is one process's life, in order: start it (forked by the fork server
// or spawned, with its secret env), read the protocol descriptor's status lines and the
// answer while stdout and stderr stream out, meet a stop or a timeout (SIGTERM, the
// grace, SIGKILL), and turn the exit and the answer into the outcome.
pub(crate) async fn run_try(
    program: &Program,
    call: &Call<'_>,
    ctx: &RunContext,
    secret_env: &[(String, String)],
) -> (Outcome, Option<JobArgs>) {
    let name = program.display();
    let failed = |exit: i64, error: String| Outcome {
        exit,
        ..Outcome::failed(format!("job program `{name}`: {error}"))
    };
    let input = match serde_json::to_vec(call) {
        Ok(input) => input,
        Err(err) => return (failed(1, format!("cannot encode the call: {err}")), None),
    };
    let started = match &program.fork_server {
        // A forked try has its server's environment: no place for a secret of its own.
        Some(_) if !secret_env.is_empty() => {
            return (
                failed(
                    1,
                    "it is given a secret arg, which reaches a program in its environment only, and the tries of a fork server share the server's; expected `fork_server: false` for a job given secret args".to_owned(),
                ),
                None,
            );
        }
        Some(server) => forked(program, server).await,
        None => spawned(program, call.name(), secret_env),
    };
    let Started {
        pid,
        reader,
        stdin,
        stdout: stdout_pipe,
        stderr: stderr_pipe,
        mut exit,
        supervised,
    } = match started {
        Ok(started) => started,
        Err((exit, err)) => return (failed(exit, err), None),
    };
    ctx.status
        .set(format!("running {name} (pid {})", pid.unwrap_or_default()));
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(mut stdin) = stdin {
        tasks.spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let (stdout, stderr) = (Captured::default(), Captured::default());
    if let Some(pipe) = stdout_pipe {
        tasks.spawn(capture(
            pipe,
            stdout.clone(),
            ctx.output.clone(),
            Stream::Stdout,
        ));
    }
    if let Some(pipe) = stderr_pipe {
        tasks.spawn(capture(
            pipe,
            stderr.clone(),
            ctx.output.clone(),
            Stream::Stderr,
        ));
    }
    let mut lines = tokio::spawn(read_lines(reader, ctx.status.clone()));
    let exited = tokio::select! {
        status = &mut exit => Some(status),
        () = ctx.cancel.cancelled() => None,
    };
    let stopped = exited.is_none();
    let status = match exited {
        Some(status) => status,
        None => {
            // Stop: the program (its kit calls the job's Stop) has the grace period.
            ctx.status
                .set(format!("stopping {name} (pid {})", pid.unwrap_or_default()));
            signal_group(pid, Signal::SIGTERM);
            let status = match tokio::time::timeout(program.stop_grace, &mut exit).await {
                Ok(status) => status,
                Err(_) => {
                    signal_group(pid, Signal::SIGKILL);
                    exit.await
                }
            };
            signal_group(pid, Signal::SIGKILL);
            status
        }
    };
    let (exit, lost) = match status {
        Ok(exit) => (exit, None),
        Err(why) => (-1, Some(why)),
    };
    let _ = tokio::time::timeout(DRAIN_WAIT, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    let verdict = match tokio::time::timeout(DRAIN_WAIT, &mut lines).await {
        Ok(Ok(verdict)) => verdict,
        Ok(Err(join)) => Err(format!("reading its protocol descriptor failed: {join}")),
        // A child of the program keeps the descriptor open: the answer is what came.
        Err(_) => {
            lines.abort();
            Ok(None)
        }
    };
    let ended = Ended {
        verdict,
        stopped,
        exit,
        stdout: stdout.text(),
        stderr: stderr.text(),
        supervised,
        lost,
    };
    ended.outcome(&name)
}

/// A try's process, started: its pid, its pipes (the protocol descriptor's read end,
/// stdin's write end, stdout's and stderr's read ends) and its exit code to come.
struct Started {
    pid: Option<u32>,
    reader: std::io::PipeReader,
    stdin: Option<Pin<Box<dyn tokio::io::AsyncWrite + Send>>>,
    stdout: Option<Pin<Box<dyn tokio::io::AsyncRead + Send>>>,
    stderr: Option<Pin<Box<dyn tokio::io::AsyncRead + Send>>>,
    /// The exit code (128 + N for signal N), or why it cannot be known.
    exit: Pin<Box<dyn Future<Output = Result<i64, String>> + Send>>,
    supervised: bool,
}

/// Why a try's process did not start: the exit code to log and the error.
type NotStarted = (i64, String);

/// Starts the program for a try: under the supervisor, or directly when it guards
/// itself (`supervised: false`).
fn spawned(
    program: &Program,
    call: &str,
    secret_env: &[(String, String)],
) -> Result<Started, NotStarted> {
    let (reader, mapping) = protocol_pipe().map_err(|err| (1, err))?;
    let supervisor = crate::supervisor().filter(|_| program.supervised);
    let mut command = if program.supervised {
        supervised(&program.path)
    } else {
        // The program ends its own group when this process dies.
        let mut command = tokio::process::Command::new(&program.path);
        command.env(PARENT_PID_ENV, std::process::id().to_string());
        command
    };
    command
        .args(&program.args)
        .envs(env(call))
        .envs(secret_env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command
        .fd_mappings(vec![mapping])
        .map_err(|err| (1, format!("cannot pass its protocol descriptor: {err}")))?;
    let spawned = command.spawn();
    drop(command);
    let mut child = spawned.map_err(|err| (127, format!("cannot start it: {err}")))?;
    Ok(Started {
        pid: child.id(),
        reader,
        stdin: child.stdin.take().map(|p| Box::pin(p) as _),
        stdout: child.stdout.take().map(|p| Box::pin(p) as _),
        stderr: child.stderr.take().map(|p| Box::pin(p) as _),
        exit: Box::pin(async move {
            child
                .wait()
                .await
                .map(exit_code)
                .map_err(|err| format!("cannot wait for it: {err}"))
        }),
        supervised: supervisor.is_some(),
    })
}

/// Asks the program's fork server for a try's process, with pipes of this runner's.
async fn forked(program: &Program, server: &ForkServer) -> Result<Started, NotStarted> {
    let pipe = || std::io::pipe().map_err(|err| (1, format!("cannot make its pipes: {err}")));
    let ((stdin_r, stdin_w), (stdout_r, stdout_w), (stderr_r, stderr_w), (reader, proto_w)) =
        (pipe()?, pipe()?, pipe()?, pipe()?);
    let forked = server
        .fork(
            program,
            [
                stdin_r.as_fd(),
                stdout_w.as_fd(),
                stderr_w.as_fd(),
                proto_w.as_fd(),
            ],
        )
        .await;
    // The process has its copies: this runner's must go, or their readers never end.
    drop((stdin_r, stdout_w, stderr_w, proto_w));
    let forked = forked.map_err(|err| (1, err))?;
    let sender = |w: std::io::PipeWriter| {
        tokio::net::unix::pipe::Sender::from_owned_fd(OwnedFd::from(w))
            .ok()
            .map(|p| Box::pin(p) as _)
    };
    let receiver = |r: std::io::PipeReader| {
        tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(r))
            .ok()
            .map(|p| Box::pin(p) as _)
    };
    let exited = forked.exited;
    Ok(Started {
        pid: Some(forked.pid),
        reader,
        stdin: sender(stdin_w),
        stdout: receiver(stdout_r),
        stderr: receiver(stderr_r),
        exit: Box::pin(async move {
            exited
                .await
                .unwrap_or_else(|_| Err("its fork server ended".to_owned()))
        }),
        supervised: false,
    })
}

/// How a try's program ended: what it answered on its descriptor, whether it was
/// stopped, its exit status and output.
struct Ended {
    verdict: Lines,
    stopped: bool,
    exit: i64,
    stdout: String,
    stderr: String,
    /// Started by the supervisor, which says so when it could not start the program.
    supervised: bool,
    /// Why its end is unknown (its fork server died).
    lost: Option<String>,
}

impl Ended {
    /// The try's outcome and, when the program said it, the job data after it.
    fn outcome(self, name: &str) -> (Outcome, Option<JobArgs>) {
        let Ended {
            verdict,
            stopped,
            exit,
            stdout,
            stderr,
            supervised,
            lost,
        } = self;
        let failed = |exit: i64, error: String| Outcome {
            exit,
            ..Outcome::failed(format!("job program `{name}`: {error}"))
        };
        let nonzero = if exit == 0 { 1 } else { exit };
        let (outcome, data) = match verdict
            .and_then(|answer| answer.map(|a| wire::ran(&a)).transpose())
        {
            Ok(Some(ran)) => (
                Outcome {
                    state: ran.state,
                    exit: ran.exit,
                    error: ran.error,
                    ..Outcome::default()
                },
                ran.data,
            ),
            Ok(None) if stopped => (
                Outcome {
                    exit,
                    ..Outcome::stopped()
                },
                None,
            ),
            Ok(None) => {
                let said = stderr.lines().next().unwrap_or_default();
                let error = if let Some(lost) = lost {
                    format!("job program `{name}`: {lost}; the try's process ended with it")
                } else if supervised
                    && exit == 127
                    && said.starts_with(crate::SUPERVISOR_CANNOT_START)
                {
                    format!(
                        "cannot start {}",
                        said.trim_start_matches(crate::SUPERVISOR_CANNOT_START)
                    )
                } else {
                    format!(
                        "job program `{name}` exited with status {exit} without its answer (a last line {{\"protocol\": {PROTOCOL}, \"state\": ...}} on descriptor {PROTOCOL_FD}){}",
                        stderr_note(&stderr)
                    )
                };
                (
                    Outcome {
                        exit: nonzero,
                        ..Outcome::failed(error)
                    },
                    None,
                )
            }
            Err(err) => (failed(nonzero, err), None),
        };
        let outcome = Outcome {
            state: if outcome.state == State::Unknown {
                State::Fail
            } else {
                outcome.state
            },
            stdout,
            stderr,
            ..outcome
        };
        (outcome, data)
    }
}

//! `shell-command` (runs a program when the job runs) and `shell-args` (runs a program
//! when the request is created, to compute args such as the list a sequence expands over).
//!
//! Neither goes through a shell: the program gets an argv list, and every other job arg
//! the node passes reaches it as an environment variable `SPINDLE_ARG_<NAME>`, never as
//! shell text.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use proto::{JobArgs, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::{CreateContext, Error, Job, Outcome, Output, RunContext};

/// How long a stopped or timed-out process group has between SIGTERM and SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(3);
/// How long to wait for output after the program exits (a background child that keeps
/// the pipe open must not hold the job forever).
pub(crate) const DRAIN_WAIT: Duration = Duration::from_secs(2);
/// `shell-args` runs at request creation; it may not hold the request longer than this
/// unless its `timeout` arg says otherwise.
const SHELL_ARGS_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Characters of each argument shown in messages.
const SHOWN_ARG_CHARS: usize = 60;

/// The job args both job types read; everything else becomes `SPINDLE_ARG_*`.
const OWN_ARGS: [&str; 5] = ["cmd", "args", "dir", "env", "timeout"];

/// A program to run, read from job args.
///
/// Stored as Spin Cycle's dev `shell-command` job stores itself, `{"cmd": "...", "args":
/// ["..."]}` (`args` left out when empty), so that each system's Job Runner reads the
/// other's bytes; what Spindle adds (`dir`, `env`, `timeout`) is written only when set, and
/// a Spin Cycle runner ignores it (docs/migrating.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Command {
    cmd: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dir: Option<String>,
    /// From the `env` job arg, then `SPINDLE_ARG_*` for the other job args.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    /// Go duration string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
}

/// Strings as they are; other values as JSON text.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `SPINDLE_ARG_<NAME>`: upper-cased, anything outside A-Z and 0-9 turned into `_`.
pub(crate) fn arg_env_name(name: &str) -> String {
    let upper: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_uppercase();
            if c.is_ascii_uppercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("SPINDLE_ARG_{upper}")
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

impl Command {
    fn from_args(job_type: &str, args: &JobArgs) -> Result<Command, Error> {
        let bad = |message: String| Error::Args(format!("{job_type}: {message}"));
        let cmd = match args.get("cmd") {
            Some(Value::String(cmd)) if !cmd.is_empty() => cmd.clone(),
            Some(other) => {
                return Err(bad(format!(
                    "job arg `cmd` is {other}; expected the program to run, such as `echo` or `/usr/local/bin/deploy`"
                )));
            }
            None => {
                return Err(bad(
                    "job arg `cmd` is missing; expected the program to run, such as `echo` or `/usr/local/bin/deploy`"
                        .to_owned(),
                ));
            }
        };
        let argv = match args.get("args") {
            None | Some(Value::Null) => Vec::new(),
            // As Spin Cycle does: a string is split on white space.
            Some(Value::String(line)) => line.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(items)) => items.iter().map(text_of).collect(),
            Some(other) => {
                return Err(bad(format!(
                    "job arg `args` is {other}; expected a list of arguments (or a string, split on white space)"
                )));
            }
        };
        let dir = match args.get("dir") {
            None | Some(Value::Null) => None,
            Some(Value::String(dir)) => Some(dir.clone()),
            Some(other) => {
                return Err(bad(format!(
                    "job arg `dir` is {other}; expected a directory path"
                )));
            }
        };
        let mut env = BTreeMap::new();
        match args.get("env") {
            None | Some(Value::Null) => {}
            Some(Value::Object(vars)) => {
                for (name, value) in vars {
                    if !valid_env_name(name) {
                        return Err(bad(format!(
                            "job arg `env` has the variable name {name:?}; expected names without `=` or NUL"
                        )));
                    }
                    env.insert(name.clone(), text_of(value));
                }
            }
            Some(other) => {
                return Err(bad(format!(
                    "job arg `env` is {other}; expected a map of variable names to values"
                )));
            }
        }
        let timeout = match args.get("timeout") {
            None | Some(Value::Null) => None,
            Some(value) => {
                let duration = super::parse_sleep_duration(value)
                    .map_err(|err| bad(format!("job arg `timeout`: {err}")))?;
                Some(proto::duration::format(duration))
            }
        };
        for (name, value) in args {
            if !OWN_ARGS.contains(&name.as_str()) {
                env.insert(arg_env_name(name), text_of(value));
            }
        }
        Ok(Command {
            cmd,
            args: argv,
            dir,
            env,
            timeout,
        })
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
            .as_deref()
            .and_then(|t| proto::duration::parse(t).ok())
    }

    /// Shown in messages: the program and its arguments, each argument cut to its
    /// first line and [`SHOWN_ARG_CHARS`] characters (a script passed to `sh -c` would
    /// drown the message).
    fn display(&self) -> String {
        std::iter::once(self.cmd.clone())
            .chain(self.args.iter().map(|arg| {
                let first = arg.lines().next().unwrap_or_default();
                let mut shown: String = first.chars().take(SHOWN_ARG_CHARS).collect();
                if shown.len() < arg.len() {
                    shown.push('…');
                }
                shown
            }))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A thread that reads `pipe` to its end into `sink`.
pub(crate) fn drain_thread(
    pipe: Option<Box<dyn std::io::Read + Send>>,
    sink: Captured,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else { return };
        let mut chunk = vec![0u8; 64 * 1024];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.push(&chunk[..n]);
        }
    })
}

/// Bytes read from a pipe: the first [`proto::OUTPUT_HEAD_BYTES`] and the last
/// [`proto::OUTPUT_TAIL_BYTES`], so that memory stays bounded however much a program
/// prints. Shared, so that what was read so far can be taken even if the pipe never
/// closes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<HeadTail>>);

#[derive(Debug, Default)]
struct HeadTail {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    /// Bytes seen in all.
    total: u64,
}

/// What replaces the bytes between head and tail.
fn cut_marker(cut: u64) -> String {
    format!(
        "\n[spindle: {cut} bytes of output cut here; the first {} KiB and the last {} KiB are kept]\n",
        proto::OUTPUT_HEAD_BYTES / 1024,
        proto::OUTPUT_TAIL_BYTES / 1024
    )
}

impl Captured {
    pub(crate) fn push(&self, bytes: &[u8]) {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let kept = &mut *guard;
        kept.total += bytes.len() as u64;
        let head_cap = usize::try_from(proto::OUTPUT_HEAD_BYTES).unwrap_or(usize::MAX);
        let tail_cap = usize::try_from(proto::OUTPUT_TAIL_BYTES).unwrap_or(usize::MAX);
        let to_head = head_cap.saturating_sub(kept.head.len()).min(bytes.len());
        kept.head.extend_from_slice(&bytes[..to_head]);
        let rest = &bytes[to_head..];
        let rest = &rest[rest.len().saturating_sub(tail_cap)..];
        let overflow = (kept.tail.len() + rest.len()).saturating_sub(tail_cap);
        kept.tail.drain(..overflow);
        kept.tail.extend(rest);
    }

    pub(crate) fn text(&self) -> String {
        let guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let kept = &*guard;
        let mut text = String::from_utf8_lossy(&kept.head).into_owned();
        let cut = kept.total - kept.head.len() as u64 - kept.tail.len() as u64;
        if cut > 0 {
            text.push_str(&cut_marker(cut));
        }
        let (front, back) = kept.tail.as_slices();
        let tail = [front, back].concat();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

/// Reads a pipe to its end, keeping its bytes and passing them on to the try's live
/// output.
pub(crate) async fn capture(
    mut pipe: impl tokio::io::AsyncRead + Unpin,
    captured: Captured,
    output: Output,
    stream: proto::Stream,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                captured.push(&chunk[..n]);
                output.write(stream, &chunk[..n]);
            }
        }
    }
}

pub(crate) fn exit_code(status: std::process::ExitStatus) -> i64 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => 128 + i64::from(signal),
        (None, None) => -1,
    }
}

/// A command that runs `program` under the supervisor when there is one (it takes the
/// program down if this runner dies), else directly; its arguments come next.
pub(crate) fn supervised(program: &std::path::Path) -> tokio::process::Command {
    match crate::supervisor() {
        Some((supervisor, subcommand)) => {
            let mut process = tokio::process::Command::new(supervisor);
            process
                .arg(subcommand)
                .arg(std::process::id().to_string())
                .arg("--")
                .arg(program);
            process
        }
        None => tokio::process::Command::new(program),
    }
}

pub(crate) fn signal_group(pid: Option<u32>, signal: Signal) {
    if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
        // The group may be gone already; nothing to do then.
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

/// `shell-command`: runs `cmd` with `args` when the job runs. Non-zero exit or timeout is
/// FAIL; stop ends the whole process group (SIGTERM, then SIGKILL after a grace period).
#[derive(Debug, Clone, Default)]
pub struct ShellCommandJob {
    command: Command,
}

#[async_trait::async_trait]
impl Job for ShellCommandJob {
    fn create(&mut self, args: &mut JobArgs, _ctx: &CreateContext) -> Result<(), Error> {
        self.command = Command::from_args(super::SHELL_COMMAND, args)?;
        Ok(())
    }

    fn serialize(&self) -> Result<Vec<u8>, Error> {
        crate::to_json(&self.command)
    }

    fn deserialize(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.command = crate::from_json(bytes)?;
        Ok(())
    }

    // Long because it is one process's life, in order: spawn (under the supervisor), read
    // both pipes, wait for the exit, the timeout or a stop (then the process group is
    // signalled), drain, and say what happened; each step uses the ones before.
    async fn run(&mut self, _data: &mut JobArgs, ctx: RunContext) -> Outcome {
        let command = &self.command;
        // A secret arg reaches the program in its environment only (issue #33).
        let program_and_args = std::iter::once(&command.cmd).chain(&command.args);
        if let Some(placeholder) = program_and_args
            .clone()
            .find_map(|text| ctx.secrets.placeholder_in(text))
        {
            return Outcome::failed(format!(
                "a secret arg ({placeholder}) is in the program's command line, where any process could read it; expected it in the environment only (SPINDLE_ARG_<NAME>, or job arg `env`)"
            ));
        }
        let env = command.env.iter().map(|(name, value)| {
            (
                name.as_str(),
                ctx.secrets.reveal(value).unwrap_or(value.as_str()),
            )
        });
        let supervisor = crate::supervisor();
        let mut process = supervised(std::path::Path::new(&command.cmd));
        process
            .args(&command.args)
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &command.dir {
            process.current_dir(dir);
        }
        let mut child = match process.spawn() {
            Ok(child) => child,
            Err(err) => {
                return Outcome {
                    exit: 127,
                    ..Outcome::failed(format!("cannot start `{}`: {err}", command.cmd))
                };
            }
        };
        let pid = child.id();
        ctx.status.set(format!(
            "running {} (pid {})",
            command.cmd,
            pid.unwrap_or_default()
        ));
        let (stdout, stderr) = (Captured::default(), Captured::default());
        let mut readers = tokio::task::JoinSet::new();
        if let Some(pipe) = child.stdout.take() {
            readers.spawn(capture(
                pipe,
                stdout.clone(),
                ctx.output.clone(),
                proto::Stream::Stdout,
            ));
        }
        if let Some(pipe) = child.stderr.take() {
            readers.spawn(capture(
                pipe,
                stderr.clone(),
                ctx.output.clone(),
                proto::Stream::Stderr,
            ));
        }
        let timeout = command.timeout();
        let deadline = async {
            match timeout {
                Some(timeout) => tokio::time::sleep(timeout).await,
                None => std::future::pending().await,
            }
        };
        enum End {
            Exited,
            Stopped,
            TimedOut,
        }
        let (end, exited) = tokio::select! {
            status = child.wait() => (End::Exited, Some(status)),
            () = ctx.cancel.cancelled() => (End::Stopped, None),
            () = deadline => (End::TimedOut, None),
        };
        let status = match exited {
            Some(status) => status,
            None => {
                ctx.status.set(format!(
                    "stopping {} (pid {})",
                    command.cmd,
                    pid.unwrap_or_default()
                ));
                signal_group(pid, Signal::SIGTERM);
                let status = match tokio::time::timeout(STOP_GRACE, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        signal_group(pid, Signal::SIGKILL);
                        child.wait().await
                    }
                };
                // Whatever is left of the group goes too.
                signal_group(pid, Signal::SIGKILL);
                status
            }
        };
        // Output of background children that keep the pipes open is not waited for long.
        let _ = tokio::time::timeout(DRAIN_WAIT, async {
            while readers.join_next().await.is_some() {}
        })
        .await;
        readers.abort_all();
        let exit = status.as_ref().map_or(-1, |status| exit_code(*status));
        let (state, error) = match (&end, &status) {
            (End::Stopped, _) => (State::Stopped, "stopped".to_owned()),
            (End::TimedOut, _) => (
                State::Fail,
                format!(
                    "`{}` timed out after {} and was killed",
                    command.display(),
                    command.timeout.as_deref().unwrap_or_default()
                ),
            ),
            (End::Exited, Err(err)) => (
                State::Fail,
                format!("cannot wait for `{}`: {err}", command.cmd),
            ),
            (End::Exited, Ok(status)) if status.success() => (State::Complete, String::new()),
            // The supervisor could not start the program: it said why on stderr.
            (End::Exited, Ok(_))
                if supervisor.is_some()
                    && exit == 127
                    && stderr.text().starts_with(crate::SUPERVISOR_CANNOT_START) =>
            {
                let said = stderr.text();
                let said = said
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches(crate::SUPERVISOR_CANNOT_START);
                (State::Fail, format!("cannot start {said}"))
            }
            (End::Exited, Ok(_)) => (
                State::Fail,
                format!("`{}` exited with status {exit}", command.display()),
            ),
        };
        Outcome {
            state,
            exit,
            error,
            stdout: stdout.text(),
            stderr: stderr.text(),
        }
    }
}

/// `shell-args`: runs `cmd` when the request is created. Its stdout must be a JSON object;
/// each arg the node declares in `sets:` is set from the key of that name. When the chain
/// runs, the job completes at once with that output as its stdout.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShellArgsJob {
    /// What the program printed, kept for the job log.
    output: String,
}

/// Output quoted in an error: at most this many characters.
const QUOTE_LIMIT: usize = 2000;

pub(crate) fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_LIMIT).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    format!("{quoted:?}")
}

impl ShellArgsJob {
    /// Runs the program to its end (or its timeout), returning exit code, stdout, stderr.
    fn run_now(command: &Command) -> Result<(i64, String, String), Error> {
        let mut process = std::process::Command::new(&command.cmd);
        std::os::unix::process::CommandExt::process_group(&mut process, 0);
        process
            .args(&command.args)
            .envs(&command.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &command.dir {
            process.current_dir(dir);
        }
        let mut child = process.spawn().map_err(|err| {
            Error::Create(format!("shell-args: cannot start `{}`: {err}", command.cmd))
        })?;
        let pid = Some(child.id());
        let readers: Vec<(Captured, std::thread::JoinHandle<()>)> = [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .map(|pipe| {
            let captured = Captured::default();
            (captured.clone(), drain_thread(pipe, captured))
        })
        .collect();
        let timeout = command.timeout().unwrap_or(SHELL_ARGS_DEFAULT_TIMEOUT);
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= timeout => {
                    signal_group(pid, Signal::SIGKILL);
                    let _ = child.wait();
                    return Err(Error::Create(format!(
                        "shell-args: `{}` did not finish within {}; expected it to print a JSON object and exit",
                        command.display(),
                        proto::duration::format(timeout)
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(err) => {
                    return Err(Error::Create(format!(
                        "shell-args: cannot wait for `{}`: {err}",
                        command.cmd
                    )));
                }
            }
        };
        let drain_deadline = Instant::now() + DRAIN_WAIT;
        for (_, handle) in &readers {
            while !handle.is_finished() && Instant::now() < drain_deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let stdout = readers[0].0.text();
        let stderr = readers[1].0.text();
        Ok((exit_code(status), stdout, stderr))
    }
}

#[async_trait::async_trait]
impl Job for ShellArgsJob {
    fn create(&mut self, args: &mut JobArgs, ctx: &CreateContext) -> Result<(), Error> {
        let command = Command::from_args(super::SHELL_ARGS, args)?;
        let (exit, stdout, stderr) = ShellArgsJob::run_now(&command)?;
        if exit != 0 {
            return Err(Error::Create(format!(
                "shell-args: `{}` exited with status {exit}; expected status 0 and a JSON object on stdout; stderr: {}; stdout: {}",
                command.display(),
                quote(&stderr),
                quote(&stdout)
            )));
        }
        let object = match serde_json::from_str::<Value>(&stdout) {
            Ok(Value::Object(object)) => object,
            Ok(other) => {
                return Err(Error::Create(format!(
                    "shell-args: `{}` printed {}, not a JSON object; expected an object whose keys are the args in `sets:`; output: {}",
                    command.display(),
                    match other {
                        Value::Array(_) => "a list",
                        Value::String(_) => "a string",
                        Value::Number(_) => "a number",
                        Value::Bool(_) => "a boolean",
                        _ => "null",
                    },
                    quote(&stdout)
                )));
            }
            Err(err) => {
                return Err(Error::Create(format!(
                    "shell-args: output of `{}` is not JSON ({err}); expected a JSON object whose keys are the args in `sets:`; output: {}",
                    command.display(),
                    quote(&stdout)
                )));
            }
        };
        let missing: Vec<&str> = ctx
            .sets
            .iter()
            .map(String::as_str)
            .filter(|name| !object.contains_key(*name))
            .collect();
        if !missing.is_empty() {
            let keys: Vec<&str> = object.keys().map(String::as_str).collect();
            return Err(Error::Create(format!(
                "shell-args: output of `{}` has no key {}; expected every arg in `sets:` as a key (it has: {}); output: {}",
                command.display(),
                missing
                    .iter()
                    .map(|m| format!("`{m}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if keys.is_empty() {
                    "no keys".to_owned()
                } else {
                    keys.join(", ")
                },
                quote(&stdout)
            )));
        }
        for name in &ctx.sets {
            args.insert(name.clone(), object[name].clone());
        }
        self.output = stdout;
        Ok(())
    }

    crate::json_state!();

    /// Its program ran when the request was created; running only completes.
    fn durable_start(&self) -> bool {
        false
    }

    async fn run(&mut self, _data: &mut JobArgs, _ctx: RunContext) -> Outcome {
        Outcome {
            stdout: self.output.clone(),
            ..Outcome::complete()
        }
    }
}

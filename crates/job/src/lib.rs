//! Jobs: the [`Job`] and [`Factory`] traits, the factory [`Registry`] and the built-in job
//! types (`noop`, `sleep`, `shell-command`, `shell-args`).
//!
//! A job lives twice. On the Request Manager side the grapher makes it from its job args
//! ([`Job::create`], which may set new args for later nodes) and stores its
//! [`Job::serialize`]d bytes in the chain. On the Job Runner side it is made again from
//! the chain, [`Job::deserialize`]d, and [`Job::run`] with the run-time job data, a
//! cancellation token and a handle for its live status line.

mod builtin;
pub mod external;
mod registry;
mod state;

use std::sync::{Arc, Mutex};

use proto::{JobArgs, State, Stream};
use tokio_util::sync::CancellationToken;

pub use builtin::approval;
pub use builtin::{
    APPROVAL, NoopJob, SLEEP, ShellArgsJob, ShellCommandJob, SleepJob, parse_sleep_duration,
};
pub use registry::{Maker, Registry};
pub use state::{from_json, to_json};

/// What a factory is asked to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobId {
    pub job_type: String,
    pub name: String,
    pub id: String,
    pub request_id: String,
}

/// Why a job could not be made, created, serialized or deserialized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("unknown job type `{job_type}`; expected one of: {known}")]
    UnknownType { job_type: String, known: String },
    /// A job arg is missing or has the wrong shape; the text says which and what was
    /// expected.
    #[error("{0}")]
    Args(String),
    /// Running something at create time failed (shell-args); the text quotes its output.
    #[error("{0}")]
    Create(String),
    #[error("cannot serialize the job: {0}")]
    Serialize(String),
    #[error("cannot read the job's stored bytes: {0}")]
    Deserialize(String),
    /// A job program (`jobs:` in the config) could not be used; the text names it.
    #[error("{0}")]
    Program(String),
}

/// How a Job Runner's refusal of a chain begins when a job's stored bytes cannot be read
/// by its job type there (HTTP 422): the Request Manager shows the request as waiting for
/// a runner that can read them, never as failed.
pub const UNREADABLE_BYTES: &str = "this job runner cannot read the stored bytes";

/// What the grapher tells a job when creating it, besides its args.
#[derive(Debug, Clone, Default)]
pub struct CreateContext {
    /// The names (`sets[].arg`) the node declares that this job sets.
    pub sets: Vec<String>,
}

/// The end of one try of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// COMPLETE on success; FAIL (or anything but COMPLETE and STOPPED) is a failed try;
    /// STOPPED when the job ended because it was cancelled.
    pub state: State,
    pub exit: i64,
    pub error: String,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn complete() -> Outcome {
        Outcome {
            state: State::Complete,
            ..Outcome::default()
        }
    }

    pub fn failed(error: impl Into<String>) -> Outcome {
        Outcome {
            state: State::Fail,
            exit: 1,
            error: error.into(),
            ..Outcome::default()
        }
    }

    pub fn stopped() -> Outcome {
        Outcome {
            state: State::Stopped,
            error: "stopped".to_owned(),
            ..Outcome::default()
        }
    }
}

/// A job's live status line, readable while it runs (`spindle ps`, running status).
#[derive(Debug, Clone, Default)]
pub struct Status(Arc<Mutex<String>>);

impl Status {
    pub fn set(&self, line: impl Into<String>) {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = line.into();
    }

    pub fn get(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// Where a try's output goes while the try runs: the Job Runner sends it on to the
/// Request Manager in batches, so that it can be followed (`spindle log --follow`).
pub trait OutputSink: Send + Sync {
    /// The next `bytes` of `stream` of the try that `tag` names (the tag the sink's
    /// owner gave [`Output::new`]). Must not block: a sink that cannot keep up drops
    /// bytes (readers then see a cut), it never slows the job.
    fn write(&self, tag: u64, stream: Stream, bytes: &[u8]);
}

/// A try's live output: a job writes what its program prints here as it prints it (the
/// whole output still goes in its [`Outcome`]). Writing to [`Output::discard`] does
/// nothing: that is what a try gets where nobody follows output (a job's own tests).
/// One sink serves many tries, each with its own tag, so making an `Output` allocates
/// nothing.
#[derive(Clone)]
pub struct Output {
    sink: Option<Arc<dyn OutputSink>>,
    tag: u64,
}

impl Output {
    pub fn new(sink: Arc<dyn OutputSink>, tag: u64) -> Output {
        Output {
            sink: Some(sink),
            tag,
        }
    }

    pub fn discard() -> Output {
        Output { sink: None, tag: 0 }
    }

    pub fn write(&self, stream: Stream, bytes: &[u8]) {
        if let Some(sink) = &self.sink
            && !bytes.is_empty()
        {
            sink.write(self.tag, stream, bytes);
        }
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.sink {
            Some(_) => write!(f, "Output({})", self.tag),
            None => f.write_str("Output(discard)"),
        }
    }
}

/// What a job gets to run one try.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Cancelled when the job must stop (user stop or runner shutdown); the job should
    /// return promptly with [`State::Stopped`].
    pub cancel: CancellationToken,
    pub status: Status,
    pub output: Output,
    /// The request's secret args (issue #33): their args hold placeholders, which a job
    /// that runs a program replaces in its environment only.
    pub secrets: Secrets,
}

/// A request's secret args as a Job Runner holds them: each arg's placeholder (what its
/// job args hold, [`secret_placeholder`]) and its value. Never serialized; shown as
/// `****`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(Arc<Vec<(String, String)>>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} ****)", self.0.len())
    }
}

/// What a secret arg's value is replaced with wherever it would be stored or shown (its
/// request's args, job args, the job chain): `**** (secret NAME)`.
pub fn secret_placeholder(name: &str) -> String {
    format!("**** (secret {name})")
}

impl Secrets {
    pub fn new(secrets: Vec<(String, String)>) -> Secrets {
        Secrets(Arc::new(secrets))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each (placeholder, value), for a hand-over to a Job Runner.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// The value a placeholder stands for.
    pub fn reveal(&self, text: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(placeholder, _)| placeholder == text)
            .map(|(_, value)| value.as_str())
    }

    /// The placeholder `text` holds, if any (a program's argv must not).
    pub fn placeholder_in<'a>(&'a self, text: &str) -> Option<&'a str> {
        self.0
            .iter()
            .find(|(placeholder, _)| text.contains(placeholder.as_str()))
            .map(|(placeholder, _)| placeholder.as_str())
    }

    /// `text` with every secret value in it shown as `****` (what a job prints).
    pub fn mask(&self, text: &str) -> String {
        let mut masked = text.to_owned();
        for (_, value) in self.0.iter() {
            if !value.is_empty() && masked.contains(value.as_str()) {
                masked = masked.replace(value.as_str(), "****");
            }
        }
        masked
    }

    /// [`Secrets::mask`] of bytes that may not be UTF-8 (live output).
    pub fn mask_bytes<'a>(&self, bytes: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        let found = self.0.iter().any(|(_, value)| {
            !value.is_empty() && bytes.windows(value.len()).any(|w| w == value.as_bytes())
        });
        if !found {
            return std::borrow::Cow::Borrowed(bytes);
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        'outer: while at < bytes.len() {
            for (_, value) in self.0.iter() {
                let value = value.as_bytes();
                if !value.is_empty() && bytes[at..].starts_with(value) {
                    out.extend_from_slice(b"****");
                    at += value.len();
                    continue 'outer;
                }
            }
            out.push(bytes[at]);
            at += 1;
        }
        std::borrow::Cow::Owned(out)
    }
}

/// What the supervisor writes first on stderr when it cannot start a program, followed
/// by the program and the reason: `` `PROGRAM`: REASON ``.
pub const SUPERVISOR_CANNOT_START: &str = "spindle supervisor: cannot start ";

static SUPERVISOR: std::sync::OnceLock<(std::path::PathBuf, &'static str)> =
    std::sync::OnceLock::new();

/// Runs every `shell-command` program as `PROGRAM SUBCOMMAND RUNNER_PID -- CMD ARGS...`
/// from now on: a supervisor that ends the program (and its process group) when the runner
/// that started it dies. The `spindle` binary sets itself. Without one, programs are the
/// runner's own children and outlive a runner that is killed. Set once; later calls are
/// ignored.
pub fn set_supervisor(program: std::path::PathBuf, subcommand: &'static str) {
    let _ = SUPERVISOR.set((program, subcommand));
}

pub(crate) fn supervisor() -> Option<(&'static std::path::Path, &'static str)> {
    SUPERVISOR
        .get()
        .map(|(program, subcommand)| (program.as_path(), *subcommand))
}

/// A job. See the crate documentation for its two lives.
#[async_trait::async_trait]
pub trait Job: Send + Sync {
    /// RM side: reads the job's args and may add or change args; the node's `sets` are
    /// read from the map afterwards.
    fn create(&mut self, args: &mut JobArgs, ctx: &CreateContext) -> Result<(), Error>;

    /// RM side: the bytes stored in the chain for the JR side. May be empty.
    fn serialize(&self) -> Result<Vec<u8>, Error>;

    /// JR side: restores what `serialize` wrote.
    fn deserialize(&mut self, bytes: &[u8]) -> Result<(), Error>;

    /// JR side, after [`Job::deserialize`]: the job's args as the chain holds them (its
    /// inputs before its create step), for a job that reads them when it runs. Most
    /// have what they need in their bytes; the default ignores them.
    fn set_args(&mut self, args: &JobArgs) {
        let _ = args;
    }

    /// JR side: one try. `data` is the job's run-time data, which it may change; on
    /// success it flows to the jobs that run after it.
    async fn run(&mut self, data: &mut JobArgs, ctx: RunContext) -> Outcome;

    /// JR side: whether a try may begin only once the Request Manager has stored that it
    /// began. True (the default) for jobs that act outside the runner — run a program,
    /// call a service: if their runner dies during a try, the store knows that the try
    /// ran, logs it as interrupted and runs the job again as the next try, so no execution
    /// goes unrecorded. Jobs that only change the runner's own state (`noop`, `sleep`)
    /// say false: their tries start at once and are not reported as started, since an
    /// interrupted one left nothing behind (it simply runs again under its number).
    fn durable_start(&self) -> bool {
        true
    }
}

/// Makes jobs by type. Implemented by [`Registry`]; a user's binary registers its own job
/// types there next to the built-ins.
pub trait Factory: Send + Sync {
    fn make(&self, id: &JobId) -> Result<Box<dyn Job>, Error>;

    /// Whether [`Factory::make`] knows `job_type`. A runner refuses a chain with a job of
    /// a type it does not know before anything runs, so that a chain waits for a runner
    /// that has its types (such as one imported from Spin Cycle whose Go jobs are not
    /// deployed yet) rather than failing its first try. True unless the factory says.
    fn knows(&self, job_type: &str) -> bool {
        let _ = job_type;
        true
    }

    /// The approval jobs of the runner this factory serves (a [`Registry`]'s), to hand
    /// answers to; none by default.
    fn approvals(&self) -> Option<&std::sync::Arc<approval::Approvals>> {
        None
    }
}

#[cfg(test)]
mod tests;

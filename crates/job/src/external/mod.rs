//! Job types served by an external program, in any language, over the job protocol
//! (docs/job-protocol.md). The server's config names the program (`jobs:`); Spindle runs
//! it once per call — `describe` at start (the types it serves and their required args),
//! `create` on the Request Manager when a request is made (its args in; the changed args
//! and the job's bytes out, as Spin Cycle's `Create` and `Serialize` do), `run` on the Job
//! Runner for each try (bytes, args and job data in; status lines while it runs; the end
//! and the changed job data out). The program writes its messages on descriptor 3, so
//! its stdout and stderr stay the job's own output.

mod fork;
mod process;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use proto::JobArgs;
use serde::{Deserialize, Serialize};

use crate::{CreateContext, Error, Job, JobId, Outcome, Registry, RunContext};

pub use wire::{PROTOCOL, TypeInfo};

/// How long `describe` may take.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `create` may take unless the config says.
const CREATE_TIMEOUT: Duration = Duration::from_secs(60);
/// Between SIGTERM and SIGKILL when a try is stopped, unless the config says.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// One entry of the config's `jobs:` list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramConfig {
    /// The program: a path, or a name looked up in `PATH`.
    pub program: PathBuf,
    /// Arguments it is always given, before nothing else (the call is in the environment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The job types it serves; absent: asked (`describe`), which also gives their
    /// required args to the linter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// Go duration: how long `create` may take (default 60s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_timeout: Option<String>,
    /// Go duration: how long a stopped try has between SIGTERM and SIGKILL (default 10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_grace: Option<String>,
    /// Whether a Job Runner runs it under its supervisor (default true), which kills the
    /// program's process group if the runner dies. `false` is for programs that do that
    /// themselves when `SPINDLE_JOB_PARENT_PID` is set, as both kits do; it saves the
    /// supervisor's start on every try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervised: Option<bool>,
    /// Whether a Job Runner keeps one process of the program (its fork server) that
    /// forks a process for each try, instead of starting the program anew (default
    /// false): the Python kit's tries then skip the interpreter's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_server: Option<bool>,
}

/// A program ready to be called.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    pub(crate) path: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) create_timeout: Duration,
    pub(crate) stop_grace: Duration,
    /// Run under the supervisor (when the binary has one) rather than guarding itself.
    pub(crate) supervised: bool,
    /// The program's fork server, when its tries are forked by one.
    pub(crate) fork_server: Option<Arc<fork::ForkServer>>,
}

impl Program {
    /// How messages name it.
    pub(crate) fn display(&self) -> String {
        std::iter::once(self.path.display().to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn error(&self, call: &str, what: &str) -> String {
        format!("job program `{}` ({call}): {what}", self.display())
    }
}

fn config_duration(field: &str, value: Option<&str>, default: Duration) -> Result<Duration, Error> {
    match value {
        None => Ok(default),
        Some(text) => proto::duration::parse(text).map_err(|err| {
            Error::Program(format!(
                "jobs: {field}: {text:?} is not a duration ({err}); expected such as 30s or 2m"
            ))
        }),
    }
}

impl Registry {
    /// Adds the job types `config`'s program serves (asking it when the config does not
    /// list them) and the args they require; returns the types. A type that is already
    /// registered (built in, or served by another program) is an error that names both.
    pub fn add_program(&mut self, config: &ProgramConfig) -> Result<Vec<String>, Error> {
        if config.program.as_os_str().is_empty() {
            return Err(Error::Program(
                "jobs: an entry has an empty `program`; expected the path of a job program"
                    .to_owned(),
            ));
        }
        let program = Arc::new(Program {
            path: config.program.clone(),
            args: config.args.clone(),
            create_timeout: config_duration(
                "create_timeout",
                config.create_timeout.as_deref(),
                CREATE_TIMEOUT,
            )?,
            stop_grace: config_duration("stop_grace", config.stop_grace.as_deref(), STOP_GRACE)?,
            supervised: config.supervised.unwrap_or(true),
            fork_server: match (config.fork_server, config.supervised) {
                (Some(true), Some(true)) => {
                    return Err(Error::Program(format!(
                        "jobs: `{}` has `fork_server: true` and `supervised: true`; a fork server guards itself against the Job Runner's death (and its tries against its own), so it is never supervised: drop `supervised`",
                        config.program.display()
                    )));
                }
                (Some(true), _) => Some(Arc::default()),
                _ => None,
            },
        });
        let types = match &config.types {
            Some(types) => types
                .iter()
                .map(|name| TypeInfo {
                    job_type: name.clone(),
                    required: Vec::new(),
                    optional: Vec::new(),
                })
                .collect(),
            None => describe(&program)?,
        };
        if types.is_empty() {
            return Err(Error::Program(match config.types {
                Some(_) => format!(
                    "jobs: `{}` has `types: []`; expected the job types it serves, or leave `types:` out to ask the program",
                    program.display()
                ),
                None => program.error("describe", "serves no job types; expected at least one"),
            }));
        }
        for info in &types {
            if info.job_type.is_empty() {
                return Err(Error::Program(
                    program.error("describe", "names an empty job type"),
                ));
            }
            if self.contains(&info.job_type) {
                self.replace_builtin(&info.job_type, &program, config.types.is_some())?;
            }
            let served = program.clone();
            self.register(&info.job_type, move |id| {
                Box::new(ExternalJob::new(served.clone(), id.clone()))
            });
            let required: Vec<&str> = info.required.iter().map(String::as_str).collect();
            self.require_args(&info.job_type, &required);
            self.programs
                .insert(info.job_type.clone(), program.display());
        }
        Ok(types.into_iter().map(|info| info.job_type).collect())
    }
}

impl Registry {
    /// A program serves `job_type`, which is registered already: it takes the built-in's
    /// place when the program's config entry names the type (`types:`), as a Spin Cycle
    /// team's factory serves `noop`, `sleep` or `shell-command` under those names; any
    /// other case (a type another program serves, a built-in only described, `approval`,
    /// which the Request Manager answers) is an error that says what to do.
    fn replace_builtin(
        &mut self,
        job_type: &str,
        program: &Program,
        named: bool,
    ) -> Result<(), Error> {
        let served_by = |registry: &Registry| registry.programs.get(job_type).cloned();
        let why = match served_by(self) {
            Some(other) => format!("served by `{other}`"),
            None if job_type == crate::APPROVAL => {
                "built in, and answered by the Request Manager: it cannot be replaced".to_owned()
            }
            None if !named => format!(
                "built in; to serve it in the built-in's place, name it in the entry's `types:` list ({job_type} among them)"
            ),
            None => {
                self.replaced.insert(job_type.to_owned());
                return Ok(());
            }
        };
        Err(Error::Program(format!(
            "job type `{job_type}` of job program `{}` is already a job type ({why}); expected each type served once",
            program.display(),
        )))
    }
}

/// Asks a program which job types it serves.
pub fn describe_program(config: &ProgramConfig) -> Result<Vec<TypeInfo>, Error> {
    let program = Program {
        path: config.program.clone(),
        args: config.args.clone(),
        create_timeout: CREATE_TIMEOUT,
        stop_grace: STOP_GRACE,
        supervised: true,
        fork_server: None,
    };
    describe(&program)
}

fn describe(program: &Program) -> Result<Vec<TypeInfo>, Error> {
    let call = wire::Call::Describe { protocol: PROTOCOL };
    process::call_blocking(program, &call, DESCRIBE_TIMEOUT)
        .and_then(|answer| wire::types(&answer))
        .map_err(|err| {
            Error::Program(program.error(
                "describe",
                &format!(
                    "{err}; name its types under `types:` in the config if it cannot list them"
                ),
            ))
        })
}

/// A job whose type a program serves: its bytes are the program's, kept as it wrote
/// them (a chain imported from Spin Cycle holds its Go jobs' own `Serialize` output).
#[derive(Debug, Clone)]
pub struct ExternalJob {
    program: Arc<Program>,
    id: JobId,
    bytes: Vec<u8>,
    args: JobArgs,
}

impl ExternalJob {
    fn new(program: Arc<Program>, id: JobId) -> ExternalJob {
        ExternalJob {
            program,
            id,
            bytes: Vec::new(),
            args: JobArgs::new(),
        }
    }

    fn job_ref(&self) -> wire::JobRef<'_> {
        wire::JobRef {
            job_type: &self.id.job_type,
            name: &self.id.name,
            id: &self.id.id,
            request_id: &self.id.request_id,
        }
    }
}

#[async_trait::async_trait]
impl Job for ExternalJob {
    fn create(&mut self, args: &mut JobArgs, ctx: &CreateContext) -> Result<(), Error> {
        let call = wire::Call::Create {
            protocol: PROTOCOL,
            job: self.job_ref(),
            args,
            sets: &ctx.sets,
        };
        let call_name = format!("create of {} `{}`", self.id.job_type, self.id.name);
        let answer = process::call_blocking(&self.program, &call, self.program.create_timeout)
            .map_err(|err| Error::Create(self.program.error(&call_name, &err)))?;
        let (changed, bytes) = wire::created(&answer)
            .map_err(|err| Error::Create(self.program.error(&call_name, &err)))?;
        if let Some(changed) = changed {
            *args = changed;
        }
        self.bytes = bytes;
        Ok(())
    }

    fn serialize(&self) -> Result<Vec<u8>, Error> {
        Ok(self.bytes.clone())
    }

    fn deserialize(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.bytes = bytes.to_vec();
        Ok(())
    }

    fn set_args(&mut self, args: &JobArgs) {
        self.args = args.clone();
    }

    async fn run(&mut self, data: &mut JobArgs, ctx: RunContext) -> Outcome {
        let call = wire::Call::Run {
            protocol: PROTOCOL,
            job: self.job_ref(),
            bytes: wire::encode(&self.bytes),
            args: &self.args,
            data,
        };
        // A secret arg (its job arg holds its placeholder) reaches the program as
        // `SPINDLE_SECRET_<ARG>` in its environment, never in what it reads (issue #33).
        let secret_env: Vec<(String, String)> = self
            .args
            .iter()
            .filter_map(|(name, value)| {
                let revealed = ctx.secrets.reveal(value.as_str()?)?;
                let upper = crate::builtin::arg_env_name(name);
                let name = upper.replacen("SPINDLE_ARG_", "SPINDLE_SECRET_", 1);
                Some((name, revealed.to_owned()))
            })
            .collect();
        let (outcome, changed) = process::run_try(&self.program, &call, &ctx, &secret_env).await;
        if let Some(changed) = changed {
            *data = changed;
        }
        outcome
    }
}

#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod tests;

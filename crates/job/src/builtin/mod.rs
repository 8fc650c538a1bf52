//! Spindle's built-in job types, so that a team can use Spindle from YAML alone.

pub mod approval;
pub(crate) mod shell;

use std::time::Duration;

use proto::JobArgs;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CreateContext, Error, Job, Outcome, RunContext};

pub(crate) use shell::arg_env_name;
pub use shell::{ShellArgsJob, ShellCommandJob};

pub(crate) const NOOP: &str = "noop";
pub const SLEEP: &str = "sleep";
pub(crate) const SHELL_COMMAND: &str = "shell-command";
pub(crate) const SHELL_ARGS: &str = "shell-args";
pub const APPROVAL: &str = "approval";

/// `noop`: completes at once. Also the type of the chain's begin and end wrapper jobs.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopJob;

#[async_trait::async_trait]
impl Job for NoopJob {
    fn create(&mut self, _args: &mut JobArgs, _ctx: &CreateContext) -> Result<(), Error> {
        Ok(())
    }

    crate::no_state!();

    /// Acts only inside the runner: its tries need not be stored before they start.
    fn durable_start(&self) -> bool {
        false
    }

    async fn run(&mut self, _data: &mut JobArgs, _ctx: RunContext) -> Outcome {
        Outcome::complete()
    }
}

/// `sleep`: waits `duration`, ending early (STOPPED) when stopped.
///
/// Its bytes are Spin Cycle's dev `sleep` job's, `{"duration": N}` with N a Go
/// `time.Duration` (nanoseconds), so that a chain Spindle builds runs on a Spin Cycle Job
/// Runner and one Spin Cycle suspended resumes here. It also reads the form Spindle wrote
/// before (`{"duration": "1.5s"}`, a Go duration string), which older stored chains hold.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SleepJob {
    #[serde(with = "go_duration")]
    duration: Duration,
}

/// A Go `time.Duration` as `encoding/json` writes it (an integer of nanoseconds); read
/// also from a Go duration string.
mod go_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};
    use serde_json::Value;

    pub(super) fn serialize<S: Serializer>(duration: &Duration, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_u64(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Duration, D::Error> {
        match Value::deserialize(from)? {
            Value::Number(number) => match number.as_u64() {
                Some(nanos) => Ok(Duration::from_nanos(nanos)),
                None => Err(D::Error::custom(format!(
                    "duration {number} is not a whole, non-negative number of nanoseconds (a Go time.Duration)"
                ))),
            },
            Value::String(text) => proto::duration::parse(&text)
                .map_err(|err| D::Error::custom(format!("duration {text:?}: {err}"))),
            other => Err(D::Error::custom(format!(
                "duration is {other}; expected nanoseconds (a Go time.Duration, such as 1000000000) or a duration string (such as 1s)"
            ))),
        }
    }
}

/// A sleep duration that is not one, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SleepDurationError(pub String);

/// Reads a sleep duration as Spin Cycle's dev jobs take it — milliseconds, as a number or
/// a string of digits — or as a Go duration such as `500ms`, `1.5s` or `1h2m`.
pub fn parse_sleep_duration(value: &Value) -> Result<Duration, SleepDurationError> {
    let expected = "expected milliseconds (such as 1000) or a duration (such as 500ms, 1.5s, 1h2m)";
    match value {
        Value::Number(number) => match number.as_u64() {
            Some(millis) => Ok(Duration::from_millis(millis)),
            None => Err(SleepDurationError(format!(
                "{number} is not a whole number of milliseconds; {expected}"
            ))),
        },
        Value::String(text) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => text
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|err| SleepDurationError(format!("{text:?}: {err}; {expected}"))),
        Value::String(text) => {
            proto::duration::parse(text).map_err(|err| SleepDurationError(format!("{err}")))
        }
        other => Err(SleepDurationError(format!("found {other}; {expected}"))),
    }
}

#[async_trait::async_trait]
impl Job for SleepJob {
    fn create(&mut self, args: &mut JobArgs, _ctx: &CreateContext) -> Result<(), Error> {
        let Some(value) = args.get("duration") else {
            return Err(Error::Args(
                "job arg `duration` is missing; expected milliseconds (such as 1000) or a duration (such as 500ms)"
                    .to_owned(),
            ));
        };
        let duration = parse_sleep_duration(value)
            .map_err(|err| Error::Args(format!("job arg `duration`: {err}")))?;
        self.duration = duration;
        Ok(())
    }

    crate::json_state!();

    /// Acts only inside the runner: its tries need not be stored before they start.
    fn durable_start(&self) -> bool {
        false
    }

    async fn run(&mut self, _data: &mut JobArgs, ctx: RunContext) -> Outcome {
        ctx.status.set(format!(
            "sleeping {}",
            proto::duration::format(self.duration)
        ));
        tokio::select! {
            () = tokio::time::sleep(self.duration) => Outcome::complete(),
            () = ctx.cancel.cancelled() => Outcome::stopped(),
        }
    }
}

//! `schedules:` in spec files (Spindle's): requests started on a cron schedule.
//!
//! ```yaml
//! schedules:
//!   nightly-backup:
//!     cron: "0 2 * * *"          # 5 fields (minute ...), or 6-7 with seconds first
//!     timezone: Europe/Berlin    # default UTC
//!     request: backup            # a request type
//!     args: {host: db1}          # its args, as `spindle start` takes them
//!     overlap: skip              # the previous run still going: skip (default) or start
//!     missed: skip               # a run missed while Spindle was down: skip (default) or start (late, once)
//! ```

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use proto::JobArgs;

use crate::{Pos, Spanned};

/// One schedule as written.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub name: String,
    pub file: Arc<PathBuf>,
    pub pos: Pos,
    pub cron: Option<Spanned<String>>,
    pub timezone: Option<Spanned<String>>,
    pub request: Option<Spanned<String>>,
    pub args: JobArgs,
    pub overlap: Option<Spanned<String>>,
    pub missed: Option<Spanned<String>>,
}

/// What to do when a run is due while the schedule's previous run still goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    Skip,
    Start,
}

/// What to do with a run that fell due while no Request Manager ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    Skip,
    /// Started late, once (the latest missed run).
    Start,
}

/// A schedule the linter accepted, ready to fire.
#[derive(Debug, Clone)]
pub struct Fires {
    pub name: String,
    pub cron: String,
    pub schedule: cron::Schedule,
    pub timezone: chrono_tz::Tz,
    pub request: String,
    pub args: JobArgs,
    pub overlap: Overlap,
    pub missed: Missed,
}

impl Fires {
    /// The fire times after `after` and at most `until`, oldest first.
    pub fn due(
        &self,
        after: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
    ) -> Vec<chrono::DateTime<chrono::Utc>> {
        self.schedule
            .after(&after.with_timezone(&self.timezone))
            .map(|at| at.with_timezone(&chrono::Utc))
            .take_while(|at| *at <= until)
            .take(1000)
            .collect()
    }

    /// The next fire time after `after`.
    pub fn next(
        &self,
        after: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        self.schedule
            .after(&after.with_timezone(&self.timezone))
            .next()
            .map(|at| at.with_timezone(&chrono::Utc))
    }
}

/// Why a schedule cannot fire: which of its fields, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The field is not given, and what it should hold.
    #[error("`{0}` is missing; expected {1}")]
    Missing(&'static str, &'static str),
    /// The field's value cannot be used.
    #[error("`{field}`: {problem}")]
    Invalid {
        field: &'static str,
        problem: String,
    },
}

impl ScheduleError {
    /// The schedule's field it is about (`cron`, `timezone`, `request`, …).
    pub fn field(&self) -> &'static str {
        match self {
            ScheduleError::Missing(field, _) | ScheduleError::Invalid { field, .. } => field,
        }
    }
}

/// Parses a cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6
/// or 7 with seconds first (and a year last).
pub fn parse_cron(text: &str) -> Result<cron::Schedule, ScheduleError> {
    let invalid = |problem: String| ScheduleError::Invalid {
        field: "cron",
        problem,
    };
    let fields = text.split_whitespace().count();
    let expression = match fields {
        5 => format!("0 {text}"),
        6 | 7 => text.to_owned(),
        n => {
            return Err(invalid(format!(
                "{text:?} has {n} fields; expected 5 (minute hour day-of-month month day-of-week), or 6-7 with seconds first"
            )));
        }
    };
    cron::Schedule::from_str(&expression).map_err(|err| invalid(format!("{text:?}: {err}")))
}

/// Parses a time zone name (`UTC`, `Europe/Berlin`).
pub fn parse_timezone(name: &str) -> Result<chrono_tz::Tz, ScheduleError> {
    name.parse::<chrono_tz::Tz>()
        .map_err(|_| ScheduleError::Invalid {
            field: "timezone",
            problem: format!(
                "unknown time zone {name:?}; expected an IANA name such as UTC or Europe/Berlin"
            ),
        })
}

fn policy<T>(value: Option<&Spanned<String>>, skip: T, start: T) -> Result<T, String> {
    match value.map(|v| v.value.as_str()) {
        None | Some("skip") => Ok(skip),
        Some("start") => Ok(start),
        Some(other) => Err(format!("{other:?}; expected skip or start")),
    }
}

impl Schedule {
    /// The schedule ready to fire, or why it cannot (the linter reports the same).
    pub fn fires(&self) -> Result<Fires, ScheduleError> {
        let cron = self
            .cron
            .as_ref()
            .ok_or(ScheduleError::Missing("cron", "a cron expression"))?;
        let schedule = parse_cron(&cron.value)?;
        let timezone = match &self.timezone {
            Some(tz) => parse_timezone(&tz.value)?,
            None => chrono_tz::UTC,
        };
        let request = self
            .request
            .as_ref()
            .ok_or(ScheduleError::Missing("request", "a request type"))?;
        Ok(Fires {
            name: self.name.clone(),
            cron: cron.value.clone(),
            schedule,
            timezone,
            request: request.value.clone(),
            args: self.args.clone(),
            overlap: policy(self.overlap.as_ref(), Overlap::Skip, Overlap::Start).map_err(
                |problem| ScheduleError::Invalid {
                    field: "overlap",
                    problem,
                },
            )?,
            missed: policy(self.missed.as_ref(), Missed::Skip, Missed::Start).map_err(
                |problem| ScheduleError::Invalid {
                    field: "missed",
                    problem,
                },
            )?,
        })
    }
}

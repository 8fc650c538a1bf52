//! Request, chain and job states: names and the numeric values stored and sent on the wire.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A state of a request, a job chain or a job. The numeric values never change: they are
/// stored in databases and sent in JSON as numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum State {
    /// The zero value; a job that returns it is treated as failed.
    #[default]
    Unknown = 0,
    Pending = 1,
    Running = 2,
    Complete = 3,
    Fail = 4,
    /// Unused (formerly TIMEOUT); never produced.
    Reserved = 5,
    Stopped = 6,
    /// A request or chain suspended by a Job Runner shutdown; never a job state.
    Suspended = 7,
}

/// A state name or number that is not one of [`State`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given:?} is not a valid state; expected one of {expected}")]
pub struct UnknownState {
    given: String,
    expected: &'static str,
}

const NAMES: &str = "UNKNOWN, PENDING, RUNNING, COMPLETE, FAIL, RESERVED, STOPPED, SUSPENDED";

impl State {
    pub const ALL: [State; 8] = [
        State::Unknown,
        State::Pending,
        State::Running,
        State::Complete,
        State::Fail,
        State::Reserved,
        State::Stopped,
        State::Suspended,
    ];

    /// The upper-case name used in query parameters and CLI output (`"RUNNING"`).
    pub fn name(self) -> &'static str {
        match self {
            State::Unknown => "UNKNOWN",
            State::Pending => "PENDING",
            State::Running => "RUNNING",
            State::Complete => "COMPLETE",
            State::Fail => "FAIL",
            State::Reserved => "RESERVED",
            State::Stopped => "STOPPED",
            State::Suspended => "SUSPENDED",
        }
    }

    /// The numeric value sent in JSON and stored in databases.
    pub fn value(self) -> u8 {
        self as u8
    }

    pub fn from_value(value: u8) -> Result<State, UnknownState> {
        State::ALL
            .get(usize::from(value))
            .copied()
            .ok_or_else(|| UnknownState {
                given: value.to_string(),
                expected: "a number from 0 to 7",
            })
    }

    /// Whether a request or chain in this state has ended for good.
    pub fn is_finished(self) -> bool {
        matches!(self, State::Complete | State::Fail | State::Stopped)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for State {
    type Err = UnknownState;

    /// Parses a state name as Spin Cycle writes it (`RUNNING`).
    fn from_str(s: &str) -> Result<State, UnknownState> {
        State::ALL
            .into_iter()
            .find(|state| state.name() == s)
            .ok_or_else(|| UnknownState {
                given: s.to_owned(),
                expected: NAMES,
            })
    }
}

impl Serialize for State {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(self.value())
    }
}

impl<'de> Deserialize<'de> for State {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<State, D::Error> {
        let value = u8::deserialize(deserializer)?;
        State::from_value(value).map_err(serde::de::Error::custom)
    }
}

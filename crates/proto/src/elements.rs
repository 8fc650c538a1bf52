//! Spindle's view of a request's `each:` elements (issue #50): one node's elements summed
//! up ([`ElementsSummary`], a field of a request beside Spin Cycle's) and each element's
//! result ([`ElementStatus`], `GET /api/v1/requests/{id}/elements`).

use serde::{Deserialize, Serialize};

use crate::State;

/// How many failed elements a summary names at most.
pub const NAMED_FAILURES: usize = 20;

/// One `each:` node's elements in a request, by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementsSummary {
    pub node: String,
    pub count: u32,
    #[serde(default)]
    pub complete: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub running: u32,
    #[serde(default)]
    pub stopped: u32,
    #[serde(default)]
    pub pending: u32,
    /// The node's failure budget (`max_failures:`, as a count); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<u32>,
    /// How many waves the node has; absent without `waves:`.
    #[serde(default, skip_serializing_if = "crate::types::is_zero")]
    pub waves: u32,
    /// The failed elements' names, the first [`NAMED_FAILURES`] of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_elements: Vec<String>,
}

impl ElementsSummary {
    /// As people are told: `each-host: 2 of 40 elements failed (budget 4): web-07,
    /// web-31`, or how many completed when none failed.
    pub fn line(&self) -> String {
        let budget = self
            .max_failures
            .map_or_else(String::new, |max| format!(" (budget {max})"));
        if self.failed == 0 {
            let running = if self.running > 0 {
                format!(", {} running", self.running)
            } else {
                String::new()
            };
            return format!(
                "{}: {} of {} elements complete{running}{budget}",
                self.node, self.complete, self.count
            );
        }
        let more = self.failed as usize - self.failed_elements.len().min(self.failed as usize);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!(
            "{}: {} of {} elements failed{budget}: {}{more}",
            self.node,
            self.failed,
            self.count,
            self.failed_elements.join(", ")
        )
    }
}

/// One element of a request: its node, name, wave, state, tries and times.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementStatus {
    pub node: String,
    /// Its own `each:` values ([`crate::args::element_name`]).
    pub name: String,
    /// Its wave (1-based); absent without waves.
    #[serde(default, skip_serializing_if = "crate::types::is_zero")]
    pub wave: u32,
    /// PENDING (not begun), RUNNING, COMPLETE, FAIL or STOPPED.
    pub state: State,
    /// The most tries any of its jobs had.
    #[serde(default)]
    pub tries: u32,
    /// When its first try began and its last ended (Unix nanoseconds; 0: not yet).
    #[serde(default)]
    pub started_at: i64,
    #[serde(default)]
    pub finished_at: i64,
    /// Its jobs' ids, its first job first (their entries are in the request's log).
    #[serde(default)]
    pub jobs: Vec<String>,
    /// The job to show for it: its first that is not a begin or end wrapper.
    #[serde(default)]
    pub job: String,
}

//! Bulk actions: one action on every request a filter finds (Spindle's
//! `POST /api/v1/bulk/{action}`), each authorized and audited as if asked of it alone.

use serde::{Deserialize, Serialize};

use crate::State;

/// What a bulk action does to each request it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BulkAction {
    Stop,
    Retry,
    Pause,
    Resume,
}

impl BulkAction {
    pub const ALL: [BulkAction; 4] = [
        BulkAction::Stop,
        BulkAction::Retry,
        BulkAction::Pause,
        BulkAction::Resume,
    ];

    /// Its name in the path and the CLI (`stop`).
    pub fn name(self) -> &'static str {
        match self {
            BulkAction::Stop => "stop",
            BulkAction::Retry => "retry",
            BulkAction::Pause => "pause",
            BulkAction::Resume => "resume",
        }
    }

    /// The action named `name`, or an error that lists the names.
    pub fn parse(name: &str) -> Result<BulkAction, UnknownAction> {
        BulkAction::ALL
            .into_iter()
            .find(|action| action.name() == name)
            .ok_or_else(|| UnknownAction(name.to_owned()))
    }
}

/// A bulk action's name that is none of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown bulk action '{0}'; expected stop, retry, pause or resume")]
pub struct UnknownAction(pub String);

/// What happened to one request, or would on a dry run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BulkOutcome {
    /// A dry run: the caller may do it (whether the request's state allows it is known
    /// only when it is done).
    Would,
    /// Done, and in the request's audit trail.
    Done,
    /// Not done: the caller may not, or the request's state does not allow it.
    Refused,
}

/// One request a bulk action found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkItem {
    pub id: String,
    #[serde(rename = "type")]
    pub request_type: String,
    /// Its state when found.
    pub state: State,
    pub user: String,
    pub outcome: BulkOutcome,
    /// Why it was refused (the error the single action would have answered), and its
    /// HTTP status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
}

/// The answer of `POST /api/v1/bulk/{action}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkReport {
    pub action: BulkAction,
    pub dry_run: bool,
    /// Every request the filter found, newest first, as `find` lists them.
    pub requests: Vec<BulkItem>,
}

impl BulkReport {
    /// Requests with this outcome.
    pub fn count(&self, outcome: BulkOutcome) -> usize {
        self.requests
            .iter()
            .filter(|item| item.outcome == outcome)
            .count()
    }
}

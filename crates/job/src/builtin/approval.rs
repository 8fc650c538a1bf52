//! `approval`: a gate that waits until someone approves or rejects it.
//!
//! The Request Manager stores every answer (so it survives any runner), tells the runner
//! that runs the request, which hands it to the waiting job through [`answer`], and puts
//! the stored answer in the job's data ([`data_key`]) at every hand-over, so that
//! a try begun after a runner died, a restart or a retry finds it at once. A node's
//! `timeout:` bounds the wait (the try then fails: nobody answered).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use proto::JobArgs;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::{CreateContext, Error, Job, Outcome, RunContext};

/// The key of job `job_id`'s stored answer in its data (job data flows to the jobs
/// after it, so the key names the job: a later approval is not answered by this one's).
pub fn data_key(job_id: &str) -> String {
    format!("spindle.approval.{job_id}")
}

pub use proto::Answer;

/// The try's outcome for an answer: COMPLETE when approved, FAIL when rejected; who and
/// when in its output (and its error when rejected).
fn outcome(answer: &Answer) -> Outcome {
    let said = if answer.comment.is_empty() {
        String::new()
    } else {
        format!(": {}", answer.comment)
    };
    let who = if answer.user.is_empty() {
        "(unnamed)"
    } else {
        answer.user.as_str()
    };
    if answer.approved {
        Outcome {
            stdout: format!("approved by {who} at {}{said}\n", answer.at),
            ..Outcome::complete()
        }
    } else {
        let text = format!("rejected by {who} at {}{said}", answer.at);
        Outcome {
            stdout: format!("{text}\n"),
            ..Outcome::failed(text)
        }
    }
}

/// The approval jobs waiting on one runner, by (request, job), and the answers given to
/// ones that have not begun to wait (their chain runs there, the job comes later). Each
/// [`crate::Registry`] has its own ([`crate::Registry::approvals`]), so that two runners
/// in one process keep theirs apart.
#[derive(Default)]
pub struct Approvals {
    state: Mutex<Waiting>,
    /// Told of each approval job that begins to wait (not when its answer was given
    /// already): (request, job).
    waits: Mutex<Option<mpsc::UnboundedSender<(String, String)>>>,
}

#[derive(Default)]
struct Waiting {
    jobs: HashMap<(String, String), watch::Sender<Option<Answer>>>,
    early: HashMap<(String, String), Answer>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Approvals")
            .field("waiting", &state.jobs.len())
            .field("early", &state.early.len())
            .finish_non_exhaustive()
    }
}

impl Approvals {
    fn state(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// From now on, each approval job that begins to wait for an answer (not when its
    /// answer was given already) is sent as (request, job) to what this answers: the Job
    /// Runner tells its Request Manager, whose notifications say so. A later call takes
    /// the waits from an earlier one's receiver.
    pub fn waits(&self) -> mpsc::UnboundedReceiver<(String, String)> {
        let (sender, receiver) = mpsc::unbounded_channel();
        *self
            .waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sender);
        receiver
    }

    /// Hands `answer` to approval job `job_id` of `request_id`: at once if it waits here
    /// (returns true), else kept for when it begins here.
    pub fn answer(&self, request_id: &str, job_id: &str, answer: Answer) -> bool {
        let mut waiting = self.state();
        let key = (request_id.to_owned(), job_id.to_owned());
        match waiting.jobs.get(&key) {
            Some(sender) => {
                sender.send_replace(Some(answer));
                true
            }
            None => {
                waiting.early.insert(key, answer);
                false
            }
        }
    }

    /// Forgets the answers kept for approval jobs of `request_id` that never began here
    /// (its chain ended on this runner).
    pub fn forget(&self, request_id: &str) {
        self.state()
            .early
            .retain(|(request, _), _| request != request_id);
    }

    /// Registers job `key` as waiting, unless its answer came first (then that answer).
    fn begin(
        self: &Arc<Self>,
        key: (String, String),
    ) -> Result<(Registered, watch::Receiver<Option<Answer>>), Answer> {
        let (sender, answers) = watch::channel(None);
        let mut waiting = self.state();
        if let Some(given) = waiting.early.remove(&key) {
            return Err(given);
        }
        waiting.jobs.insert(key.clone(), sender);
        drop(waiting);
        let sink = self
            .waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sink) = sink.as_ref() {
            let _ = sink.send(key.clone());
        }
        Ok((
            Registered {
                approvals: Arc::clone(self),
                key,
            },
            answers,
        ))
    }
}

/// Removes a waiting job's entry when its try ends (whatever way).
struct Registered {
    approvals: Arc<Approvals>,
    key: (String, String),
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.approvals.state().jobs.remove(&self.key);
    }
}

/// `approval`: args `message` (optional: what the approver is asked) and `roles`
/// (optional list: who may answer, checked by the Request Manager when authentication is
/// on; empty: whoever may start the request).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ApprovalJob {
    message: String,
    #[serde(skip)]
    request_id: String,
    #[serde(skip)]
    job_id: String,
    /// Its runner's approvals.
    #[serde(skip)]
    approvals: Arc<Approvals>,
}

impl ApprovalJob {
    pub fn new(request_id: &str, job_id: &str, approvals: Arc<Approvals>) -> ApprovalJob {
        ApprovalJob {
            request_id: request_id.to_owned(),
            job_id: job_id.to_owned(),
            approvals,
            ..ApprovalJob::default()
        }
    }
}

/// The roles of an approval job's args (`roles`: a list of names, or one name).
pub fn roles(args: &JobArgs) -> Result<Vec<String>, String> {
    match args.get("roles") {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::String(role)) => Ok(vec![role.clone()]),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).ok_or_else(|| {
                    format!("job arg `roles`: found {item}; expected role names (strings)")
                })
            })
            .collect(),
        Some(other) => Err(format!(
            "job arg `roles`: found {other}; expected a list of role names"
        )),
    }
}

#[async_trait::async_trait]
impl Job for ApprovalJob {
    fn create(&mut self, args: &mut JobArgs, _ctx: &CreateContext) -> Result<(), Error> {
        roles(args).map_err(Error::Args)?;
        self.message = match args.get("message") {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(other) => {
                return Err(Error::Args(format!(
                    "job arg `message`: found {other}; expected text"
                )));
            }
        };
        Ok(())
    }

    fn serialize(&self) -> Result<Vec<u8>, Error> {
        crate::to_json(self)
    }

    fn deserialize(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let stored: ApprovalJob = crate::from_json(bytes)?;
        self.message = stored.message;
        Ok(())
    }

    /// It only waits: a try cut short by its runner's end left nothing behind, and the
    /// answer, when given, is the Request Manager's.
    fn durable_start(&self) -> bool {
        false
    }

    async fn run(&mut self, data: &mut JobArgs, ctx: RunContext) -> Outcome {
        if let Some(stored) = data.get(&data_key(&self.job_id)) {
            return match serde_json::from_value::<Answer>(stored.clone()) {
                Ok(answer) => outcome(&answer),
                Err(err) => Outcome::failed(format!("the stored answer is unreadable: {err}")),
            };
        }
        let key = (self.request_id.clone(), self.job_id.clone());
        let (_registered, mut answers) = match self.approvals.begin(key) {
            Ok(waiting) => waiting,
            Err(given) => return outcome(&given),
        };
        ctx.status.set(if self.message.is_empty() {
            "waiting for approval".to_owned()
        } else {
            format!("waiting for approval: {}", self.message)
        });
        tokio::select! {
            answered = answers.wait_for(Option::is_some) => match answered {
                Ok(answer) => outcome(&answer.clone().expect("waited for Some")),
                Err(_) => Outcome::failed("the approval's channel closed"),
            },
            () = ctx.cancel.cancelled() => Outcome::stopped(),
        }
    }
}

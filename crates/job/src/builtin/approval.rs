//! `approval`: a gate that waits until someone approves or rejects it.
//!
//! The Request Manager stores every answer (so it survives any runner), tells the runner
//! that runs the request, which hands it to the waiting job through [`answer`], and puts
//! the stored answer in the job's data ([`data_key`]) at every hand-over, so that
//! a try begun after a runner died, a restart or a retry finds it at once. A node's
//! `timeout:` bounds the wait (the try then fails: nobody answered).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use proto::JobArgs;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

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

/// The approval jobs waiting in this process, by (request, job), and the answers given
/// to ones that have not begun to wait (their chain runs here, the job comes later).
#[derive(Default)]
struct Waiting {
    jobs: HashMap<(String, String), watch::Sender<Option<Answer>>>,
    early: HashMap<(String, String), Answer>,
}

fn waiting() -> &'static Mutex<Waiting> {
    static WAITING: OnceLock<Mutex<Waiting>> = OnceLock::new();
    WAITING.get_or_init(Mutex::default)
}

/// What is told when an approval job begins to wait: (request, job).
type WaitHook = std::sync::Arc<dyn Fn(&str, &str) + Send + Sync>;

fn wait_hook() -> &'static std::sync::RwLock<Option<WaitHook>> {
    static HOOK: OnceLock<std::sync::RwLock<Option<WaitHook>>> = OnceLock::new();
    HOOK.get_or_init(std::sync::RwLock::default)
}

/// Calls `hook` with (request, job) whenever an approval job of this process begins to
/// wait for an answer (not when its answer was given already): the Job Runner tells its
/// Request Manager, whose notifications say so. The last hook set is called; it must
/// return at once.
pub fn on_wait(hook: impl Fn(&str, &str) + Send + Sync + 'static) {
    *wait_hook().write().unwrap_or_else(|p| p.into_inner()) = Some(std::sync::Arc::new(hook));
}

/// Hands `answer` to approval job `job_id` of `request_id`: at once if it waits in this
/// process (returns true), else kept for when it begins here.
pub fn answer(request_id: &str, job_id: &str, answer: Answer) -> bool {
    let mut waiting = waiting().lock().unwrap_or_else(|p| p.into_inner());
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

/// Forgets the answers kept for approval jobs of `request_id` that never began here (its
/// chain ended on this runner).
pub fn forget(request_id: &str) {
    waiting()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .early
        .retain(|(request, _), _| request != request_id);
}

/// Removes a waiting job's entry when its try ends (whatever way).
struct Registered(String, String);

impl Drop for Registered {
    fn drop(&mut self) {
        waiting()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .jobs
            .remove(&(std::mem::take(&mut self.0), std::mem::take(&mut self.1)));
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
}

impl ApprovalJob {
    pub fn new(request_id: &str, job_id: &str) -> ApprovalJob {
        ApprovalJob {
            request_id: request_id.to_owned(),
            job_id: job_id.to_owned(),
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
        let (sender, mut answers) = watch::channel(None);
        {
            let mut waiting = waiting().lock().unwrap_or_else(|p| p.into_inner());
            if let Some(given) = waiting.early.remove(&key) {
                return outcome(&given);
            }
            waiting.jobs.insert(key.clone(), sender);
        }
        let _registered = Registered(key.0, key.1);
        let hook = wait_hook()
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(&self.request_id, &self.job_id);
        }
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

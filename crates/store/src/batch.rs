//! Group commit: many callers hand in creates, starts, finishes, job log entries,
//! progress updates, hand-overs and resumes; one task writes whatever has queued in one transaction
//! ([`Lifecycle::write_batch`](crate::Lifecycle::write_batch): multi-row statements, one commit) and answers every caller
//! once it committed. Nothing waits for a batch to fill: a write that arrives while a
//! batch is being written goes in the next one.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use proto::{Fence, FinishRequest, JobLog, Request, RequestId};
use tokio::sync::{mpsc, oneshot};

use crate::{
    Error, Finished, HandOverRecord, NewRequest, ResumeRecord, StartRequest, Store, SuspendRecord,
    WriteBatch,
};

/// How many times a group commit undone by a deadlock is tried again before its writes
/// hear the error.
const DEADLOCK_RETRIES: usize = 2;

/// How the batcher groups writes.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// At most this many job log entries per transaction.
    pub max_entries: usize,
    /// At most this many creates, starts and finishes (each) per transaction.
    pub max_requests: usize,
}

impl Default for BatchOptions {
    fn default() -> BatchOptions {
        BatchOptions {
            max_entries: 5000,
            max_requests: 1000,
        }
    }
}

type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// A finish as written: whether it ended the request now, and the request as it is then
/// (without its args) when it did.
pub type FinishedNow = (Finished, Option<Request>);

enum Write {
    Create(Box<NewRequest>, Reply<Box<NewRequest>>),
    Start(StartRequest, Reply<bool>),
    Finish(Box<(FinishRequest, Option<Fence>)>, Reply<FinishedNow>),
    Logs(Vec<JobLog>, Option<Fence>, Reply<()>),
    Progress(String, u64, Option<Fence>, Reply<()>),
    Resumed(ResumeRecord, Reply<bool>),
    HandOver(HandOverRecord, Reply<u64>),
    Suspend(Box<SuspendRecord>, Reply<()>),
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Write::Create(new, _) => write!(f, "Create({})", new.request.id),
            Write::Start(start, _) => write!(f, "Start({})", start.request_id),
            Write::Finish(finish, _) => write!(f, "Finish({})", finish.0.request_id),
            Write::Logs(entries, _, _) => write!(f, "Logs({})", entries.len()),
            Write::Progress(id, n, _, _) => write!(f, "Progress({id}, {n})"),
            Write::Resumed(resume, _) => write!(f, "Resumed({})", resume.request_id),
            Write::HandOver(record, _) => write!(f, "HandOver({})", record.request_id),
            Write::Suspend(record, _) => write!(f, "Suspend({})", record.suspended.request_id),
        }
    }
}

/// Writes of many concurrent callers in shared transactions. A write is acknowledged
/// only after the transaction holding it committed. Progress updates of one request that
/// queue together collapse into the latest. Reports that carry a fence are checked
/// against the request's owner in the same transaction.
#[derive(Debug, Clone)]
pub struct Batcher {
    queue: mpsc::UnboundedSender<Write>,
    /// The writer task: kept, so that it is owned (a write it could not finish answers
    /// [`Error::Stopped`], as does every write after it ended).
    writer: Arc<tokio::task::JoinHandle<()>>,
}

impl Batcher {
    /// Starts the writer task on the current tokio runtime. It ends when every clone of
    /// the batcher is dropped.
    pub fn spawn(store: Arc<dyn Store>, options: BatchOptions) -> Batcher {
        let (queue, mut incoming) = mpsc::unbounded_channel::<Write>();
        let writer = tokio::spawn(async move {
            while let Some(first) = incoming.recv().await {
                let mut writes = vec![first];
                let (mut entries, mut requests) = (0, 0);
                while entries < options.max_entries && requests < options.max_requests {
                    let Ok(write) = incoming.try_recv() else {
                        break;
                    };
                    match &write {
                        Write::Logs(more, _, _) => entries += more.len(),
                        Write::Progress(..) => {}
                        _ => requests += 1,
                    }
                    writes.push(write);
                }
                write(store.as_ref(), writes).await;
            }
        });
        Batcher {
            queue,
            writer: Arc::new(writer),
        }
    }

    /// Whether the writer task still runs (it ends when every clone is dropped, or if it
    /// panicked).
    pub fn is_running(&self) -> bool {
        !self.writer.is_finished()
    }

    async fn submit<T>(&self, write: impl FnOnce(Reply<T>) -> Write) -> Result<T, Error> {
        let (reply, answer) = oneshot::channel();
        if self.queue.send(write(reply)).is_err() {
            return Err(Error::Stopped);
        }
        answer.await.unwrap_or(Err(Error::Stopped))
    }

    /// [`Requests::create_request`](crate::Requests::create_request), group-committed; gives the request back once stored.
    pub async fn create_request(&self, new: NewRequest) -> Result<Box<NewRequest>, Error> {
        self.submit(|reply| Write::Create(Box::new(new), reply))
            .await
    }

    /// [`Lifecycle::start_request`](crate::Lifecycle::start_request), group-committed.
    pub async fn start_request(
        &self,
        request_id: &RequestId,
        jr_url: &str,
        owner: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<bool, Error> {
        let start = StartRequest {
            request_id: request_id.to_string(),
            jr_url: jr_url.to_owned(),
            owner: owner.cloned(),
            at,
        };
        self.submit(|reply| Write::Start(start, reply)).await
    }

    /// [`Lifecycle::finish_request`](crate::Lifecycle::finish_request), group-committed; the request as it is now comes back
    /// when this finish ended it.
    pub async fn finish_request(
        &self,
        finish: &FinishRequest,
        fence: Option<&Fence>,
    ) -> Result<FinishedNow, Error> {
        let finish = Box::new((finish.clone(), fence.cloned()));
        self.submit(|reply| Write::Finish(finish, reply)).await
    }

    /// Stores job log entries; returns once they are committed. With `fence`, only if
    /// every request they are about is owned by it ([`Error::Fenced`] otherwise).
    pub async fn insert_job_logs(
        &self,
        entries: Vec<JobLog>,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        let fence = fence.cloned();
        self.submit(|reply| Write::Logs(entries, fence, reply))
            .await
    }

    /// [`SuspendedChains::resumed`](crate::SuspendedChains::resumed), group-committed
    /// (thousands of chains resumed after a restart share transactions).
    pub async fn resumed(
        &self,
        request_id: &RequestId,
        host: &str,
        jr_url: &str,
        owner: Option<&Fence>,
    ) -> Result<bool, Error> {
        let resume = ResumeRecord {
            request_id: request_id.to_string(),
            host: host.to_owned(),
            jr_url: jr_url.to_owned(),
            owner: owner.cloned(),
        };
        self.submit(|reply| Write::Resumed(resume, reply)).await
    }

    /// [`Lifecycle::hand_over`](crate::Lifecycle::hand_over), group-committed (the
    /// suspended chains resumed after a restart share transactions): the new epoch.
    pub async fn hand_over(
        &self,
        request_id: &RequestId,
        expected: proto::State,
        known_tries: &std::collections::BTreeMap<String, u32>,
    ) -> Result<u64, Error> {
        let record = HandOverRecord {
            request_id: request_id.to_string(),
            expected,
            known_tries: known_tries.clone(),
        };
        self.submit(|reply| Write::HandOver(record, reply)).await
    }

    /// [`SuspendedChains::suspend_request`](crate::SuspendedChains::suspend_request),
    /// group-committed (a runner shutting down hands back every chain at once).
    pub async fn suspend_request(
        &self,
        suspended: &proto::SuspendedJobChain,
        fence: Option<&Fence>,
        at: DateTime<Utc>,
    ) -> Result<(), Error> {
        let record = Box::new(SuspendRecord {
            suspended: suspended.clone(),
            fence: fence.cloned(),
            at,
        });
        self.submit(|reply| Write::Suspend(record, reply)).await
    }

    /// Records a request's progress; returns once it is committed. With `fence`, only if
    /// the request is owned by it.
    pub async fn update_progress(
        &self,
        request_id: &str,
        finished_jobs: u64,
        fence: Option<&Fence>,
    ) -> Result<(), Error> {
        let (request_id, fence) = (request_id.to_owned(), fence.cloned());
        self.submit(|reply| Write::Progress(request_id, finished_jobs, fence, reply))
            .await
    }
}

/// Where each write's part of the batch is, to answer it.
enum Pending {
    Create(Reply<Box<NewRequest>>),
    Start(usize, Reply<bool>),
    Finish(usize, Reply<FinishedNow>),
    /// Job log entries `batch.logs[range]`, about these requests, reported under this
    /// fence.
    Logs(
        Vec<String>,
        std::ops::Range<usize>,
        Option<Fence>,
        Reply<()>,
    ),
    /// Progress of this request, reported under this fence.
    Progress(String, Option<Fence>, Reply<()>),
    Resumed(usize, Reply<bool>),
    HandOver(usize, Reply<u64>),
    Suspend(usize, Reply<()>),
}

/// The refusals of a batch, by request and the fence it was reported under.
type Refused = HashMap<(String, Fence), Error>;

/// Writes one batch and answers its writers.
// Long because it is one group commit's three phases over the same lists: sort the
// writes into one batch (keeping who waits for what), write it, and answer each writer
// from the batch's result (or, when the batch failed, from its own write alone).
async fn write(store: &dyn Store, writes: Vec<Write>) {
    let mut batch = WriteBatch::default();
    let mut pending = Vec::with_capacity(writes.len());
    // The latest of each request under each fence (a stale runner's progress must not
    // hide the owner's).
    let mut progress: HashMap<(String, Option<Fence>), u64> = HashMap::new();
    for write in writes {
        match write {
            Write::Create(new, reply) => {
                batch.creates.push(*new);
                pending.push(Pending::Create(reply));
            }
            Write::Start(start, reply) => {
                pending.push(Pending::Start(batch.starts.len(), reply));
                batch.starts.push(start);
            }
            Write::Finish(finish, reply) => {
                pending.push(Pending::Finish(batch.finishes.len(), reply));
                batch.finishes.push(*finish);
            }
            Write::Logs(entries, fence, reply) => {
                // Each request once (a big chain's batch is thousands of entries of one).
                let ids: Vec<String> = entries
                    .iter()
                    .map(|e| e.request_id.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .map(str::to_owned)
                    .collect();
                let from = batch.logs.len();
                batch.logs.extend(entries);
                let run = from..batch.logs.len();
                if let Some(fence) = &fence {
                    batch.log_fences.push((run.clone(), fence.clone()));
                }
                pending.push(Pending::Logs(ids, run, fence, reply));
            }
            Write::Progress(request_id, finished_jobs, fence, reply) => {
                progress.insert((request_id.clone(), fence.clone()), finished_jobs);
                pending.push(Pending::Progress(request_id, fence, reply));
            }
            Write::Resumed(resume, reply) => {
                pending.push(Pending::Resumed(batch.resumes.len(), reply));
                batch.resumes.push(resume);
            }
            Write::HandOver(record, reply) => {
                pending.push(Pending::HandOver(batch.hand_overs.len(), reply));
                batch.hand_overs.push(record);
            }
            Write::Suspend(record, reply) => {
                pending.push(Pending::Suspend(batch.suspends.len(), reply));
                batch.suspends.push(*record);
            }
        }
    }
    batch.progress = progress
        .into_iter()
        .map(|((request_id, fence), n)| (request_id, n, fence))
        .collect();
    let mut written = store.write_batch(&batch).await;
    // A deadlock's victim was undone whole: tried again, as the database asks, rather
    // than every write of it answered "unavailable".
    for _ in 0..DEADLOCK_RETRIES {
        match &written {
            Err(err) if err.is_deadlock() => written = store.write_batch(&batch).await,
            _ => break,
        }
    }
    match written {
        Ok(written) => {
            let mut creates = std::mem::take(&mut batch.creates).into_iter();
            let refused: Refused = written
                .refused
                .into_iter()
                .map(|(request_id, fence, err)| ((request_id, fence), err))
                .collect();
            let mut started = written.started;
            let mut finished = written.finished;
            let mut resumed: Vec<Option<Result<bool, Error>>> =
                written.resumed.into_iter().map(Some).collect();
            let mut handed: Vec<Option<Result<u64, Error>>> =
                written.handed.into_iter().map(Some).collect();
            let mut suspended: Vec<Option<Result<(), Error>>> =
                written.suspended.into_iter().map(Some).collect();
            let mut locked = written.locked.into_iter();
            let mut duplicates = written.duplicates.into_iter();
            for write in pending {
                match write {
                    Pending::Create(reply) => {
                        let mut new = creates.next().expect("one create per pending create");
                        new.locked = locked.next().flatten();
                        new.duplicate_of = duplicates.next().flatten();
                        let _ = reply.send(Ok(Box::new(new)));
                    }
                    Pending::Start(at, reply) => {
                        let res = match started[at].take() {
                            Some(paused) => Ok(paused),
                            // Says why (or starts it, if it was a repeat in this batch).
                            None => start_alone(store, &batch.starts[at]).await,
                        };
                        let _ = reply.send(res);
                    }
                    Pending::Finish(at, reply) => {
                        let res = match finished[at].take() {
                            Some(request) => Ok((Finished::Now, Some(request))),
                            None => finish_alone(store, &batch.finishes[at]).await,
                        };
                        let _ = reply.send(res);
                    }
                    Pending::Logs(ids, _, fence, reply) => {
                        let res = match ids.iter().find_map(|id| refusal_of(&refused, id, &fence)) {
                            None => Ok(()),
                            Some(err) => Err(err),
                        };
                        let _ = reply.send(res);
                    }
                    Pending::Progress(id, fence, reply) => {
                        let res = match refusal_of(&refused, &id, &fence) {
                            None => Ok(()),
                            Some(err) => Err(err),
                        };
                        let _ = reply.send(res);
                    }
                    Pending::Resumed(at, reply) => {
                        let res = resumed[at].take().unwrap_or(Err(Error::Stopped));
                        let _ = reply.send(res);
                    }
                    Pending::HandOver(at, reply) => {
                        let res = handed[at].take().unwrap_or(Err(Error::Stopped));
                        let _ = reply.send(res);
                    }
                    Pending::Suspend(at, reply) => {
                        let res = suspended[at].take().unwrap_or(Err(Error::Stopped));
                        let _ = reply.send(res);
                    }
                }
            }
        }
        Err(err) if err.is_transient() => {
            let err = Arc::new(err);
            let shared = || Error::Batch(Arc::clone(&err));
            for write in pending {
                match write {
                    Pending::Create(reply) => drop(reply.send(Err(shared()))),
                    Pending::Start(_, reply) => drop(reply.send(Err(shared()))),
                    Pending::Finish(_, reply) => drop(reply.send(Err(shared()))),
                    Pending::Logs(_, _, _, reply) | Pending::Progress(_, _, reply) => {
                        drop(reply.send(Err(shared())));
                    }
                    Pending::Resumed(_, reply) => drop(reply.send(Err(shared()))),
                    Pending::HandOver(_, reply) => drop(reply.send(Err(shared()))),
                    Pending::Suspend(_, reply) => drop(reply.send(Err(shared()))),
                }
            }
        }
        // One write's fault (bad data): each is written alone, so that it is the one
        // that fails.
        Err(_) => alone(store, batch, pending).await,
    }
}

/// One start in a transaction of its own.
async fn start_alone(store: &dyn Store, start: &StartRequest) -> Result<bool, Error> {
    let request_id = RequestId::new(start.request_id.clone());
    store
        .start_request(&request_id, &start.jr_url, start.owner.as_ref(), start.at)
        .await
}

/// One finish in a transaction of its own.
async fn finish_alone(
    store: &dyn Store,
    (finish, fence): &(FinishRequest, Option<Fence>),
) -> Result<FinishedNow, Error> {
    let finished = store.finish_request(finish, fence.as_ref()).await?;
    Ok((finished, None))
}

/// The refusal of a report about `request_id` under `fence`, if it was refused (each
/// report gets its own error).
fn refusal_of(refused: &Refused, request_id: &str, fence: &Option<Fence>) -> Option<Error> {
    let fence = fence.as_ref()?;
    Some(
        match refused.get(&(request_id.to_owned(), fence.clone()))? {
            Error::Fenced(text) => Error::Fenced(text.clone()),
            Error::NotFound { what, id } => Error::NotFound {
                what,
                id: id.clone(),
            },
            other => Error::Invalid(other.to_string()),
        },
    )
}

/// A create (with its delivery and locks) in a transaction of its own.
async fn create_alone(store: &dyn Store, new: NewRequest) -> Result<Box<NewRequest>, Error> {
    let batch = WriteBatch {
        creates: vec![new],
        ..WriteBatch::default()
    };
    let written = store.write_batch(&batch).await?;
    let mut new = batch.creates.into_iter().next().expect("the one create");
    new.locked = written.locked.into_iter().next().flatten();
    new.duplicate_of = written.duplicates.into_iter().next().flatten();
    Ok(Box::new(new))
}

/// Writes each of a failed batch's writes in its own transaction.
async fn alone(store: &dyn Store, batch: WriteBatch, pending: Vec<Pending>) {
    let mut creates = batch.creates.into_iter();
    let progress: HashMap<(&str, Option<&Fence>), u64> = batch
        .progress
        .iter()
        .map(|(id, n, fence)| ((id.as_str(), fence.as_ref()), *n))
        .collect();
    for write in pending {
        match write {
            Pending::Create(reply) => {
                let mut new = creates.next().expect("one create per pending create");
                if new.delivery.is_some() {
                    // Its delivery is claimed in the transaction that stores it.
                    let _ = reply.send(create_alone(store, new).await);
                    continue;
                }
                let mut res = store
                    .create_request(&new.request, &new.create_request, new.created.as_ref())
                    .await;
                if res.is_ok() && !new.locks.is_empty() {
                    let taken = store
                        .take_locks(&new.request.id, &new.locks, new.priority, Utc::now())
                        .await;
                    res = taken.map(|taken| new.locked = Some(taken));
                }
                let _ = reply.send(res.map(|()| Box::new(new)));
            }
            Pending::Start(at, reply) => {
                let _ = reply.send(start_alone(store, &batch.starts[at]).await);
            }
            Pending::Finish(at, reply) => {
                let _ = reply.send(finish_alone(store, &batch.finishes[at]).await);
            }
            Pending::Logs(ids, range, fence, reply) => {
                let res = match fenced(store, &ids, fence.as_ref()).await {
                    Ok(()) => store.insert_job_logs(&batch.logs[range]).await,
                    Err(err) => Err(err),
                };
                let _ = reply.send(res);
            }
            Pending::Resumed(at, reply) => {
                let resume = &batch.resumes[at];
                let request_id = RequestId::new(resume.request_id.clone());
                let res = store
                    .resumed(
                        &request_id,
                        &resume.host,
                        &resume.jr_url,
                        resume.owner.as_ref(),
                    )
                    .await;
                let _ = reply.send(res);
            }
            Pending::HandOver(at, reply) => {
                let record = &batch.hand_overs[at];
                let request_id = RequestId::new(record.request_id.clone());
                let res = store
                    .hand_over(&request_id, record.expected, &record.known_tries)
                    .await;
                let _ = reply.send(res);
            }
            Pending::Suspend(at, reply) => {
                let record = &batch.suspends[at];
                let res = store
                    .suspend_request(&record.suspended, record.fence.as_ref(), record.at)
                    .await;
                let _ = reply.send(res);
            }
            Pending::Progress(id, fence, reply) => {
                let res = match fenced(store, std::slice::from_ref(&id), fence.as_ref()).await {
                    Ok(()) => match progress.get(&(id.as_str(), fence.as_ref())) {
                        Some(n) => store.update_progress(&id, *n).await,
                        None => Ok(()),
                    },
                    Err(err) => Err(err),
                };
                let _ = reply.send(res);
            }
        }
    }
}

/// Whether the owners of `ids` accept a report's `fence` (a report without one is
/// believed).
async fn fenced(store: &dyn Store, ids: &[String], fence: Option<&Fence>) -> Result<(), Error> {
    let Some(fence) = fence else {
        return Ok(());
    };
    for id in ids {
        let owner = store.owner(id).await?;
        if !owner.accepts(fence) {
            return Err(owner.refusal(id, fence));
        }
    }
    Ok(())
}

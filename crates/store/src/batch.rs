//! Group commit: many callers hand in job log entries and progress updates; one task
//! writes whatever has queued in one transaction per kind and answers every caller once
//! it committed. Nothing waits for a batch to fill.

use std::collections::HashMap;
use std::sync::Arc;

use proto::JobLog;
use tokio::sync::{mpsc, oneshot};

use crate::{Error, Store};

/// How the batcher groups writes.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// At most this many job log entries per transaction.
    pub max_entries: usize,
}

impl Default for BatchOptions {
    fn default() -> BatchOptions {
        BatchOptions { max_entries: 5000 }
    }
}

type Reply = oneshot::Sender<Result<(), Arc<Error>>>;

enum Write {
    Logs(Vec<JobLog>, Reply),
    Progress(String, u64, Reply),
}

/// Writes job log entries and progress for many concurrent callers in shared
/// transactions. A write is acknowledged only after the transaction holding it committed.
/// Progress updates of one request that queue together collapse into the latest.
#[derive(Debug, Clone)]
pub struct Batcher {
    queue: mpsc::UnboundedSender<Write>,
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Write::Logs(entries, _) => write!(f, "Logs({})", entries.len()),
            Write::Progress(id, n, _) => write!(f, "Progress({id}, {n})"),
        }
    }
}

fn stopped() -> Arc<Error> {
    Arc::new(Error::Stopped)
}

impl Batcher {
    /// Starts the writer task on the current tokio runtime. It ends when every clone of
    /// the batcher is dropped.
    pub fn spawn(store: Arc<dyn Store>, options: BatchOptions) -> Batcher {
        let (queue, mut incoming) = mpsc::unbounded_channel::<Write>();
        tokio::spawn(async move {
            while let Some(first) = incoming.recv().await {
                let mut entries = Vec::new();
                let mut log_replies = Vec::new();
                let mut progress: HashMap<String, u64> = HashMap::new();
                let mut progress_replies = Vec::new();
                let mut next = Some(first);
                while let Some(write) = next.take().or_else(|| incoming.try_recv().ok()) {
                    match write {
                        Write::Logs(more, reply) => {
                            entries.extend(more);
                            log_replies.push(reply);
                        }
                        Write::Progress(request_id, finished_jobs, reply) => {
                            progress.insert(request_id, finished_jobs);
                            progress_replies.push(reply);
                        }
                    }
                    if entries.len() >= options.max_entries {
                        break;
                    }
                }
                if !log_replies.is_empty() {
                    let res = store.insert_job_logs(&entries).await.map_err(Arc::new);
                    for reply in log_replies {
                        let _ = reply.send(res.clone());
                    }
                }
                if !progress_replies.is_empty() {
                    let updates: Vec<(String, u64)> = progress.into_iter().collect();
                    let res = store.update_progress_many(&updates).await.map_err(Arc::new);
                    for reply in progress_replies {
                        let _ = reply.send(res.clone());
                    }
                }
            }
        });
        Batcher { queue }
    }

    async fn submit(&self, write: impl FnOnce(Reply) -> Write) -> Result<(), Arc<Error>> {
        let (reply, answer) = oneshot::channel();
        if self.queue.send(write(reply)).is_err() {
            return Err(stopped());
        }
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Stores job log entries; returns once they are committed.
    pub async fn insert_job_logs(&self, entries: Vec<JobLog>) -> Result<(), Arc<Error>> {
        self.submit(|reply| Write::Logs(entries, reply)).await
    }

    /// Records a request's progress; returns once it is committed.
    pub async fn update_progress(
        &self,
        request_id: &str,
        finished_jobs: u64,
    ) -> Result<(), Arc<Error>> {
        let request_id = request_id.to_owned();
        self.submit(|reply| Write::Progress(request_id, finished_jobs, reply))
            .await
    }
}

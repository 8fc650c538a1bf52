//! A job's locks (issue #34), as the chain runner takes them: asked for before the
//! job's first try, asked again while taken (the reason in the job's status line),
//! released after the job's entries (or by the request's final state); a stop ends the
//! wait; `skip` fails the job.
//! The reporter here keeps a semaphore of its own, as the Request Manager's store does.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proto::{
    FinishRequest, JobChain, JobLock, JobLocksTaken, JobLog, OutputChunk, RequestProgress, State,
    SuspendedJobChain, TakeJobLocks, TryStart,
};

use crate::testing::Kept;
use crate::tests::options;
use crate::{ReportError, Reporter};

/// What the reporter saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Granted(String),
    Logged(String, State),
    Released(String),
}

/// A semaphore of `limit` over every job that asks, first come first served.
#[derive(Debug, Default)]
struct Semaphore {
    limit: usize,
    held: Mutex<(HashSet<String>, VecDeque<String>)>,
    seen: Mutex<Vec<Seen>>,
    asks: Mutex<usize>,
    most_held: Mutex<usize>,
    kept: Kept,
}

#[async_trait::async_trait]
impl Reporter for Semaphore {
    async fn try_starts(&self, starts: &[TryStart]) -> Result<(), ReportError> {
        self.kept.try_starts(starts).await
    }
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        let logged = entries
            .iter()
            .map(|e| Seen::Logged(e.job_id.clone(), e.state));
        self.seen.lock().unwrap().extend(logged);
        self.kept.job_logs(entries).await
    }
    async fn output(&self, chunks: &[OutputChunk]) -> Result<(), ReportError> {
        self.kept.output(chunks).await
    }
    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError> {
        self.kept.progress(progress).await
    }
    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        let logged = finish
            .job_logs
            .iter()
            .map(|e| Seen::Logged(e.job_id.clone(), e.state));
        self.seen.lock().unwrap().extend(logged);
        Reporter::finish(&self.kept, finish).await
    }
    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        self.kept.suspend(suspended).await
    }
    async fn take_job_locks(
        &self,
        _request_id: &str,
        take: &TakeJobLocks,
    ) -> Result<JobLocksTaken, ReportError> {
        *self.asks.lock().unwrap() += 1;
        let mut held = self.held.lock().unwrap();
        let (holders, queue) = &mut *held;
        if holders.contains(&take.job_id) {
            return Ok(granted());
        }
        if !queue.contains(&take.job_id) {
            queue.push_back(take.job_id.clone());
        }
        let ahead = queue.iter().position(|id| *id == take.job_id).unwrap();
        if holders.len() + ahead >= self.limit {
            return Ok(JobLocksTaken {
                granted: false,
                waiting: format!("waiting for lock pool, {ahead} ahead in the queue"),
            });
        }
        queue.retain(|id| *id != take.job_id);
        holders.insert(take.job_id.clone());
        let mut most = self.most_held.lock().unwrap();
        *most = (*most).max(holders.len());
        self.seen
            .lock()
            .unwrap()
            .push(Seen::Granted(take.job_id.clone()));
        Ok(granted())
    }
    async fn release_job_locks(&self, _request_id: &str, job_id: &str) -> Result<(), ReportError> {
        let mut held = self.held.lock().unwrap();
        held.0.remove(job_id);
        held.1.retain(|id| id != job_id);
        self.seen
            .lock()
            .unwrap()
            .push(Seen::Released(job_id.to_owned()));
        Ok(())
    }
}

fn granted() -> JobLocksTaken {
    JobLocksTaken {
        granted: true,
        waiting: String::new(),
    }
}

/// A fan-out of `n` `sleep` jobs of `ms` between `b` and `e`, each in pool `pool`.
fn fan_out(n: usize, ms: u64, when_taken: &str) -> JobChain {
    let mut jobs = BTreeMap::new();
    let mut adjacency = BTreeMap::new();
    let noop = |id: &str| proto::Job {
        id: id.to_owned(),
        name: id.to_owned(),
        job_type: "noop".to_owned(),
        sequence_id: "b".to_owned(),
        state: State::Pending,
        ..proto::Job::default()
    };
    jobs.insert("b".to_owned(), noop("b"));
    jobs.insert("e".to_owned(), noop("e"));
    let mut from_b = Vec::new();
    for i in 0..n {
        let id = format!("s{i}");
        let bytes =
            serde_json::to_vec(&serde_json::json!({"duration": format!("{ms}ms")})).unwrap();
        jobs.insert(
            id.clone(),
            proto::Job {
                id: id.clone(),
                name: id.clone(),
                job_type: "sleep".to_owned(),
                sequence_id: "b".to_owned(),
                state: State::Pending,
                bytes,
                retry: 2,
                locks: vec![JobLock {
                    name: "pool".to_owned(),
                    key: String::new(),
                    limit: 2,
                    when_taken: when_taken.to_owned(),
                    until: String::new(),
                }],
                ..proto::Job::default()
            },
        );
        from_b.push(id.clone());
        adjacency.insert(id, vec!["e".to_owned()]);
    }
    adjacency.insert("b".to_owned(), from_b);
    JobChain {
        request_id: "req".to_owned(),
        jobs,
        adjacency_list: adjacency,
        state: State::Pending,
        finished_jobs: 0,
    }
}

fn factory() -> Arc<dyn job::Factory> {
    Arc::new(job::Registry::builtin())
}

#[tokio::test(start_paused = true)]
async fn jobs_over_a_locks_limit_wait_and_each_releases_after_its_entry() {
    let semaphore = Arc::new(Semaphore {
        limit: 2,
        ..Semaphore::default()
    });
    let handle = crate::run(
        fan_out(6, 500, "queue"),
        factory(),
        semaphore.clone(),
        options(),
    )
    .unwrap();
    // While four wait, the running status says why.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let running = handle.running().await;
    let waiting: Vec<&str> = running
        .iter()
        .map(|status| status.status.as_str())
        .filter(|status| status.starts_with("waiting for lock pool"))
        .collect();
    assert_eq!(waiting.len(), 4, "{running:?}");
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(*semaphore.most_held.lock().unwrap(), 2);
    assert!(*semaphore.asks.lock().unwrap() > 6, "nobody asked again");
    // Each job: granted, then its one entry, then released (the last ones' entries go
    // with the final state, which releases every lock of the request: no release).
    let seen = semaphore.seen.lock().unwrap().clone();
    let mut released = 0;
    for i in 0..6 {
        let id = format!("s{i}");
        let mine: Vec<&Seen> = seen
            .iter()
            .filter(|s| match s {
                Seen::Granted(j) | Seen::Logged(j, _) | Seen::Released(j) => *j == id,
            })
            .collect();
        let granted_then_logged = [
            &Seen::Granted(id.clone()),
            &Seen::Logged(id.clone(), State::Complete),
        ];
        assert_eq!(mine[..2], granted_then_logged, "{seen:?}");
        match mine[2..] {
            [] => {}
            [Seen::Released(j)] if *j == id => released += 1,
            _ => panic!("{id}: {seen:?}"),
        }
    }
    assert!(released >= 4, "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn a_stop_ends_the_wait_without_a_try() {
    let semaphore = Arc::new(Semaphore {
        limit: 1,
        ..Semaphore::default()
    });
    let handle = crate::run(
        fan_out(3, 60_000, "queue"),
        factory(),
        semaphore.clone(),
        options(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(semaphore.held.lock().unwrap().1.len(), 2, "two wait");
    handle.stop().await.unwrap();
    // The final state releases the request's locks (the store's trigger): no release.
    assert_eq!(handle.wait().await.state, State::Stopped);
    // The two that waited never ran a try.
    let logs = semaphore.kept.logs.lock().unwrap();
    let sleeps: Vec<&JobLog> = logs.iter().filter(|l| l.job_type == "sleep").collect();
    assert_eq!(sleeps.len(), 1, "{logs:?}");
    assert_eq!(sleeps[0].state, State::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_skip_lock_that_is_taken_fails_the_job_once_saying_why() {
    let semaphore = Arc::new(Semaphore {
        limit: 2,
        ..Semaphore::default()
    });
    let handle = crate::run(
        fan_out(3, 500, "skip"),
        factory(),
        semaphore.clone(),
        options(),
    )
    .unwrap();
    assert_eq!(handle.wait().await.state, State::Fail);
    let logs = semaphore.kept.logs.lock().unwrap();
    let failed: Vec<&JobLog> = logs.iter().filter(|l| l.state == State::Fail).collect();
    // One job found the pool full: one failed try (its retries not used), why in it.
    assert_eq!(failed.len(), 1, "{logs:?}");
    assert!(
        failed[0].error.starts_with("waiting for lock pool"),
        "{}",
        failed[0].error
    );
    assert_eq!(failed[0].r#try, 1);
}

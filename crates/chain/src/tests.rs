//! The runner behaviours of test-cases.md (J, K, L, M) and the race cases, with fake jobs
//! whose outcome is scripted per try and a paused tokio clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use job::{CreateContext, Factory, Job, JobId, Outcome, RunContext};
use proto::{FinishRequest, JobArgs, JobChain, JobLog, RequestProgress, State, SuspendedJobChain};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::{Options, ReportError, Reporter, RetryPolicy, StopError, resume, run};

/// What a fake job does on one try.
#[derive(Debug, Clone)]
enum Step {
    Complete,
    Fail,
    Unknown,
    /// Returns STOPPED without being asked to stop.
    Stopped,
    Panic,
    /// Sleeps, then does the next step; a stop ends the sleep with STOPPED.
    Sleep(u64, Box<Step>),
    /// Waits for a stop, then keeps going for this many ms and returns FAIL (a job that
    /// is slow to stop).
    SlowToStop(u64),
    /// Adds `key: value` to its job data, then does the next step.
    Data(&'static str, &'static str, Box<Step>),
    /// Sets its live status line, then does the next step.
    Status(&'static str, Box<Step>),
    /// Writes to its live output, then does the next step.
    Print(proto::Stream, &'static str, Box<Step>),
}

fn sleep(ms: u64, then: Step) -> Step {
    Step::Sleep(ms, Box::new(then))
}

/// Scripted jobs: each job id has a list of steps, one per try (the last repeats), and
/// the factory counts concurrency and makes.
#[derive(Default)]
struct Fakes {
    scripts: Mutex<HashMap<String, Vec<Step>>>,
    tries: Mutex<HashMap<String, usize>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    broken: Mutex<Vec<String>>,
    /// Job ids whose factory call, deserialize or drop panics.
    panic_make: Mutex<Vec<String>>,
    panic_deserialize: Mutex<Vec<String>>,
    panic_drop: Mutex<Vec<String>>,
    /// Data each job saw when it ran, by job id (last try).
    seen_data: Mutex<HashMap<String, JobArgs>>,
    /// Jobs whose tries may begin only once their start is stored.
    durable: Mutex<Vec<String>>,
    /// Per job, whether each of its tries found its start stored when it began.
    start_stored: Mutex<HashMap<String, Vec<bool>>>,
    recorder: Mutex<Option<Arc<Recorder>>>,
}

impl Fakes {
    fn script(&self, job_id: &str, steps: Vec<Step>) -> &Fakes {
        self.scripts
            .lock()
            .unwrap()
            .insert(job_id.to_owned(), steps);
        self
    }

    fn max_running(&self) -> usize {
        self.max_running.load(Ordering::SeqCst)
    }
}

struct FakeFactory(Arc<Fakes>);

impl Factory for FakeFactory {
    fn make(&self, id: &JobId) -> Result<Box<dyn Job>, job::Error> {
        if self.0.panic_make.lock().unwrap().contains(&id.id) {
            panic!("forced factory panic");
        }
        if self.0.broken.lock().unwrap().contains(&id.id) {
            return Err(job::Error::UnknownType {
                job_type: id.job_type.clone(),
                known: "fake".to_owned(),
            });
        }
        Ok(Box::new(FakeJob {
            id: id.id.clone(),
            fakes: Arc::clone(&self.0),
        }))
    }
}

struct FakeJob {
    id: String,
    fakes: Arc<Fakes>,
}

impl FakeJob {
    async fn step(&self, step: &Step, data: &mut JobArgs, ctx: &RunContext) -> Outcome {
        let mut step = step.clone();
        loop {
            match step {
                Step::Complete => return Outcome::complete(),
                Step::Fail => return Outcome::failed("scripted failure"),
                Step::Unknown => {
                    return Outcome {
                        state: State::Unknown,
                        ..Outcome::default()
                    };
                }
                Step::Stopped => return Outcome::stopped(),
                Step::Panic => panic!("forced job.Run panic"),
                Step::Sleep(ms, then) => {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ms)) => step = *then,
                        () = ctx.cancel.cancelled() => return Outcome::stopped(),
                    }
                }
                Step::SlowToStop(ms) => {
                    ctx.cancel.cancelled().await;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    return Outcome::failed("stopped slowly");
                }
                Step::Data(key, value, then) => {
                    data.insert(key.to_owned(), json!(value));
                    step = *then;
                }
                Step::Status(line, then) => {
                    ctx.status.set(line);
                    step = *then;
                }
                Step::Print(stream, text, then) => {
                    ctx.output.write(stream, text.as_bytes());
                    step = *then;
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl Job for FakeJob {
    fn create(&mut self, _args: &mut JobArgs, _ctx: &CreateContext) -> Result<(), job::Error> {
        Ok(())
    }
    fn serialize(&self) -> Result<Vec<u8>, job::Error> {
        Ok(Vec::new())
    }
    fn durable_start(&self) -> bool {
        self.fakes.durable.lock().unwrap().contains(&self.id)
    }
    fn deserialize(&mut self, _bytes: &[u8]) -> Result<(), job::Error> {
        if self
            .fakes
            .panic_deserialize
            .lock()
            .unwrap()
            .contains(&self.id)
        {
            panic!("forced deserialize panic");
        }
        Ok(())
    }
    async fn run(&mut self, data: &mut JobArgs, ctx: RunContext) -> Outcome {
        let try_idx = {
            let mut tries = self.fakes.tries.lock().unwrap();
            let n = tries.entry(self.id.clone()).or_insert(0);
            *n += 1;
            *n - 1
        };
        self.fakes
            .seen_data
            .lock()
            .unwrap()
            .insert(self.id.clone(), data.clone());
        let step = {
            let scripts = self.fakes.scripts.lock().unwrap();
            match scripts.get(&self.id) {
                Some(steps) => steps[try_idx.min(steps.len() - 1)].clone(),
                None => Step::Complete,
            }
        };
        if let Some(recorder) = self.fakes.recorder.lock().unwrap().clone() {
            let stored = recorder
                .starts
                .lock()
                .unwrap()
                .iter()
                .any(|start| start.job_id == self.id && start.r#try as usize == try_idx + 1);
            self.fakes
                .start_stored
                .lock()
                .unwrap()
                .entry(self.id.clone())
                .or_default()
                .push(stored);
        }
        let now = self.fakes.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.fakes.max_running.fetch_max(now, Ordering::SeqCst);
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let _leave = Leave(&self.fakes.running);
        self.step(&step, data, &ctx).await
    }
}

impl Drop for FakeJob {
    fn drop(&mut self) {
        // A panic outside the job's own calls: the runner task itself panics.
        if !std::thread::panicking() && self.fakes.panic_drop.lock().unwrap().contains(&self.id) {
            panic!("forced drop panic");
        }
    }
}

/// Records every report; can be told to fail transiently or to be slow.
#[derive(Default)]
struct Recorder {
    logs: Mutex<Vec<JobLog>>,
    finishes: Mutex<Vec<FinishRequest>>,
    suspended: Mutex<Vec<SuspendedJobChain>>,
    progress: Mutex<Vec<u64>>,
    /// Transient failures of the next `job_logs` calls.
    fail_logs: AtomicUsize,
    /// Each call takes this long.
    delay_ms: AtomicUsize,
    /// Every `finish` call fails with this, when set.
    finish_error: Mutex<Option<ReportError>>,
    finish_calls: AtomicUsize,
    /// Live output chunks, each with whether the final state had been reported before it.
    output: Mutex<Vec<(proto::OutputChunk, bool)>>,
    /// Transient failures of the next `output` calls.
    fail_output: AtomicUsize,
    starts: Mutex<Vec<proto::TryStart>>,
    /// Every `try_starts` call fails with this, when set.
    start_error: Mutex<Option<ReportError>>,
    /// Every report is refused as fenced once set.
    fenced: std::sync::atomic::AtomicBool,
    /// Calls made while fenced.
    fenced_calls: AtomicUsize,
    /// `job_logs` calls.
    log_calls: AtomicUsize,
    /// Each `job_logs` call's entries and their text (output and error) in bytes.
    log_call_sizes: Mutex<Vec<(usize, usize)>>,
}

impl Recorder {
    fn refuse(&self) -> Result<(), ReportError> {
        if self.fenced.load(Ordering::SeqCst) {
            self.fenced_calls.fetch_add(1, Ordering::SeqCst);
            return Err(ReportError::fenced("another runner owns the request"));
        }
        Ok(())
    }
}

impl Recorder {
    /// (job id, try, state) of every entry, in order.
    fn tries(&self) -> Vec<(String, u32, State)> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .map(|l| (l.job_id.clone(), l.r#try, l.state))
            .collect()
    }

    fn tries_of(&self, job_id: &str) -> Vec<(u32, State)> {
        self.tries()
            .into_iter()
            .filter(|(id, ..)| id == job_id)
            .map(|(_, t, s)| (t, s))
            .collect()
    }

    fn finishes(&self) -> Vec<State> {
        self.finishes
            .lock()
            .unwrap()
            .iter()
            .map(|f| f.state)
            .collect()
    }
}

#[async_trait::async_trait]
impl Reporter for Recorder {
    async fn try_starts(&self, starts: &[proto::TryStart]) -> Result<(), ReportError> {
        let delay = self.delay_ms.load(Ordering::SeqCst) as u64;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        self.refuse()?;
        if let Some(err) = self.start_error.lock().unwrap().clone() {
            return Err(err);
        }
        self.starts.lock().unwrap().extend_from_slice(starts);
        Ok(())
    }
    async fn job_logs(&self, entries: &[JobLog]) -> Result<(), ReportError> {
        self.log_calls.fetch_add(1, Ordering::SeqCst);
        let text = entries
            .iter()
            .map(|e| e.stdout.len() + e.stderr.len() + e.error.len())
            .sum();
        self.log_call_sizes
            .lock()
            .unwrap()
            .push((entries.len(), text));
        let delay = self.delay_ms.load(Ordering::SeqCst) as u64;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        self.refuse()?;
        if self.fail_logs.load(Ordering::SeqCst) > 0 {
            self.fail_logs.fetch_sub(1, Ordering::SeqCst);
            return Err(ReportError::unavailable("request manager unavailable"));
        }
        self.logs.lock().unwrap().extend_from_slice(entries);
        Ok(())
    }
    async fn output(&self, chunks: &[proto::OutputChunk]) -> Result<(), ReportError> {
        if self.fail_output.load(Ordering::SeqCst) > 0 {
            self.fail_output.fetch_sub(1, Ordering::SeqCst);
            return Err(ReportError::unavailable("request manager unavailable"));
        }
        let finished = !self.finishes.lock().unwrap().is_empty();
        let mut kept = self.output.lock().unwrap();
        kept.extend(chunks.iter().map(|chunk| (chunk.clone(), finished)));
        Ok(())
    }
    async fn progress(&self, progress: &RequestProgress) -> Result<(), ReportError> {
        self.refuse()?;
        self.progress.lock().unwrap().push(progress.finished_jobs);
        Ok(())
    }
    async fn finish(&self, finish: &FinishRequest) -> Result<(), ReportError> {
        self.finish_calls.fetch_add(1, Ordering::SeqCst);
        self.refuse()?;
        if let Some(err) = self.finish_error.lock().unwrap().clone() {
            return Err(err);
        }
        self.logs
            .lock()
            .unwrap()
            .extend_from_slice(&finish.job_logs);
        self.finishes.lock().unwrap().push(finish.clone());
        Ok(())
    }
    async fn suspend(&self, suspended: &SuspendedJobChain) -> Result<(), ReportError> {
        self.refuse()?;
        self.suspended.lock().unwrap().push(suspended.clone());
        Ok(())
    }
}

/// A chain from `"1>2,3 2>4 3>4"`: jobs `j1`.., all in sequence `j1`, PENDING.
fn chain(edges: &str) -> JobChain {
    let mut jobs = BTreeMap::new();
    let mut adjacency_list: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |id: &str| {
        jobs.entry(format!("j{id}")).or_insert_with(|| proto::Job {
            id: format!("j{id}"),
            name: format!("job{id}"),
            job_type: "fake".to_owned(),
            state: State::Pending,
            sequence_id: "j1".to_owned(),
            ..proto::Job::default()
        });
    };
    for edge in edges.split_whitespace() {
        match edge.split_once('>') {
            Some((from, tos)) => {
                add(from);
                for to in tos.split(',') {
                    add(to);
                    adjacency_list
                        .entry(format!("j{from}"))
                        .or_default()
                        .push(format!("j{to}"));
                }
            }
            None => add(edge),
        }
    }
    JobChain {
        request_id: "req".to_owned(),
        jobs,
        adjacency_list,
        state: State::Pending,
        finished_jobs: 0,
    }
}

fn job<'a>(chain: &'a mut JobChain, id: &str) -> &'a mut proto::Job {
    chain.jobs.get_mut(&format!("j{id}")).unwrap()
}

pub(crate) fn options() -> Options {
    Options {
        stop_timeout: Duration::from_secs(10),
        retry: RetryPolicy::default(),
        observer: None,
        paused: false,
        secrets: job::Secrets::default(),
    }
}

fn start(chain: JobChain, fakes: &Arc<Fakes>, recorder: &Arc<Recorder>) -> crate::Handle {
    run(
        chain,
        Arc::new(FakeFactory(Arc::clone(fakes))),
        recorder.clone(),
        options(),
    )
    .expect("valid chain")
}

fn t(id: &str, try_no: u32, state: State) -> (String, u32, State) {
    (format!("j{id}"), try_no, state)
}

#[path = "budget_tests.rs"]
mod budget_tests;
#[path = "control_tests.rs"]
mod control_tests;
#[path = "report_tests.rs"]
mod report_tests;
#[path = "start_tests.rs"]
mod start_tests;
#[path = "timeout_tests.rs"]
mod timeout_tests;
#[path = "traversal_tests.rs"]
mod traversal_tests;
#[path = "validation_tests.rs"]
mod validation_tests;

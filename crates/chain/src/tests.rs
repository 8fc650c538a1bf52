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

// ---- J. chain validation ----

#[test]
fn validation_of_new_and_resumed_chains() {
    assert!(crate::validate::new_chain(&chain("1>2,3 2>4 3>4").into()).is_ok());
    let mut bad = chain("1>2,3 2>4 3>4");
    bad.adjacency_list
        .get_mut("j3")
        .unwrap()
        .push("j7".to_owned());
    let err = crate::validate::new_chain(&bad.clone().into()).unwrap_err();
    assert!(
        err.is_invalid_chain() && err.message.starts_with("invalid adjacency list"),
        "{err}"
    );
    let err = crate::validate::new_chain(&chain("1>3 2>3").into()).unwrap_err();
    assert!(err.message.contains("2 start jobs"), "{err}");
    let err = crate::validate::new_chain(&chain("1>2,3").into()).unwrap_err();
    assert!(err.message.contains("2 end jobs"), "{err}");
    let mut cyclic = chain("1>2 2>3 3>4");
    cyclic
        .adjacency_list
        .get_mut("j3")
        .unwrap()
        .push("j2".to_owned());
    let err = crate::validate::new_chain(&cyclic.clone().into()).unwrap_err();
    assert_eq!(err.message, "chain is cyclic");
    // Jobs are found by their ids: one filed under another id is refused, not misread.
    let mut misfiled = chain("1>2 2>3");
    let job3 = misfiled.jobs.remove("j3").unwrap();
    misfiled.jobs.insert("j0".to_owned(), job3);
    let err = crate::validate::new_chain(&misfiled.clone().into()).unwrap_err();
    assert!(err.is_invalid_chain(), "{err}");
    assert_eq!(
        err.message,
        "invalid job chain: job j3 is filed under id \"j0\"; expected its own id"
    );
    let mut running = chain("1>2");
    job(&mut running, "2").state = State::Running;
    let err = crate::validate::new_chain(&running.clone().into()).unwrap_err();
    assert!(!err.is_invalid_chain());
    assert!(
        err.message
            .contains("invalid job state for new job chain: RUNNING (2), job job2 (ID j2)"),
        "{err}"
    );
    let mut resumed = chain("1>2");
    job(&mut resumed, "1").state = State::Complete;
    assert!(
        crate::validate::resumed_chain(&resumed.clone().into()).is_err(),
        "finishedJobs must match"
    );
    resumed.finished_jobs = 1;
    assert!(crate::validate::resumed_chain(&resumed.clone().into()).is_ok());
    job(&mut resumed, "2").state = State::Fail;
    assert!(
        crate::validate::resumed_chain(&resumed.clone().into())
            .unwrap_err()
            .message
            .contains("must be PENDING, COMPLETE, or STOPPED")
    );
}

/// A chain with every field of a job set somewhere: durations, args, data, `each`,
/// bytes, a `parallel` window, tries.
fn full_chain() -> JobChain {
    let mut c = chain("1>2,3 2>4 3>4");
    let j1 = job(&mut c, "1");
    j1.sequence_retry = 2;
    j1.sequence_retry_wait = "1s".to_owned();
    j1.sequence_timeout = "1m".to_owned();
    j1.parallel = 1;
    let j2 = job(&mut c, "2");
    j2.retry = 3;
    j2.retry_wait = "250ms".to_owned();
    j2.timeout = "5s".to_owned();
    j2.bytes = b"\x00serialized\xff".to_vec();
    j2.args.insert("host".to_owned(), json!("db1"));
    j2.each.insert("host".to_owned(), json!("db1"));
    j2.tries = 1;
    job(&mut c, "3")
        .data
        .insert("key".to_owned(), json!({"nested": [1, 2]}));
    c
}

/// The runner's form of a chain, validated, as a chain again.
fn round_trip(incoming: crate::Incoming) -> JobChain {
    let edges = crate::validate::new_chain(&incoming).expect("valid chain");
    crate::state::Chain::new(
        incoming,
        edges,
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
    )
    .expect("valid waits")
    .job_chain(State::Pending)
}

#[test]
fn a_chain_decoded_into_the_runners_form_is_the_chain_sent() {
    let sent = full_chain();
    let text = serde_json::to_string(&sent).unwrap();
    let decoded: crate::Incoming = serde_json::from_str(&text).unwrap();
    assert_eq!(decoded.request_id(), "req");
    assert_eq!(decoded.len(), 4);
    assert_eq!(round_trip(decoded), sent);
    // From a `proto::JobChain` too (the in-process hand-over).
    assert_eq!(round_trip(sent.clone().into()), sent);
}

#[test]
fn a_hand_over_in_any_field_order_decodes_alike() {
    let sent = full_chain();
    let value = serde_json::to_value(&sent).unwrap();
    // The adjacency list first, the jobs in reverse order, fields the runner does not
    // know: the same chain.
    let jobs: Vec<String> = sent
        .jobs
        .keys()
        .rev()
        .map(|id| {
            format!(
                "{}:{}",
                serde_json::to_string(id).unwrap(),
                value["jobs"][id]
            )
        })
        .collect();
    let text = format!(
        r#"{{"adjacencyList":{},"extra":[1,{{"a":2}}],"jobs":{{{}}},"requestId":"req","state":1,"finishedJobs":0}}"#,
        value["adjacencyList"],
        jobs.join(",")
    );
    let decoded: crate::Incoming = serde_json::from_str(&text).unwrap();
    assert_eq!(round_trip(decoded), sent);
    // Null jobs and adjacency list: an empty chain, as `proto::JobChain` reads them.
    let empty: crate::Incoming =
        serde_json::from_str(r#"{"requestId":"r","jobs":null,"adjacencyList":null}"#).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn a_malformed_hand_over_is_refused_with_where_and_what() {
    let refuse = |text: &str| {
        serde_json::from_str::<crate::Incoming>(text)
            .unwrap_err()
            .to_string()
    };
    assert!(refuse(r#"{"jobs":{}}"#).contains("missing field `requestId`"));
    assert!(refuse(r#"{"requestId":"r","jobs":{},"jobs":{}}"#).contains("duplicate field `jobs`"));
    let err = refuse(r#"{"requestId":"r","jobs":{"j1":{"id":"j1","type":"t","retry":"x"}}}"#);
    assert!(
        err.contains("invalid type: string \"x\", expected u32"),
        "{err}"
    );
    assert!(err.contains("line 1 column"), "{err}");
    let err = refuse(r#"{"requestId":"r","jobs":[]}"#);
    assert!(err.contains("expected a map of job ids to jobs"), "{err}");
    let err = refuse(r#"{"requestId":"r","jobs":{},"adjacencyList":{"a":"b"}}"#);
    assert!(err.contains("expected a list of job ids"), "{err}");
    // A structure that decodes but cannot run is the validation's to refuse.
    let invalid = |text: &str| {
        let decoded: crate::Incoming = serde_json::from_str(text).unwrap();
        let err = crate::validate::new_chain(&decoded).unwrap_err();
        assert!(err.is_invalid_chain(), "{err}");
        err.message
    };
    // A chain of jobs filed as (key, id), with an adjacency list before or after them.
    let text = |jobs: &[(&str, &str)], list: &str, list_first: bool| {
        let jobs: Vec<String> = jobs
            .iter()
            .map(|(key, id)| format!(r#""{key}":{{"id":"{id}","type":"t","state":1}}"#))
            .collect();
        let (jobs, list) = (
            format!(r#""jobs":{{{}}}"#, jobs.join(",")),
            format!(r#""adjacencyList":{list}"#),
        );
        match list_first {
            true => format!(r#"{{{list},"requestId":"r",{jobs}}}"#),
            false => format!(r#"{{"requestId":"r",{jobs},{list}}}"#),
        }
    };
    let cases = [
        (
            &[("a", "a"), ("b", "a")][..],
            r#"{"a":["b"]}"#,
            false,
            "invalid job chain: job a is filed under id \"b\"; expected its own id",
        ),
        // A key given twice is two jobs with one id, not the last one silently.
        (
            &[("a", "a"), ("a", "a")][..],
            "{}",
            false,
            "invalid job chain: two jobs have id \"a\"; expected each id once",
        ),
        (
            &[("a", "a"), ("b", "b")][..],
            r#"{"a":["c"]}"#,
            false,
            "invalid adjacency list: some jobs exist in the adjacency list but not in the chain's jobs",
        ),
        // The adjacency list first: the unknown job is found when the jobs arrive.
        (
            &[("a", "a"), ("b", "b")][..],
            r#"{"c":["b"]}"#,
            true,
            "invalid adjacency list: some jobs exist in the adjacency list but not in the chain's jobs",
        ),
    ];
    for (jobs, list, list_first, expected) in cases {
        assert_eq!(
            invalid(&text(jobs, list, list_first)),
            expected,
            "{jobs:?} {list}"
        );
    }
}

#[test]
fn jobs_of_one_name_share_it_in_the_runners_form() {
    let mut c = chain("1>2,3 2>4 3>4");
    for id in ["2", "3"] {
        job(&mut c, id).name = "same".to_owned();
    }
    let decoded = crate::Incoming::from(c);
    let (j2, j3) = (&decoded.jobs[1], &decoded.jobs[2]);
    assert_eq!((&*j2.name, &*j3.name), ("same", "same"));
    assert!(Arc::ptr_eq(&j2.name, &j3.name));
    assert!(Arc::ptr_eq(&j2.job_type, &j3.job_type));
    assert!(Arc::ptr_eq(&j2.sequence_id, &decoded.jobs[0].sequence_id));
    // Jobs that set no duration carry none.
    assert!(decoded.jobs.iter().all(|job| job.durations.is_none()));
}

#[test]
fn runnable_and_sequence_helpers() {
    let mut c = chain("1>2,3 2>4,5 3>4");
    for (id, state) in [
        ("1", State::Complete),
        ("2", State::Complete),
        ("3", State::Stopped),
    ] {
        job(&mut c, id).state = state;
    }
    c.finished_jobs = 2;
    // Two end jobs: not a chain a runner accepts, but the helpers work on any graph.
    let c = crate::Incoming::from(c);
    let edges = crate::validate::edges(&c).expect("known ids");
    let state = crate::state::Chain::new(
        c,
        edges,
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::from([("j1".to_owned(), 3)]),
    )
    .expect("valid waits");
    let ids: Vec<&str> = state
        .indices()
        .filter(|&i| state.is_runnable(i))
        .map(|i| state.jobs[i].id.as_str())
        .collect();
    assert_eq!(ids, ["j5"]);
    let find = |id: &str| state.indices().find(|&i| state.jobs[i].id == id).unwrap();
    let (j1, j2) = (find("j1"), find("j2"));
    let sequence = state.sequence_started_by(j1).expect("j1 starts a sequence");
    assert_eq!(state.sequence_of[j2], Some(sequence));
    assert!(state.sequence_started_by(j2).is_none());
    assert!(state.in_sequence(j2, sequence));
    // sequenceRetry 0, 3 tries: cannot retry.
    assert!(!state.can_retry(Some(sequence)));
}

// ---- L. traversal ----

#[tokio::test(start_paused = true)]
async fn diamond_completes_with_one_entry_per_job() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(100, Step::Complete)])
        .script("j3", vec![sleep(100, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(end.finished_jobs, 4);
    let mut tries = recorder.tries();
    tries.sort();
    assert_eq!(
        tries,
        [
            t("1", 1, State::Complete),
            t("2", 1, State::Complete),
            t("3", 1, State::Complete),
            t("4", 1, State::Complete)
        ]
    );
    assert_eq!(recorder.finishes(), [State::Complete]);
    assert_eq!(recorder.finishes.lock().unwrap()[0].finished_jobs, 4);
    assert!(recorder.progress.lock().unwrap().iter().all(|n| *n <= 4));
    // Both branches ran at once.
    assert_eq!(fakes.max_running(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failure_ends_the_chain_after_independent_branches_finish() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j3", vec![Step::Fail])
        .script("j2", vec![sleep(5_000, Step::Complete)]);
    let started = Instant::now();
    let end = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder)
        .wait()
        .await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(5),
        "job2 finished first"
    );
    assert_eq!(recorder.tries_of("j2"), [(1, State::Complete)]);
    assert_eq!(recorder.tries_of("j3"), [(1, State::Fail)]);
    assert!(recorder.tries_of("j4").is_empty(), "job4 never ran");
    assert_eq!(recorder.finishes(), [State::Fail]);
}

#[tokio::test(start_paused = true)]
async fn empty_chain_completes_at_once() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let empty = JobChain {
        request_id: "req".to_owned(),
        ..JobChain::default()
    };
    let end = start(empty, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
}

// ---- K. job retries ----

#[tokio::test(start_paused = true)]
async fn job_retries_until_out_of_tries() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 2;
    job(&mut c, "2").retry_wait = "30s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Fail), (3, State::Fail)]
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(60),
        "two waits of 30s"
    );
}

/// What an observer was told.
#[derive(Debug, Default)]
struct Watcher {
    started: AtomicUsize,
    ended: AtomicUsize,
    /// (job, try, state, retry) per entry.
    tries: Mutex<Vec<(String, u32, State, bool)>>,
    backlogs: Mutex<Vec<usize>>,
    failures: Mutex<Vec<crate::ReportErrorKind>>,
}

impl crate::Observer for Watcher {
    fn job_started(&self) {
        self.started.fetch_add(1, Ordering::SeqCst);
    }
    fn job_ended(&self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
    }
    fn try_logged(&self, entry: &JobLog, retry: bool) {
        self.tries
            .lock()
            .unwrap()
            .push((entry.job_id.clone(), entry.r#try, entry.state, retry));
    }
    fn backlog(&self, reports: usize) {
        self.backlogs.lock().unwrap().push(reports);
    }
    fn delivery_failed(&self, kind: crate::ReportErrorKind) {
        self.failures.lock().unwrap().push(kind);
    }
}

/// The observer hears of every job's start and end, each try once with whether it was
/// a retry, failed deliveries, and a backlog that ends at zero.
#[tokio::test(start_paused = true)]
async fn an_observer_hears_jobs_tries_and_deliveries() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // Jobs that take longer than the delivery's linger, so that entries go on their own.
    fakes.script("j1", vec![sleep(50, Step::Complete)]);
    fakes.script("j2", vec![sleep(50, Step::Fail), sleep(50, Step::Complete)]);
    fakes.script("j3", vec![sleep(50, Step::Complete)]);
    recorder.fail_logs.store(2, Ordering::SeqCst);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    let watcher = Arc::new(Watcher::default());
    let end = run(
        c,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder.clone(),
        Options {
            observer: Some(watcher.clone()),
            ..options()
        },
    )
    .unwrap()
    .wait()
    .await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(watcher.started.load(Ordering::SeqCst), 3);
    assert_eq!(watcher.ended.load(Ordering::SeqCst), 3);
    let tries = watcher.tries.lock().unwrap().clone();
    assert_eq!(
        tries,
        [
            ("j1".to_owned(), 1, State::Complete, false),
            ("j2".to_owned(), 1, State::Fail, false),
            ("j2".to_owned(), 2, State::Complete, true),
            ("j3".to_owned(), 1, State::Complete, false),
        ]
    );
    assert_eq!(
        *watcher.failures.lock().unwrap(),
        [crate::ReportErrorKind::Unavailable; 2],
        "the two failed job log deliveries"
    );
    let backlogs = watcher.backlogs.lock().unwrap().clone();
    assert!(backlogs.iter().any(|&n| n > 0), "{backlogs:?}");
    assert_eq!(backlogs.last(), Some(&0), "{backlogs:?}");
}

#[tokio::test(start_paused = true)]
async fn job_succeeds_on_its_fourth_try() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script(
        "j1",
        vec![Step::Fail, Step::Fail, Step::Unknown, Step::Complete],
    );
    let mut c = chain("1");
    job(&mut c, "1").retry = 4;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j1"),
        [
            (1, State::Fail),
            (2, State::Fail),
            (3, State::Unknown),
            (4, State::Complete)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_panicking_job_is_a_failed_try() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j1", vec![Step::Panic]);
    let mut c = chain("1");
    job(&mut c, "1").retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(logs.len(), 2);
    for (idx, log) in logs.iter().enumerate() {
        assert_eq!(log.r#try, idx as u32 + 1);
        assert_eq!((log.state, log.exit), (State::Fail, 1));
        assert_eq!(log.error, "panic from job.Run: forced job.Run panic");
        assert!(log.started_at > 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_that_cannot_be_made_fails_with_a_log_entry() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.broken.lock().unwrap().push("j1".to_owned());
    let end = start(chain("1"), &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(logs.len(), 1);
    assert_eq!((logs[0].r#try, logs[0].state), (1, State::Fail));
    assert!(
        logs[0]
            .error
            .starts_with("problem creating job runner: unknown job type `fake`"),
        "{}",
        logs[0].error
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_is_handled_like_fail() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Unknown, Step::Complete]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(
        end.state,
        State::Complete,
        "UNKNOWN triggered the sequence retry"
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Unknown), (2, State::Complete)]
    );
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Complete), (2, State::Complete)]
    );
}

// ---- data ----

#[tokio::test(start_paused = true)]
async fn job_data_flows_from_parents_to_children() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j1", vec![Step::Data("k1", "v1", Box::new(Step::Complete))])
        .script("j2", vec![Step::Data("k2", "v2", Box::new(Step::Complete))])
        .script("j3", vec![Step::Data("k3", "v3", Box::new(Step::Fail))]);
    let end = start(chain("1>2,3 2>4 3>4 4>5"), &fakes, &recorder)
        .wait()
        .await;
    assert_eq!(end.state, State::Fail);
    let seen = fakes.seen_data.lock().unwrap();
    assert_eq!(
        seen["j2"],
        json!({"k1": "v1"}).as_object().unwrap().clone().into()
    );
    assert_eq!(
        seen["j3"],
        json!({"k1": "v1"}).as_object().unwrap().clone().into()
    );
    assert!(!seen.contains_key("j4"), "job4 waits on the failed job3");
}

// ---- §7 sequence retries ----

#[tokio::test(start_paused = true)]
async fn sequence_retry_counter_example_of_runner_md() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "2s".to_owned();
    job(&mut c, "2").retry = 2;
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Complete), (2, State::Complete)]
    );
    let b: Vec<u32> = recorder
        .tries_of("j2")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        b,
        [1, 2, 3, 4, 5, 6],
        "try numbers continue across the sequence retry"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(
        end.finished_jobs, 1,
        "job1 completed on the retry; job3 never ran"
    );
}

#[tokio::test(start_paused = true)]
async fn sequence_retry_without_wait_is_immediate_and_can_succeed() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "0s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(end.finished_jobs, 3);
}

/// Spin Cycle reset a sibling that was still running; Spindle stops it first.
#[tokio::test(start_paused = true)]
async fn a_job_failing_while_a_sibling_in_its_sequence_runs() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(100, Step::Fail), Step::Complete])
        .script(
            "j3",
            vec![sleep(60_000, Step::Complete), sleep(1_000, Step::Complete)],
        );
    let mut c = chain("1>2,3 2>4 3>4");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "1s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j3"),
        [(1, State::Stopped), (2, State::Complete)]
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Complete)]
    );
    assert_eq!(recorder.tries_of("j4"), [(1, State::Complete)]);
    // 0.1s to the failure, 1s wait, 1s for job3's second run.
    assert_eq!(started.elapsed(), Duration::from_millis(2_100));
    assert_eq!(end.finished_jobs, 4);
}

/// Outer sequence j1 (retry 1) holds inner sequence j3 (retry 1, jobs j3 → j4 → j5) and
/// job j6 after it. The inner budget is spent once, then the outer sequence restarts
/// (j6 fails once) and the inner budget is whole again.
#[tokio::test(start_paused = true)]
async fn nested_sequence_budgets_reset_when_the_outer_sequence_restarts() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script(
            "j4",
            vec![Step::Fail, Step::Complete, Step::Fail, Step::Complete],
        )
        .script("j6", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2 2>3 3>4 4>5 5>6 6>7");
    job(&mut c, "1").sequence_retry = 1;
    for id in ["3", "4", "5"] {
        job(&mut c, id).sequence_id = "j3".to_owned();
    }
    job(&mut c, "3").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    let j4: Vec<(u32, State)> = recorder.tries_of("j4");
    assert_eq!(
        j4,
        [
            (1, State::Fail),
            (2, State::Complete),
            (3, State::Fail),
            (4, State::Complete)
        ]
    );
    assert_eq!(
        recorder.tries_of("j6"),
        [(1, State::Fail), (2, State::Complete)]
    );
}

// ---- parallel windows ----

#[tokio::test(start_paused = true)]
async fn parallel_is_a_sliding_window() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // j1 → j2 (repeat begin, parallel 2) → pieces j3..j7 → j8 (repeat end) → j9
    let mut c = chain("1>2 2>3,4,5,6,7 3>8 4>8 5>8 6>8 7>8 8>9");
    job(&mut c, "2").parallel = 2;
    fakes.script("j3", vec![sleep(3_000, Step::Complete)]);
    for id in ["j4", "j5", "j6", "j7"] {
        fakes.script(id, vec![sleep(1_000, Step::Complete)]);
    }
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(fakes.max_running(), 2);
    // Batches of 2 would take 3 + 1 + 1 = 5 s; a sliding window runs the four 1 s
    // pieces one after another beside the 3 s one.
    assert_eq!(started.elapsed(), Duration::from_secs(4));
}

// ---- running status ----

#[tokio::test(start_paused = true)]
async fn running_status_lists_running_jobs_with_try_and_status_line() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script(
            "j2",
            vec![Step::Status(
                "copying",
                Box::new(sleep(10_000, Step::Complete)),
            )],
        )
        .script(
            "j3",
            vec![
                Step::Status("checking", Box::new(Step::Fail)),
                sleep(10_000, Step::Complete),
            ],
        );
    let mut c = chain("1>2,3 2>4 3>4");
    job(&mut c, "3").retry = 1;
    job(&mut c, "3").retry_wait = "2s".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let running = handle.running().await;
    let summary: Vec<(String, u32, State, String)> = running
        .iter()
        .map(|s| (s.job_id.clone(), s.r#try, s.state, s.status.clone()))
        .collect();
    assert_eq!(summary.len(), 2, "{summary:?}");
    assert!(summary.contains(&("j2".to_owned(), 1, State::Running, "copying".to_owned())));
    assert!(summary.contains(&(
        "j3".to_owned(),
        1,
        State::Running,
        "(retry sleep) checking".to_owned()
    )));
    assert!(
        running
            .iter()
            .all(|s| s.started_at > 0 && s.request_id == "req")
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let running = handle.running().await;
    let j3 = running.iter().find(|s| s.job_id == "j3").unwrap();
    assert_eq!(j3.r#try, 2);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert!(handle.running().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn running_first_describes_only_the_oldest_and_counts_them_all() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j2", "j3", "j4", "j5"] {
        fakes.script(id, vec![sleep(10_000, Step::Complete)]);
    }
    let handle = start(chain("1>2,3,4,5 2>6 3>6 4>6 5>6"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let all = handle.running().await;
    assert_eq!(all.len(), 4, "{all:?}");
    let (first, count) = handle.running_first(2).await;
    assert_eq!(count, 4);
    assert_eq!(first, all[..2]);
    let (none, count) = handle.running_first(0).await;
    assert!(none.is_empty());
    assert_eq!(count, 4);
    let (every, _) = handle.running_first(10).await;
    assert_eq!(every, all);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(handle.running_first(2).await, (Vec::new(), 0));
}

// ---- §9 stop ----

#[tokio::test(start_paused = true)]
async fn stop_cancels_running_jobs_and_reports_stopped() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(60_000, Step::Complete)])
        .script("j3", vec![sleep(60_000, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let end = handle.stop().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(end.state, State::Stopped);
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
    assert_eq!(recorder.tries_of("j3"), [(1, State::Stopped)]);
    assert!(recorder.tries_of("j4").is_empty());
    assert_eq!(recorder.finishes(), [State::Stopped]);
    // Stopping again is a no-op.
    assert_eq!(handle.stop().await.unwrap().state, State::Stopped);
    assert_eq!(recorder.finishes(), [State::Stopped]);
}

#[tokio::test(start_paused = true)]
async fn stop_while_a_job_ignores_it_for_a_while() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::SlowToStop(3_000)]);
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let end = handle.stop().await.unwrap();
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "stop waits for the job"
    );
    assert_eq!(
        end.state,
        State::Stopped,
        "a FAIL after a stop counts as stopped"
    );
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
}

#[tokio::test(start_paused = true)]
async fn stop_with_a_job_that_ignores_it_past_the_timeout_fails_the_chain() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j3", vec![Step::SlowToStop(3_600_000)])
        .script("j2", vec![sleep(60_000, Step::Complete)]);
    let handle = run(
        chain("1>2,3 2>4 3>4"),
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder.clone(),
        Options {
            stop_timeout: Duration::from_millis(100),
            ..options()
        },
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let end = handle.stop().await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    assert_eq!(end.state, State::Fail);
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
    let j3 = recorder
        .logs
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.job_id == "j3")
        .cloned()
        .unwrap();
    assert_eq!((j3.r#try, j3.state), (1, State::Fail));
    assert!(
        j3.error.contains("did not stop within 100ms"),
        "{}",
        j3.error
    );
    assert_eq!(recorder.finishes(), [State::Fail]);
}

#[tokio::test(start_paused = true)]
async fn stop_during_a_job_retry_wait() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 3;
    job(&mut c, "2").retry_wait = "1m".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let end = handle.stop().await.unwrap();
    assert_eq!(end.state, State::Stopped);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail)],
        "no entry for the try never run"
    );
    assert_eq!(recorder.finishes(), [State::Stopped]);
}

/// Spin Cycle lost the final state here: nothing runs during a sequence retry wait.
#[tokio::test(start_paused = true)]
async fn stop_during_a_sequence_retry_wait_reports_stopped() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "1h".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(handle.running().await.is_empty());
    let end = handle.stop().await.unwrap();
    assert_eq!(end.state, State::Stopped);
    assert_eq!(recorder.finishes(), [State::Stopped]);
}

#[tokio::test(start_paused = true)]
async fn stop_after_the_chain_completed() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let handle = start(chain("1>2"), &fakes, &recorder);
    handle.wait().await;
    assert_eq!(handle.stop().await.unwrap().state, State::Complete);
    assert_eq!(recorder.finishes(), [State::Complete]);
}

// ---- §10 suspend, §11 resume ----

// ---- Spindle's pause ----

/// A pause lets the running job finish and starts nothing new; unpaused, the chain goes
/// on to COMPLETE with one try per job.
#[tokio::test(start_paused = true)]
async fn a_paused_chain_finishes_its_running_jobs_and_starts_nothing_until_unpaused() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j1", vec![sleep(1_000, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.set_paused(true);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(recorder.tries(), [t("1", 1, State::Complete)]);
    assert!(handle.result().is_none(), "a paused chain waits");
    assert!(handle.running().await.is_empty());
    handle.set_paused(false);
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    let mut tries = recorder.tries();
    tries.sort();
    assert_eq!(
        tries,
        [
            t("1", 1, State::Complete),
            t("2", 1, State::Complete),
            t("3", 1, State::Complete),
            t("4", 1, State::Complete)
        ]
    );
}

/// A chain can start paused (a paused request handed over again); stopped or suspended
/// while paused, it ends at once with the waiting jobs PENDING.
#[tokio::test(start_paused = true)]
async fn a_chain_started_paused_can_be_stopped_or_suspended() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let paused = Options {
        paused: true,
        ..options()
    };
    let factory = Arc::new(FakeFactory(Arc::clone(&fakes)));
    let handle = run(
        chain("1>2"),
        factory.clone(),
        recorder.clone(),
        paused.clone(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(recorder.tries().is_empty());
    handle.suspend();
    assert_eq!(handle.wait().await.state, State::Suspended);
    let suspended = recorder.suspended.lock().unwrap()[0].clone();
    assert!(
        suspended
            .job_chain
            .jobs
            .values()
            .all(|job| job.state == State::Pending)
    );

    let handle = run(chain("1>2"), factory, recorder.clone(), paused).unwrap();
    assert_eq!(handle.stop().await.unwrap().state, State::Stopped);
    assert!(recorder.tries().is_empty());
}

#[tokio::test(start_paused = true)]
async fn suspend_hands_back_the_chain_with_its_counters() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script(
            "j1",
            vec![Step::Data("data1", "1", Box::new(Step::Complete))],
        )
        .script(
            "j2",
            vec![
                Step::Data("data2", "2", Box::new(Step::SlowToStop(0))),
                Step::Complete,
            ],
        )
        .script(
            "j3",
            vec![Step::Fail, sleep(60_000, Step::Complete), Step::Complete],
        );
    let mut c = chain("1>2,3 2>4 3>5 4>6 5>6");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "3").retry = 2;
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.suspend();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Suspended);
    assert!(recorder.finishes().is_empty());
    let sjc = recorder.suspended.lock().unwrap()[0].clone();
    let states: BTreeMap<&str, State> = sjc
        .job_chain
        .jobs
        .iter()
        .map(|(id, j)| (id.as_str(), j.state))
        .collect();
    assert_eq!(
        states,
        BTreeMap::from([
            ("j1", State::Complete),
            ("j2", State::Stopped),
            ("j3", State::Stopped),
            ("j4", State::Pending),
            ("j5", State::Pending),
            ("j6", State::Pending),
        ])
    );
    assert_eq!(sjc.job_chain.state, State::Suspended);
    assert_eq!(sjc.job_chain.finished_jobs, 1);
    assert_eq!(
        sjc.total_job_tries,
        BTreeMap::from([("j1".into(), 1), ("j2".into(), 1), ("j3".into(), 2)])
    );
    assert_eq!(
        sjc.latest_run_job_tries,
        BTreeMap::from([("j1".into(), 1), ("j2".into(), 1), ("j3".into(), 2)])
    );
    assert_eq!(sjc.sequence_tries, BTreeMap::from([("j1".into(), 1)]));
    assert_eq!(
        sjc.job_chain.jobs["j3"].data,
        json!({"data1": "1"}).as_object().unwrap().clone().into()
    );

    // Resume: job2 and job3 run again with the next try numbers; job3 keeps its budget.
    let recorder2 = Arc::new(Recorder::default());
    let handle = resume(
        sjc,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder2.clone(),
        options(),
    )
    .unwrap();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(end.finished_jobs, 6);
    assert_eq!(recorder2.tries_of("j2"), [(2, State::Complete)]);
    assert_eq!(recorder2.tries_of("j3"), [(3, State::Complete)]);
    assert!(recorder2.tries_of("j1").is_empty());
    assert_eq!(recorder2.finishes(), [State::Complete]);
}

#[tokio::test(start_paused = true)]
async fn resume_example_of_runner_md() {
    let mut c = chain("1>2,3 2>4,5 3>4 4>6 5>6");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "3").retry = 2;
    for (id, state) in [
        ("1", State::Complete),
        ("2", State::Complete),
        ("3", State::Stopped),
    ] {
        job(&mut c, id).state = state;
    }
    c.finished_jobs = 2;
    c.state = State::Suspended;
    let ids = |pairs: &[(&str, u32)]| {
        pairs
            .iter()
            .map(|(id, n)| ((*id).to_owned(), *n))
            .collect::<BTreeMap<_, _>>()
    };
    let sjc = SuspendedJobChain {
        request_id: "req".to_owned(),
        job_chain: c,
        total_job_tries: ids(&[("j1", 2), ("j2", 2), ("j3", 3), ("j4", 1)]),
        latest_run_job_tries: ids(&[("j1", 1), ("j2", 1), ("j3", 1), ("j4", 1)]),
        sequence_tries: ids(&[("j1", 2)]),
    };
    // As the in-process hand-over gives it, and decoded from its JSON as the Job
    // Runner's API does: the same run.
    let decoded: crate::Resumed =
        serde_json::from_str(&serde_json::to_string(&sjc).unwrap()).unwrap();
    assert_eq!(decoded.request_id(), "req");
    for resumed in [crate::Resumed::from(sjc), decoded] {
        let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
        let handle = resume(
            resumed,
            Arc::new(FakeFactory(Arc::clone(&fakes))),
            recorder.clone(),
            options(),
        )
        .unwrap();
        let end = handle.wait().await;
        assert_eq!(end.state, State::Complete, "{:?}", recorder.tries());
        let mut tries = recorder.tries();
        tries.sort();
        assert_eq!(
            tries,
            [
                t("3", 4, State::Complete),
                t("4", 2, State::Complete),
                t("5", 1, State::Complete),
                t("6", 1, State::Complete)
            ]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn suspend_during_a_sequence_retry_and_resume() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "1").sequence_retry = 1;
    job(&mut c, "1").sequence_retry_wait = "30s".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.suspend();
    assert_eq!(handle.wait().await.state, State::Suspended);
    let sjc = recorder.suspended.lock().unwrap()[0].clone();
    assert!(
        sjc.job_chain
            .jobs
            .values()
            .all(|j| j.state == State::Pending),
        "the sequence was reset"
    );
    assert_eq!(sjc.job_chain.finished_jobs, 0);
    assert_eq!(sjc.sequence_tries["j1"], 1);
    assert_eq!(sjc.total_job_tries["j2"], 1);

    let recorder2 = Arc::new(Recorder::default());
    let started = Instant::now();
    let handle = resume(
        sjc,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder2.clone(),
        options(),
    )
    .unwrap();
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(30),
        "the resumed sequence waits its retry wait"
    );
    assert_eq!(recorder2.tries_of("j1"), [(2, State::Complete)]);
    assert_eq!(recorder2.tries_of("j2"), [(2, State::Complete)]);
}

#[tokio::test(start_paused = true)]
async fn suspend_while_nothing_runs_still_hands_back_the_chain() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail]);
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    job(&mut c, "2").retry_wait = "1h".to_owned();
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.suspend();
    assert_eq!(handle.wait().await.state, State::Suspended);
    let sjc = recorder.suspended.lock().unwrap()[0].clone();
    // Stopped in its retry wait: one try logged, and the pending try is given back on resume.
    assert_eq!(sjc.total_job_tries["j2"], 1);
    assert_eq!(sjc.latest_run_job_tries["j2"], 2);
    let recorder2 = Arc::new(Recorder::default());
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let handle = resume(
        sjc,
        Arc::new(FakeFactory(Arc::clone(&fakes))),
        recorder2.clone(),
        options(),
    )
    .unwrap();
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        recorder2.tries_of("j2"),
        [(2, State::Complete)],
        "try 2, its last retry"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_while_suspending_is_refused() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::SlowToStop(2_000)]);
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.suspend();
    tokio::task::yield_now().await;
    assert_eq!(handle.stop().await, Err(StopError::ShuttingDown));
    assert_eq!(handle.wait().await.state, State::Suspended);
    assert!(recorder.finishes().is_empty());
}

// ---- reporting ----

#[tokio::test(start_paused = true)]
async fn transient_report_failures_are_retried_without_loss_or_duplicates() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.fail_logs.store(3, Ordering::SeqCst);
    let end = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder)
        .wait()
        .await;
    assert_eq!(end.state, State::Complete);
    let mut tries = recorder.tries();
    tries.sort();
    assert_eq!(
        tries,
        [
            t("1", 1, State::Complete),
            t("2", 1, State::Complete),
            t("3", 1, State::Complete),
            t("4", 1, State::Complete)
        ]
    );
    assert_eq!(recorder.finishes(), [State::Complete]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_reporter_does_not_slow_the_chain() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(1_000, Ordering::SeqCst);
    for id in ["j1", "j2", "j3", "j4", "j5"] {
        fakes.script(id, vec![sleep(100, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3 3>4 4>5"), &fakes, &recorder);
    // The jobs take 0.5 s; the reporter takes 1 s a call, but batches what queued meanwhile.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        fakes.tries.lock().unwrap().len(),
        5,
        "every job ran while the reporter was busy"
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(recorder.tries().len(), 5);
}

/// The entries queued with the final state go with it, in one call: a short chain whose
/// jobs all end while its first entry is being delivered costs two calls, not four (two
/// of entries, progress, the final state).
#[tokio::test(start_paused = true)]
async fn the_last_entries_go_with_the_final_state() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(1_000, Ordering::SeqCst);
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(100, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    let finishes = recorder.finishes.lock().unwrap().clone();
    assert_eq!(finishes.len(), 1);
    let with_it: Vec<&str> = finishes[0]
        .job_logs
        .iter()
        .map(|entry| entry.job_id.as_str())
        .collect();
    assert_eq!(with_it, ["j2", "j3"], "j1's entry was on its way alone");
    assert_eq!(recorder.tries().len(), 3);
    assert_eq!(
        *recorder.progress.lock().unwrap(),
        [1],
        "the count went with j1's entry; the final state carries the last"
    );
}

/// A fan-out of `n` jobs between a start job `j1` and an end job: `"1>2,..,n+1"` and
/// each of those `>n+2`.
fn fan_out(n: usize) -> JobChain {
    let middle: Vec<String> = (2..n + 2).map(|i| i.to_string()).collect();
    let mut edges = format!("1>{}", middle.join(","));
    for i in &middle {
        edges.push_str(&format!(" {i}>{}", n + 2));
    }
    chain(&edges)
}

/// Runnable jobs start in turns of `START_CHUNK`, so a fan-out larger than a turn still
/// runs every job at once.
#[tokio::test(start_paused = true)]
async fn a_fan_out_larger_than_a_turn_runs_every_job_at_once() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let n = 3 * crate::traverser::START_CHUNK + 10;
    for i in 2..n + 2 {
        fakes.script(&format!("j{i}"), vec![sleep(100, Step::Complete)]);
    }
    let handle = start(fan_out(n), &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(fakes.max_running(), n, "all of the fan-out ran together");
    assert_eq!(recorder.tries().len(), n + 2);
}

/// While the report queue is (nearly) full, no job starts: a runner whose entry cannot
/// be queued would wait holding its task, and a 100,000-job fan-out of short jobs would
/// hold 100,000 of them. The chain still runs every job once the reports get through.
#[tokio::test(start_paused = true)]
async fn a_reporter_that_cannot_keep_up_holds_back_new_jobs() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(10_000, Ordering::SeqCst);
    // The queue, the batch the delivery took from it, and what started as it filled.
    let bound = crate::traverser::REPORT_QUEUE
        + crate::reporter::MAX_BATCH
        + 2 * crate::traverser::START_CHUNK;
    let n = 2 * bound;
    let handle = start(fan_out(n), &fakes, &recorder);
    // The first call (j1's entry) takes 10 s; meanwhile the queue fills.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let ran = fakes.tries.lock().unwrap().len();
    assert!(
        ran > 1 && ran <= bound,
        "{ran} jobs ran while the reporter was stuck (at most {bound} expected)"
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(recorder.tries().len(), n + 2);
}

/// Entries wait a little (`LINGER`) for more before they are sent: the jobs of a short
/// chain that end within it report in one call, with the final state.
#[tokio::test(start_paused = true)]
async fn entries_that_end_close_together_go_in_one_call() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(1, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        recorder.log_calls.load(Ordering::SeqCst),
        0,
        "no call of entries alone"
    );
    let finishes = recorder.finishes.lock().unwrap().clone();
    let with_it: Vec<&str> = finishes[0]
        .job_logs
        .iter()
        .map(|entry| entry.job_id.as_str())
        .collect();
    assert_eq!(with_it, ["j1", "j2", "j3"]);

    // Jobs further apart than that report as they end.
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(50, Step::Complete)]);
    }
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_millis(75)).await;
    assert_eq!(
        recorder.tries(),
        [t("1", 1, State::Complete)],
        "j1's entry went before j2 ended"
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(recorder.log_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn progress_reports_completed_jobs() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    for id in ["j1", "j2", "j3"] {
        fakes.script(id, vec![sleep(50, Step::Complete)]);
    }
    start(chain("1>2 2>3"), &fakes, &recorder).wait().await;
    let progress = recorder.progress.lock().unwrap().clone();
    // Progress as jobs complete; the last count comes with the final state (progress
    // queued together with it is not sent).
    assert!(progress.last().is_some_and(|n| *n >= 2), "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
    assert_eq!(recorder.finishes.lock().unwrap()[0].finished_jobs, 3);
}

#[test]
fn report_errors_say_whether_to_retry() {
    assert!(ReportError::unavailable("x").is_transient());
    assert!(!ReportError::failed("x").is_transient());
    assert!(!ReportError::rejected("x").is_transient());
    let _: Value = json!(null);
}

/// test-cases.md 89: a job that returns STOPPED on its own (no stop asked) blocks its
/// descendants, and the chain ends FAIL once nothing else can run.
#[tokio::test(start_paused = true)]
async fn a_job_stopping_by_itself_ends_the_chain_as_failed() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(1_000, Step::Complete)])
        .script("j3", vec![Step::Stopped]);
    let end = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder)
        .wait()
        .await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(recorder.tries_of("j3"), [(1, State::Stopped)]);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Complete)],
        "the other branch finished"
    );
    assert!(recorder.tries_of("j4").is_empty());
    assert_eq!(recorder.finishes(), [State::Fail]);
}

/// test-cases.md 115: a sequence retry puts every job of the sequence back, including a
/// completed job in another branch, and restarts from the sequence's first job.
#[tokio::test(start_paused = true)]
async fn a_sequence_retry_resets_completed_jobs_of_every_branch() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![sleep(1_000, Step::Fail), Step::Complete]);
    let mut c = chain("1>2,4 2>3 4>3");
    job(&mut c, "1").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j4"),
        [(1, State::Complete), (2, State::Complete)],
        "job4 ran again"
    );
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Complete), (2, State::Complete)]
    );
    assert_eq!(end.finished_jobs, 4);
}

// ---- issue #10: panics, huge retries, bad durations, reports that keep failing ----

/// Issue #10: a factory or a `deserialize` that panics is a failed try with a log entry,
/// not a chain that stays RUNNING.
#[tokio::test(start_paused = true)]
async fn a_panicking_factory_or_deserialize_is_a_failed_try() {
    for (which, message) in [
        ("make", "forced factory panic"),
        ("deserialize", "forced deserialize panic"),
    ] {
        let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
        let list = match which {
            "make" => &fakes.panic_make,
            _ => &fakes.panic_deserialize,
        };
        list.lock().unwrap().push("j2".to_owned());
        let handle = start(chain("1>2 2>3"), &fakes, &recorder);
        let end = tokio::time::timeout(Duration::from_secs(60), handle.wait())
            .await
            .unwrap_or_else(|_| panic!("a panicking {which} hung the chain"));
        assert_eq!(end.state, State::Fail, "{which}");
        let logs = recorder.logs.lock().unwrap().clone();
        let j2: Vec<&JobLog> = logs.iter().filter(|l| l.job_id == "j2").collect();
        assert_eq!(j2.len(), 1, "{which}: {logs:?}");
        assert_eq!((j2[0].r#try, j2[0].state), (1, State::Fail));
        assert!(j2[0].error.contains(message), "{which}: {}", j2[0].error);
        assert_eq!(recorder.finishes(), [State::Fail]);
    }
}

/// Issue #10: a runner task that panics outside the job's calls (here: dropping the job)
/// is seen by the traverser: the try fails and the chain ends.
#[tokio::test(start_paused = true)]
async fn a_runner_task_that_panics_is_a_failed_try_not_a_hang() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.panic_drop.lock().unwrap().push("j2".to_owned());
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    let end = tokio::time::timeout(Duration::from_secs(60), handle.wait())
        .await
        .expect("the chain ends");
    assert_eq!(end.state, State::Fail);
    assert_eq!(recorder.finishes(), [State::Fail]);
    // j2's try ran and was logged; the panic after it is logged as the next try.
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Complete), (2, State::Fail)]
    );
    let logs = recorder.logs.lock().unwrap().clone();
    assert_eq!(
        logs.last().unwrap().error,
        "the job's runner panicked: forced drop panic"
    );
    assert!(recorder.tries_of("j3").is_empty());
}

/// Issue #10: `retry = u32::MAX` (as posted to the JR API) no longer overflows.
#[tokio::test(start_paused = true)]
async fn the_largest_retry_count_does_not_overflow() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j1", vec![Step::Fail, Step::Fail, Step::Complete]);
    let mut c = chain("1");
    job(&mut c, "1").retry = u32::MAX;
    let end = tokio::time::timeout(Duration::from_secs(60), start(c, &fakes, &recorder).wait())
        .await
        .expect("the chain ends");
    assert_eq!(end.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j1"),
        [(1, State::Fail), (2, State::Fail), (3, State::Complete)]
    );
}

/// Issue #10: wait durations are checked when a chain is accepted, and a bad one is
/// refused with a message that names the job and the field.
#[tokio::test(start_paused = true)]
async fn bad_wait_durations_are_refused_when_the_chain_is_accepted() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    let factory = || -> Arc<dyn Factory> { Arc::new(FakeFactory(Arc::clone(&fakes))) };
    let mut c = chain("1>2");
    job(&mut c, "2").retry_wait = "soon".to_owned();
    let err = run(c, factory(), recorder.clone(), options()).unwrap_err();
    assert!(err.is_invalid_chain());
    assert!(
        err.message
            .starts_with("job job2 (ID j2): retryWait \"soon\" is not a duration"),
        "{err}"
    );
    let mut c = chain("1>2");
    job(&mut c, "1").sequence_retry_wait = "-1s".to_owned();
    let err = run(c, factory(), recorder.clone(), options()).unwrap_err();
    assert!(err.message.contains("sequenceRetryWait \"-1s\""), "{err}");
    let mut c = chain("1>2");
    job(&mut c, "2").retry_wait = "1x".to_owned();
    let err = resume(
        SuspendedJobChain {
            request_id: "req".to_owned(),
            job_chain: c,
            total_job_tries: BTreeMap::new(),
            latest_run_job_tries: BTreeMap::new(),
            sequence_tries: BTreeMap::new(),
        },
        factory(),
        recorder.clone(),
        options(),
    )
    .unwrap_err();
    assert!(err.message.contains("retryWait \"1x\""), "{err}");
    // Empty means none, as Spin Cycle's zero value.
    let mut c = chain("1");
    job(&mut c, "1").retry_wait = String::new();
    assert!(run(c, factory(), recorder.clone(), options()).is_ok());
}

/// Issue #10: a Request Manager that answers 500 every time does not hold the chain's end
/// forever; a refused report is sent once.
#[tokio::test(start_paused = true)]
async fn a_report_that_keeps_failing_is_given_up_and_the_chain_ends() {
    for (err, calls) in [
        (ReportError::failed("HTTP 500: boom"), 5),
        (ReportError::rejected("HTTP 409: not yours"), 1),
    ] {
        let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
        *recorder.finish_error.lock().unwrap() = Some(err.clone());
        let handle = start(chain("1>2"), &fakes, &recorder);
        let end = tokio::time::timeout(Duration::from_secs(3600), handle.wait())
            .await
            .unwrap_or_else(|_| panic!("{err}: the chain never ended"));
        assert_eq!(end.state, State::Complete);
        assert_eq!(recorder.finish_calls.load(Ordering::SeqCst), calls, "{err}");
    }
}

/// Issue #10: the report queue is bounded; a reporter far slower than the jobs makes the
/// jobs wait instead of piling up reports, and nothing is lost.
#[tokio::test(start_paused = true)]
async fn a_slow_reporter_holds_back_a_flood_of_tries_without_losing_any() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    recorder.delay_ms.store(10, Ordering::SeqCst);
    fakes.script("j1", vec![Step::Fail]);
    let mut c = chain("1");
    let tries = 3 * crate::traverser::REPORT_QUEUE as u32;
    job(&mut c, "1").retry = tries - 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logged = recorder.tries_of("j1");
    assert_eq!(logged.len(), tries as usize);
    assert!(
        logged
            .iter()
            .enumerate()
            .all(|(i, (t, _))| *t == i as u32 + 1)
    );
}

// ---- live output ----

fn print(stream: proto::Stream, text: &'static str, then: Step) -> Step {
    Step::Print(stream, text, Box::new(then))
}

#[tokio::test(start_paused = true)]
async fn live_output_is_sent_while_a_job_runs_and_all_of_it_before_the_final_state() {
    use proto::Stream::{Stderr, Stdout};
    let fakes = Arc::new(Fakes::default());
    fakes.script(
        "j2",
        vec![
            print(
                Stdout,
                "one\n",
                print(Stderr, "warn\n", sleep(5_000, Step::Fail)),
            ),
            print(Stdout, "again\n", Step::Complete),
        ],
    );
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    let recorder = Arc::new(Recorder::default());
    recorder.fail_output.store(2, Ordering::SeqCst);
    let handle = start(c, &fakes, &recorder);
    // The first try is still sleeping: its output has arrived all the same (after two
    // failed deliveries).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen: Vec<(String, u32, proto::Stream, u64, String)> = recorder
        .output
        .lock()
        .unwrap()
        .iter()
        .map(|(c, _)| {
            (
                c.job_id.clone(),
                c.r#try,
                c.stream,
                c.offset,
                c.data.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("j2".to_owned(), 1, Stdout, 0, "one\n".to_owned()),
            ("j2".to_owned(), 1, Stderr, 0, "warn\n".to_owned()),
        ]
    );
    assert_eq!(handle.wait().await.state, State::Complete);
    let output = recorder.output.lock().unwrap().clone();
    assert_eq!(output.len(), 3, "{output:?}");
    let last = &output[2].0;
    assert_eq!(
        (last.r#try, last.offset, last.data.as_str()),
        (2, 0, "again\n")
    );
    // None arrived after the final state.
    assert!(
        output
            .iter()
            .all(|(chunk, after)| !after && chunk.request_id == "req")
    );
}

// ---- timeouts ----

#[tokio::test(start_paused = true)]
async fn a_try_past_its_timeout_is_stopped_and_fails_and_retries_apply() {
    let fakes = Arc::new(Fakes::default());
    // Try 1 hangs until stopped; try 2 finishes in time.
    fakes.script(
        "j2",
        vec![sleep(60_000, Step::Complete), sleep(100, Step::Complete)],
    );
    let mut c = chain("1>2 2>3");
    job(&mut c, "2").retry = 1;
    job(&mut c, "2").timeout = "1s".to_owned();
    let recorder = Arc::new(Recorder::default());
    let started = Instant::now();
    let handle = start(c, &fakes, &recorder);
    assert_eq!(handle.wait().await.state, State::Complete);
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Complete)]
    );
    let logs = recorder.logs.lock().unwrap().clone();
    let first = logs
        .iter()
        .find(|l| l.job_id == "j2" && l.r#try == 1)
        .unwrap();
    assert_eq!(first.error, "timed out after 1s and was stopped");
    assert_ne!(first.exit, 0);
    // Stopped at the timeout, not after the job's own minute.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_a_timed_try_is_a_stop_not_a_timeout() {
    let fakes = Arc::new(Fakes::default());
    fakes.script("j2", vec![sleep(60_000, Step::Complete)]);
    let mut c = chain("1>2");
    job(&mut c, "2").timeout = "1m".to_owned();
    let recorder = Arc::new(Recorder::default());
    let handle = start(c, &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(handle.stop().await.unwrap().state, State::Stopped);
    assert_eq!(recorder.tries_of("j2"), [(1, State::Stopped)]);
}

#[test]
fn a_timeout_that_is_not_a_duration_refuses_the_chain() {
    let mut c = chain("1>2");
    job(&mut c, "2").timeout = "soon".to_owned();
    let c = crate::Incoming::from(c);
    let err = crate::validate::new_chain(&c)
        .and_then(|edges| {
            crate::state::Chain::new(
                c,
                edges,
                Default::default(),
                Default::default(),
                Default::default(),
            )
            .map(|_| ())
        })
        .unwrap_err();
    assert!(
        err.message.contains("timeout \"soon\" is not a duration"),
        "{err}"
    );
}

// ---- try starts and abandonment (issue 11) ----

#[tokio::test(start_paused = true)]
async fn tries_report_their_start_and_a_durable_one_waits_until_it_is_stored() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    *fakes.recorder.lock().unwrap() = Some(Arc::clone(&recorder));
    fakes.durable.lock().unwrap().push("j2".to_owned());
    fakes.script("j2", vec![Step::Fail, sleep(1_000, Step::Complete)]);
    // Slow deliveries: a job that did not wait would begin before its start is stored.
    recorder.delay_ms.store(50, Ordering::SeqCst);
    let mut c = chain("1>2");
    job(&mut c, "2").retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(fakes.start_stored.lock().unwrap()["j2"], [true, true]);
    let starts = recorder.starts.lock().unwrap().clone();
    let j2: Vec<(u32, u32, u32)> = starts
        .iter()
        .filter(|s| s.job_id == "j2")
        .map(|s| (s.r#try, s.run_try, s.sequence_try))
        .collect();
    assert_eq!(j2, [(1, 1, 1), (2, 2, 1)]);
    assert!(
        starts
            .iter()
            .all(|s| s.request_id == "req" && s.started_at > 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_fenced_report_abandons_the_chain_without_another_word() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j1", vec![Step::Complete])
        .script("j2", vec![sleep(60_000, Step::Complete)])
        .script("j3", vec![sleep(1_000, Step::Complete)]);
    let handle = start(chain("1>2,3 2>4 3>4"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Another runner was given the request: j3's entry is refused.
    recorder.fenced.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Unknown);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "j2 was stopped, not awaited"
    );
    assert_eq!(recorder.tries_of("j1"), [(1, State::Complete)]);
    assert!(recorder.tries_of("j2").is_empty());
    assert!(recorder.finishes().is_empty());
    // j3's entry and the progress that went with it (sent together, both refused);
    // nothing after.
    assert_eq!(
        recorder.fenced_calls.load(Ordering::SeqCst),
        2,
        "nothing more was sent after the refusal"
    );
    assert_eq!(fakes.running.load(Ordering::SeqCst), 0);
    assert_eq!(handle.stop().await.unwrap().state, State::Unknown);
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_chain_stops_its_jobs_and_reports_nothing_more() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![sleep(60_000, Step::Complete)]);
    let handle = start(chain("1>2 2>3"), &fakes, &recorder);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(recorder.tries_of("j1"), [(1, State::Complete)]);
    handle.abandon();
    let end = handle.wait().await;
    assert_eq!(end.state, State::Unknown);
    assert_eq!(fakes.running.load(Ordering::SeqCst), 0);
    assert!(
        recorder.tries_of("j2").is_empty(),
        "its stopped try is not reported"
    );
    assert!(recorder.tries_of("j3").is_empty());
    assert!(recorder.finishes().is_empty());
    assert!(recorder.suspended.lock().unwrap().is_empty());
}

// ---- sequence timeouts (issue 11) ----

/// `"1>2 2>3 3>4"` with jobs 2 and 3 in their own sequence started by 2.
fn chain_with_inner_sequence() -> JobChain {
    let mut c = chain("1>2 2>3 3>4");
    job(&mut c, "2").sequence_id = "j2".to_owned();
    job(&mut c, "3").sequence_id = "j2".to_owned();
    c
}

#[tokio::test(start_paused = true)]
async fn a_sequence_past_its_timeout_stops_its_jobs_and_fails() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j3", vec![sleep(60_000, Step::Complete)]);
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "5s".to_owned();
    job(&mut c, "3").retry = 3;
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    // Stopped, failed with the reason, and not tried again for all its retries.
    let logs = recorder.logs.lock().unwrap().clone();
    let j3: Vec<&JobLog> = logs.iter().filter(|l| l.job_id == "j3").collect();
    assert_eq!(j3.len(), 1, "{j3:?}");
    assert_eq!(j3[0].state, State::Fail);
    assert_eq!(
        j3[0].error,
        "sequence job2 timed out after 5s; the job was stopped"
    );
    assert!(recorder.tries_of("j4").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_sequence_is_retried_and_its_timer_starts_again() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    // Too slow the first time, quick the second.
    fakes.script(
        "j3",
        vec![sleep(60_000, Step::Complete), sleep(3_000, Step::Complete)],
    );
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "5s".to_owned();
    job(&mut c, "2").sequence_retry = 1;
    job(&mut c, "2").sequence_retry_wait = "1s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    // 5 s to the timeout, 1 s of retry wait, 3 s of the second run.
    assert_eq!(started.elapsed(), Duration::from_secs(9));
    assert_eq!(
        recorder.tries_of("j3"),
        [(1, State::Fail), (2, State::Complete)]
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Complete), (2, State::Complete)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_deadline_ends_fail_with_the_reason() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes
        .script("j2", vec![sleep(2_000, Step::Complete)])
        .script("j3", vec![sleep(60_000, Step::Complete)]);
    // j1 starts the request's own sequence (every job's sequenceId is j1).
    let mut c = chain("1>2 2>3 3>4");
    job(&mut c, "1").sequence_timeout = "10s".to_owned();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    let logs = recorder.logs.lock().unwrap().clone();
    let j3 = logs.iter().find(|l| l.job_id == "j3").unwrap();
    assert_eq!(j3.state, State::Fail);
    assert_eq!(
        j3.error,
        "the request's deadline passed: it did not finish within 10s; the job was stopped"
    );
    assert_eq!(recorder.finishes(), [State::Fail]);
    assert_eq!(
        recorder.finishes.lock().unwrap()[0].error,
        "the request's deadline passed: it did not finish within 10s",
        "the reason is in the request's record"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sequence_that_finishes_in_time_is_not_touched_by_its_timer() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j4", vec![sleep(30_000, Step::Complete)]);
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "5s".to_owned();
    let started = Instant::now();
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    assert_eq!(started.elapsed(), Duration::from_secs(30));
}

#[test]
fn a_sequence_timeout_that_is_not_a_duration_refuses_the_chain() {
    let mut c = chain_with_inner_sequence();
    job(&mut c, "2").sequence_timeout = "soon".to_owned();
    let err = run(
        c,
        Arc::new(FakeFactory(Arc::new(Fakes::default()))),
        Arc::new(Recorder::default()),
        options(),
    )
    .map(drop)
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("sequenceTimeout \"soon\" is not a duration"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sequence_run_after_the_first_reports_its_starts_with_its_try_count() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    fakes.script("j2", vec![Step::Fail, Step::Complete]);
    let mut c = chain("1>2");
    job(&mut c, "1").sequence_retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Complete);
    // No job is durable: only the second run's starts are reported, with its count.
    let starts: Vec<(String, u32, u32)> = recorder
        .starts
        .lock()
        .unwrap()
        .iter()
        .map(|s| (s.job_id.clone(), s.r#try, s.sequence_try))
        .collect();
    assert_eq!(starts, [("j1".to_owned(), 2, 2), ("j2".to_owned(), 2, 2)]);
}

/// Issue #17: a call carries at most `MAX_BATCH` entries and, whatever their number, about
/// `MAX_BATCH_TEXT` of output (so that it stays within a Request Manager's body limit);
/// every entry arrives, and the final state carries the last ones.
#[tokio::test(start_paused = true)]
async fn a_call_carries_at_most_a_batch_of_entries_and_of_output() {
    use crate::reporter::{MAX_BATCH, MAX_BATCH_TEXT, Report};
    let recorder = Arc::new(Recorder::default());
    let (reports, queue) = tokio::sync::mpsc::channel(crate::traverser::REPORT_QUEUE);
    let entry = |i: usize, stdout: String| JobLog {
        request_id: "r".to_owned(),
        job_id: format!("j{i}"),
        r#try: 1,
        state: State::Complete,
        stdout,
        ..JobLog::default()
    };
    let delivery = tokio::spawn(crate::reporter::deliver(
        recorder.clone(),
        crate::RetryPolicy::default(),
        None,
        "r".to_owned(),
        Arc::new(crate::output::Hub::default()),
        queue,
        tokio_util::sync::CancellationToken::new(),
    ));
    // Small entries past one batch, then ten with 3 MiB of output each.
    let small = MAX_BATCH + 10;
    let big = 10;
    for i in 0..small {
        reports
            .send(Report::Log(entry(i, String::new()), false))
            .await
            .unwrap();
    }
    for i in small..small + big {
        reports
            .send(Report::Log(entry(i, "x".repeat(3 << 20)), false))
            .await
            .unwrap();
    }
    reports
        .send(Report::Finish(FinishRequest {
            request_id: "r".to_owned(),
            state: State::Complete,
            finished_at: chrono::Utc::now(),
            finished_jobs: (small + big) as u64,
            error: String::new(),
            job_logs: Vec::new(),
        }))
        .await
        .unwrap();
    drop(reports);
    delivery.await.unwrap();
    let sizes = recorder.log_call_sizes.lock().unwrap().clone();
    for &(entries, text) in &sizes {
        assert!(
            entries <= MAX_BATCH,
            "a call of {entries} entries: {sizes:?}"
        );
        // The entry that reached the limit is the last one taken.
        assert!(
            text < MAX_BATCH_TEXT + (3 << 20),
            "a call of {text} bytes: {sizes:?}"
        );
    }
    assert_eq!(
        sizes[0].0, MAX_BATCH,
        "a full batch goes at once: {sizes:?}"
    );
    let finishes = recorder.finishes.lock().unwrap().clone();
    let carried: usize = finishes.iter().map(|f| f.job_logs.len()).sum();
    let sent: usize = sizes.iter().map(|(n, _)| n).sum();
    assert_eq!(sent + carried, small + big, "every entry is delivered once");
    assert!(
        sizes.len() >= 2 && carried > 0,
        "{sizes:?}, {carried} with the end"
    );
}

#[path = "start_tests.rs"]
mod start_tests;

//! Chains for the fixtures and for small specs, the conventions of grapher.md §7, each
//! error of §10, and invariants over random specs.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;

use job::{CreateContext, Job, NoopJob, Outcome, Registry, RunContext};
use proto::{JobArgs, JobChain, RequestArgType, State};
use serde_json::{Value, json};

use crate::Grapher;

/// A test job type: sets each arg its node declares in `sets` to a two-element list.
#[derive(Debug)]
struct SettingJob;

#[async_trait::async_trait]
impl Job for SettingJob {
    fn create(&mut self, args: &mut JobArgs, ctx: &CreateContext) -> Result<(), job::Error> {
        for name in &ctx.sets {
            args.insert(
                name.clone(),
                json!([format!("{name}-1"), format!("{name}-2")]),
            );
        }
        Ok(())
    }
    job::no_state!();
    async fn run(&mut self, _data: &mut JobArgs, _ctx: RunContext) -> Outcome {
        Outcome::complete()
    }
}

/// The built-in job types, plus every other type as a [`SettingJob`].
struct TestFactory(Registry);

impl job::Factory for TestFactory {
    fn make(&self, id: &job::JobId) -> Result<Box<dyn Job>, job::Error> {
        if self.0.contains(&id.job_type) {
            return self.0.make(id);
        }
        Ok(Box::new(SettingJob))
    }
}

pub(crate) fn grapher(yaml: &str) -> Grapher {
    let report = spec::lint_str(Path::new("t.yaml"), yaml);
    assert!(
        !report.has_errors(),
        "spec lints clean: {:#?}",
        report.diagnostics
    );
    Grapher::new(report.specs, Arc::new(TestFactory(Registry::builtin())))
}

/// The text of one of Spindle's own spec fixtures (`fixtures/specs`).
fn fixture_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/specs")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn fixture(name: &str) -> Grapher {
    grapher(&fixture_text(name))
}

/// The text of one of Spin Cycle's own spec fixtures, when `SPINDLE_SPINCYCLE_FIXTURES`
/// names their folder (relative to the repository, or absolute); otherwise the test is
/// skipped and one line says so.
fn spincycle_fixture_text(test: &str, name: &str) -> Option<String> {
    let Some(folder) = std::env::var_os("SPINDLE_SPINCYCLE_FIXTURES") else {
        // Straight to stderr: the test harness captures `eprintln!`.
        let line = format!(
            "{test}: skipped: it reads Spin Cycle's spec fixtures; set SPINDLE_SPINCYCLE_FIXTURES to their folder to run it\n"
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return None;
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(folder)
        .join(name);
    Some(std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display())))
}

pub(crate) fn args(value: Value) -> JobArgs {
    match value {
        Value::Object(map) => map.into(),
        _ => panic!("args are an object"),
    }
}

/// Job names in topological order (ties broken by name), one line per job with its
/// successors, for snapshots.
fn render(chain: &JobChain) -> String {
    let name = |id: &str| chain.jobs[id].name.clone();
    let mut in_degree: HashMap<&str, usize> =
        chain.jobs.keys().map(|id| (id.as_str(), 0)).collect();
    for succs in chain.adjacency_list.values() {
        for succ in succs {
            *in_degree.get_mut(succ.as_str()).unwrap() += 1;
        }
    }
    let mut ready: Vec<&str> = in_degree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(id, _)| *id)
        .collect();
    let mut out = String::new();
    while !ready.is_empty() {
        ready.sort_by_key(|id| std::cmp::Reverse(name(id)));
        let id = ready.pop().unwrap();
        let job = &chain.jobs[id];
        let mut succs: Vec<String> = chain
            .adjacency_list
            .get(id)
            .into_iter()
            .flatten()
            .map(|s| name(s))
            .collect();
        succs.sort();
        let mut line = format!("{} [{}]", job.name, job.job_type);
        if job.sequence_retry > 0 {
            line.push_str(&format!(
                " seq-retry={}/{}",
                job.sequence_retry, job.sequence_retry_wait
            ));
        }
        if job.retry > 0 {
            line.push_str(&format!(" retry={}/{}", job.retry, job.retry_wait));
        }
        if job.parallel > 0 {
            line.push_str(&format!(" parallel={}", job.parallel));
        }
        if !succs.is_empty() {
            line.push_str(&format!(" -> {}", succs.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
        for succ in chain.adjacency_list.get(id).into_iter().flatten() {
            let n = in_degree.get_mut(succ.as_str()).unwrap();
            *n -= 1;
            if *n == 0 {
                ready.push(succ);
            }
        }
    }
    out
}

/// The jobs of a chain that is a single line, in order.
fn line(chain: &JobChain) -> Vec<&proto::Job> {
    let targets: HashSet<&String> = chain.adjacency_list.values().flatten().collect();
    let mut id = chain
        .jobs
        .keys()
        .find(|id| !targets.contains(id))
        .expect("a first job");
    let mut out = vec![&chain.jobs[id]];
    while let Some(next) = chain.adjacency_list.get(id) {
        assert_eq!(next.len(), 1, "a line");
        id = &next[0];
        out.push(&chain.jobs[id]);
    }
    out
}

#[test]
fn grapher_md_section_7_example() {
    let created = fixture("retried-sequence.yaml")
        .create("r", &JobArgs::new())
        .unwrap();
    let chain = &created.job_chain;
    let jobs = line(chain);
    let names: Vec<&str> = jobs.iter().map(|job| job.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "request_r_begin",
            "r_begin",
            "a",
            "sequence_s_begin",
            "sub_begin",
            "b",
            "sub_end",
            "sequence_s_end",
            "r_end",
            "request_r_end"
        ]
    );
    let request_begin = &jobs[0].id;
    let sequence_begin = &jobs[3].id;
    for (idx, job) in jobs.iter().enumerate() {
        let expected = if (3..=7).contains(&idx) {
            sequence_begin
        } else {
            request_begin
        };
        assert_eq!(&job.sequence_id, expected, "{}", job.name);
        assert_eq!(job.state, State::Pending);
        assert!(job.data.is_empty());
        assert_eq!(job.id.len(), 4);
        assert!(job.id.chars().all(|c| c.is_ascii_alphanumeric()));
    }
    assert_eq!(
        (jobs[0].sequence_retry, jobs[0].sequence_retry_wait.as_str()),
        (0, "0s")
    );
    assert_eq!(
        (jobs[3].sequence_retry, jobs[3].sequence_retry_wait.as_str()),
        (2, "10s")
    );
    assert!(
        jobs.iter()
            .filter(|j| j.name != "request_r_begin" && j.name != "sequence_s_begin")
            .all(|j| j.sequence_retry == 0)
    );
    assert_eq!(chain.jobs.len(), 10);
    assert_eq!(chain.request_id, created.request_id);
    assert_eq!(chain.state, State::Pending);
    // The last job has no entry in the adjacency list.
    assert!(!chain.adjacency_list.contains_key(&jobs[9].id));
}

#[path = "args_tests.rs"]
mod args_tests;
#[path = "expansion_tests.rs"]
mod expansion_tests;
#[path = "fixture_tests.rs"]
mod fixture_tests;
#[path = "outline_tests.rs"]
mod outline_tests;
#[path = "rollout_tests.rs"]
mod rollout_tests;

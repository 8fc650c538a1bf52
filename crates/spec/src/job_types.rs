//! The job types of the binary that will run the specs: a job node whose `type` it does
//! not know, or that does not pass the job args its type requires, cannot run. The
//! linter knows nothing of job factories, so the caller says which types there are.

use std::collections::BTreeMap;

use crate::check::{SpecPlace, quoted};
use crate::model::{Category, Node, Sequence, Specs};
use crate::{Diagnostic, Severity};

/// The job types a binary runs, each with the job args it requires.
#[derive(Debug, Clone, Default)]
pub struct JobTypes {
    types: BTreeMap<String, Vec<String>>,
}

impl JobTypes {
    pub fn new() -> JobTypes {
        JobTypes::default()
    }

    /// Adds a job type and the job args it requires.
    pub fn add(&mut self, job_type: &str, required_args: &[String]) -> &mut JobTypes {
        self.types
            .insert(job_type.to_owned(), required_args.to_vec());
        self
    }

    /// The known type closest to `name`, if it is a near miss (a typo).
    fn near(&self, name: &str) -> Option<&str> {
        crate::near::nearest(name, self.types.keys().map(String::as_str))
    }

    /// What is wrong with `name`, a type this binary does not run, and what was expected.
    fn unknown(&self, name: &str) -> String {
        let hint = self
            .near(name)
            .map(|near| format!(" (did you mean `{near}`?)"))
            .unwrap_or_default();
        format!(
            "unknown job type `{name}`{hint}; expected one of the job types this binary runs: {}, or one a job program serves (`jobs:` in the config: docs/job-protocol.md)",
            quoted(self.types.keys().map(String::as_str))
        )
    }
}

pub(crate) fn check(specs: &Specs, job_types: &JobTypes) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // A pool of a type nothing runs holds nothing: a typo, most likely.
    for pool in specs.pools() {
        for pool_type in &pool.types {
            if !job_types.types.contains_key(&pool_type.value) {
                let mut diagnostic = crate::check::pool_diagnostic(
                    pool,
                    pool_type.pos,
                    "types",
                    job_types.unknown(&pool_type.value),
                );
                diagnostic.code = "job-type";
                out.push(diagnostic);
            }
        }
    }
    for seq in specs.sequences() {
        for node in &seq.nodes {
            if node.category() == Some(Category::Job) {
                check_node(seq, node, job_types, &mut out);
            }
        }
    }
    out
}

fn check_node(seq: &Sequence, node: &Node, job_types: &JobTypes, out: &mut Vec<Diagnostic>) {
    let Some(node_type) = &node.node_type else {
        return;
    };
    let Some(required) = job_types.types.get(&node_type.value) else {
        let message = job_types.unknown(&node_type.value);
        let place = SpecPlace {
            sequence: seq,
            node: Some(node),
            field: "type",
            pos: node_type.pos,
        };
        out.push(place.diagnostic(Severity::Error, "job-type", message));
        return;
    };
    // A job sees its node's `args` (under their `expected` names) and its `each` elements.
    let passed: Vec<&str> = node
        .node_args()
        .filter_map(|arg| arg.expected())
        .chain(node.each_pairs().map(|(_, element)| element))
        .collect();
    let missing: Vec<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|arg| !passed.contains(arg))
        .collect();
    if missing.is_empty() {
        return;
    }
    let message = format!(
        "job type `{}` requires job {} {}, which this node does not pass; expected `- expected: {}` in `args` (with `given:` to pass another arg under that name)",
        node_type.value,
        if missing.len() == 1 { "arg" } else { "args" },
        quoted(missing.iter().copied()),
        missing[0]
    );
    let place = SpecPlace {
        sequence: seq,
        node: Some(node),
        field: "args",
        pos: if node.args.is_empty() {
            node_type.pos
        } else {
            node.pos_of("args")
        },
    };
    out.push(place.diagnostic(Severity::Error, "job-args", message));
}

//! A job chain as Graphviz DOT: one cluster per sequence, nested as the sequences are.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use proto::JobChain;

/// Quotes a DOT identifier or label.
fn quote(text: &str) -> String {
    format!(
        "\"{}\"",
        text.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )
}

pub(crate) fn render(chain: &JobChain) -> String {
    // Each sequence (named by its begin job's id) with its jobs, and its parent sequence:
    // the sequence of a job that runs just before the begin job.
    let mut members: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, job) in &chain.jobs {
        members
            .entry(job.sequence_id.as_str())
            .or_default()
            .push(id);
    }
    let mut preds: HashMap<&str, &str> = HashMap::new();
    for (from, succs) in &chain.adjacency_list {
        for succ in succs {
            preds.entry(succ.as_str()).or_insert(from.as_str());
        }
    }
    let mut children: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
    for &sequence in members.keys() {
        let parent = preds
            .get(sequence)
            .and_then(|pred| chain.jobs.get(*pred))
            .map(|job| job.sequence_id.as_str())
            .filter(|parent| *parent != sequence);
        children.entry(parent).or_default().push(sequence);
    }
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(&chain.request_id));
    out.push_str("  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n");
    let mut stack: Vec<(&str, usize, bool)> = children
        .get(&None)
        .into_iter()
        .flatten()
        .rev()
        .map(|seq| (*seq, 1, false))
        .collect();
    // Iterative so that deep nesting cannot overflow the stack: (sequence, depth, closing).
    while let Some((sequence, depth, closing)) = stack.pop() {
        let indent = "  ".repeat(depth);
        if closing {
            let _ = writeln!(out, "{indent}}}");
            continue;
        }
        let begin = chain.jobs.get(sequence);
        let mut label = begin.map_or(sequence.to_owned(), |job| {
            job.name
                .strip_suffix("_begin")
                .unwrap_or(&job.name)
                .to_owned()
        });
        if let Some(job) = begin.filter(|job| job.sequence_retry > 0) {
            let _ = write!(
                label,
                " (retry {}, wait {})",
                job.sequence_retry, job.sequence_retry_wait
            );
        }
        let _ = writeln!(
            out,
            "{indent}subgraph {} {{",
            quote(&format!("cluster_{sequence}"))
        );
        let _ = writeln!(out, "{indent}  label={};", quote(&label));
        for id in members.get(sequence).into_iter().flatten() {
            let job = &chain.jobs[*id];
            let mut job_label = job.name.clone();
            if job.job_type != "noop" {
                let _ = write!(job_label, "\n{}", job.job_type);
            }
            if job.retry > 0 {
                let _ = write!(job_label, "\nretry {} ({})", job.retry, job.retry_wait);
            }
            if job.parallel > 0 {
                let _ = write!(job_label, "\nat most {} at once", job.parallel);
            }
            if job.tries > 0 {
                let _ = write!(job_label, "\n{} (try {})", job.state, job.tries);
            }
            let _ = writeln!(
                out,
                "{indent}  {} [label={}];",
                quote(id),
                quote(&job_label)
            );
        }
        stack.push((sequence, depth, true));
        for child in children.get(&Some(sequence)).into_iter().flatten().rev() {
            stack.push((child, depth + 1, false));
        }
    }
    for (from, succs) in &chain.adjacency_list {
        for succ in succs {
            let _ = writeln!(out, "  {} -> {};", quote(from), quote(succ));
        }
    }
    out.push_str("}\n");
    out
}

//! A job chain for people: Graphviz DOT (one cluster per sequence, nested as the
//! sequences are, jobs coloured by state) and an indented tree for a terminal. Both read
//! the chain's sequences through [`Layout`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;

use proto::{JobChain, State};
use serde_json::Value;

/// The chain's sequences (each named by its begin job's id), their jobs and their nesting,
/// every list in the order the jobs run.
struct Layout<'c> {
    chain: &'c JobChain,
    members: BTreeMap<&'c str, Vec<&'c str>>,
    children: BTreeMap<Option<&'c str>, Vec<&'c str>>,
    parents: HashMap<&'c str, &'c str>,
    /// A job's place in a topological order of the chain.
    order: HashMap<&'c str, usize>,
}

impl<'c> Layout<'c> {
    fn of(chain: &'c JobChain) -> Layout<'c> {
        // Kahn's order: a job comes after every job before it.
        let mut indegree: HashMap<&str, usize> =
            chain.jobs.keys().map(|id| (id.as_str(), 0)).collect();
        for succs in chain.adjacency_list.values() {
            for succ in succs {
                *indegree.entry(succ.as_str()).or_default() += 1;
            }
        }
        let mut ready: VecDeque<&str> = indegree
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(id, _)| *id)
            .collect();
        let mut order = HashMap::new();
        while let Some(id) = ready.pop_front() {
            order.insert(id, order.len());
            for succ in chain.adjacency_list.get(id).into_iter().flatten() {
                let n = indegree.get_mut(succ.as_str()).expect("counted above");
                *n -= 1;
                if *n == 0 {
                    ready.push_back(succ.as_str());
                }
            }
        }
        let position = |id: &str| order.get(id).copied().unwrap_or(usize::MAX);
        let mut members: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (id, job) in &chain.jobs {
            members
                .entry(job.sequence_id.as_str())
                .or_default()
                .push(id);
        }
        for jobs in members.values_mut() {
            jobs.sort_by_key(|id| (position(id), *id));
        }
        // A sequence's parent: the sequence of a job that runs just before its begin job.
        let mut preds: HashMap<&str, &str> = HashMap::new();
        for (from, succs) in &chain.adjacency_list {
            for succ in succs {
                preds.entry(succ.as_str()).or_insert(from.as_str());
            }
        }
        let mut children: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
        let mut parents = HashMap::new();
        for &sequence in members.keys() {
            let parent = preds
                .get(sequence)
                .and_then(|pred| chain.jobs.get(*pred))
                .map(|job| job.sequence_id.as_str())
                .filter(|parent| *parent != sequence);
            if let Some(parent) = parent {
                parents.insert(sequence, parent);
            }
            children.entry(parent).or_default().push(sequence);
        }
        for sequences in children.values_mut() {
            sequences.sort_by_key(|id| (position(id), *id));
        }
        Layout {
            chain,
            members,
            children,
            parents,
            order,
        }
    }

    fn position(&self, id: &str) -> usize {
        self.order.get(id).copied().unwrap_or(usize::MAX)
    }

    /// The sequence's label: its name, its `each:` element, its retries.
    fn label(&self, sequence: &str) -> String {
        let begin = self.chain.jobs.get(sequence);
        let mut label = begin.map_or(sequence.to_owned(), |job| {
            job.name
                .strip_suffix("_begin")
                .unwrap_or(&job.name)
                .to_owned()
        });
        if let Some(job) = begin {
            // Only the element this sequence adds, not those of sequences around it.
            let parent_each = self
                .parent(sequence)
                .and_then(|parent| self.chain.jobs.get(parent))
                .map(|job| &job.each);
            let own: proto::JobArgs = job
                .each
                .iter()
                .filter(|(name, value)| parent_each.and_then(|each| each.get(name)) != Some(value))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            if !own.is_empty() {
                let _ = write!(label, " [{}]", each_text(&own));
            }
            if job.sequence_retry > 0 {
                let _ = write!(
                    label,
                    " (retry {}, wait {})",
                    job.sequence_retry, job.sequence_retry_wait
                );
            }
        }
        label
    }

    fn parent(&self, sequence: &str) -> Option<&'c str> {
        self.parents.get(sequence).copied()
    }
}

/// `name=value` pairs, strings unquoted.
pub(crate) fn each_text(each: &proto::JobArgs) -> String {
    each.iter()
        .map(|(name, value)| match value {
            Value::String(text) => format!("{name}={text}"),
            other => format!("{name}={other}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Quotes a DOT identifier or label.
fn quote(text: &str) -> String {
    format!(
        "\"{}\"",
        text.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )
}

/// A job's fill colour in DOT, by state.
fn fill(state: State) -> &'static str {
    match state {
        State::Pending => "white",
        State::Running => "#fff2a8",
        State::Complete => "#c6efce",
        State::Fail | State::Unknown | State::Reserved => "#ffc7ce",
        State::Stopped | State::Suspended => "#e4d7f5",
    }
}

pub(crate) fn render(chain: &JobChain) -> String {
    let layout = Layout::of(chain);
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(&chain.request_id));
    out.push_str(
        "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\"];\n",
    );
    let mut stack: Vec<(&str, usize, bool)> = layout
        .children
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
        let _ = writeln!(
            out,
            "{indent}subgraph {} {{",
            quote(&format!("cluster_{sequence}"))
        );
        let _ = writeln!(out, "{indent}  label={};", quote(&layout.label(sequence)));
        for id in layout.members.get(sequence).into_iter().flatten() {
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
                "{indent}  {} [label={}, fillcolor={}];",
                quote(id),
                quote(&job_label),
                quote(fill(job.state))
            );
        }
        stack.push((sequence, depth, true));
        for child in layout
            .children
            .get(&Some(sequence))
            .into_iter()
            .flatten()
            .rev()
        {
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

/// A job's state, styled for a terminal.
fn styled_state(state: State) -> String {
    let colour = match state {
        State::Complete => anstyle::AnsiColor::Green,
        State::Running => anstyle::AnsiColor::Yellow,
        State::Fail | State::Unknown | State::Reserved => anstyle::AnsiColor::Red,
        State::Stopped | State::Suspended => anstyle::AnsiColor::Magenta,
        State::Pending => return state.to_string(),
    };
    let style = anstyle::Style::new().fg_color(Some(colour.into()));
    format!("{style}{state}{style:#}")
}

/// The chain as an indented tree: each sequence with its jobs and the sequences inside
/// it, in the order they run; the begin and end jobs of sequences are left out (their
/// sequence's line stands for them). Colour codes are for anstream to keep or strip.
pub(crate) fn tree(chain: &JobChain) -> String {
    enum Work<'a> {
        Sequence(&'a str, usize),
        Line(String),
    }
    let layout = Layout::of(chain);
    let mut out = String::new();
    // Iterative so that deep nesting cannot overflow the stack.
    let mut stack: Vec<Work> = layout
        .children
        .get(&None)
        .into_iter()
        .flatten()
        .rev()
        .map(|seq| Work::Sequence(seq, 0))
        .collect();
    while let Some(work) = stack.pop() {
        let (sequence, depth) = match work {
            Work::Line(line) => {
                out.push_str(&line);
                continue;
            }
            Work::Sequence(sequence, depth) => (sequence, depth),
        };
        let indent = "  ".repeat(depth);
        let _ = writeln!(out, "{indent}{}", layout.label(sequence));
        // The sequence's own jobs and the sequences inside it, merged in run order.
        let jobs = layout
            .members
            .get(sequence)
            .into_iter()
            .flatten()
            .filter_map(|id| {
                let job = &chain.jobs[*id];
                let wrapper = job.job_type == "noop"
                    && (job.name.ends_with("_begin") || job.name.ends_with("_end"));
                if wrapper {
                    // An expansion's window is on its begin wrapper: shown as a note.
                    let name = job
                        .name
                        .strip_suffix("_begin")
                        .filter(|_| job.parallel > 0)?;
                    let line = format!("{indent}  {name}: at most {} at once\n", job.parallel);
                    return Some((layout.position(id), Work::Line(line)));
                }
                let mut line = format!(
                    "{indent}  {} ({}, {id})  {}",
                    job.name,
                    job.job_type,
                    styled_state(job.state)
                );
                if job.tries > 0 {
                    let _ = write!(line, " (try {})", job.tries);
                }
                line.push('\n');
                Some((layout.position(id), Work::Line(line)))
            });
        let children = layout
            .children
            .get(&Some(sequence))
            .into_iter()
            .flatten()
            .map(|child| (layout.position(child), Work::Sequence(child, depth + 1)));
        let mut items: Vec<(usize, Work)> = jobs.chain(children).collect();
        items.sort_by_key(|(position, _)| *position);
        stack.extend(items.into_iter().rev().map(|(_, work)| work));
    }
    out
}

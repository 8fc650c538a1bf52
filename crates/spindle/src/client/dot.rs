//! A job chain for people: Graphviz DOT (one cluster per sequence, nested as the
//! sequences are, jobs coloured by state) and an indented tree for a terminal. Both read
//! the chain's sequences through [`Layout`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;

use graph::structure::{GroupKind, Structure, each_text, own_each};
use proto::{JobChain, State};

/// The chain's sequences as [`Structure`] has them, read by begin job id: each one's
/// jobs and the sequences inside it, every list in the order the jobs run (both made
/// once, so that a fan-out of many sequences is not read once per sequence).
struct Layout<'c> {
    chain: &'c JobChain,
    structure: Structure,
    /// Each sequence group's jobs (the root's: jobs of no known sequence), in run order.
    members: HashMap<u32, Vec<u32>>,
    /// The sequence groups directly inside each sequence group (`None`: at the top), in
    /// run order (groups are numbered by their begin job's place).
    children: HashMap<Option<u32>, Vec<u32>>,
}

impl<'c> Layout<'c> {
    fn of(chain: &'c JobChain) -> Layout<'c> {
        let structure = Structure::of(chain);
        let mut members: HashMap<u32, Vec<u32>> = HashMap::new();
        for (j, &g) in structure.job_sequence.iter().enumerate() {
            members.entry(g).or_default().push(j as u32);
        }
        let mut children: HashMap<Option<u32>, Vec<u32>> = HashMap::new();
        for (g, group) in structure.groups.iter().enumerate() {
            if group.kind == GroupKind::Sequence {
                let parent = structure.parent_sequence(g as u32);
                children.entry(parent).or_default().push(g as u32);
            }
        }
        for list in children.values_mut() {
            list.sort_unstable_by_key(|&g| structure.index[&structure.groups[g as usize].id]);
        }
        Layout {
            chain,
            structure,
            members,
            children,
        }
    }

    /// The sequence (its group) named by begin job `id`; `None` for the top.
    fn group(&self, sequence: Option<&str>) -> Option<u32> {
        sequence.and_then(|id| self.structure.group_index.get(id).copied())
    }

    /// The jobs of `sequence` (by begin job id), in run order.
    fn members(&self, sequence: &str) -> impl Iterator<Item = &str> + '_ {
        let g = self.group(Some(sequence)).unwrap_or(0);
        self.members
            .get(&g)
            .into_iter()
            .flatten()
            .map(|&j| self.structure.job_id(j))
    }

    /// The sequences (by begin job id) directly inside `sequence`, or at the top for
    /// `None`, in run order.
    fn children(&self, sequence: Option<&str>) -> Vec<&str> {
        self.children
            .get(&self.group(sequence))
            .into_iter()
            .flatten()
            .map(|&g| self.structure.groups[g as usize].id.as_str())
            .collect()
    }

    /// A job's place in the run order.
    fn position(&self, id: &str) -> usize {
        self.structure
            .index
            .get(id)
            .map_or(usize::MAX, |&j| j as usize)
    }

    /// The sequence's label: its place (its begin job's name without `_begin`), its own
    /// `each:` element, its retries.
    fn label(&self, sequence: &str) -> String {
        let Some(job) = self.chain.jobs.get(sequence) else {
            return sequence.to_owned();
        };
        let mut label = graph::names::place_of(&job.name).to_owned();
        let parent_each = self
            .group(Some(sequence))
            .and_then(|g| self.structure.parent_sequence(g))
            .map(|p| &self.chain.jobs[&self.structure.groups[p as usize].id].each);
        let own = own_each(&job.each, parent_each);
        if !own.is_empty() {
            let _ = write!(label, " [{}]", each_text(&own, ","));
        }
        if job.sequence_retry > 0 {
            let _ = write!(
                label,
                " (retry {}, wait {})",
                job.sequence_retry, job.sequence_retry_wait
            );
        }
        label
    }
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

// Long because DOT is written in one pass over the layout: the graph's attributes, then
// each sequence as a nested cluster (iteratively, so deep nesting cannot overflow the
// stack) with its jobs styled by state, then the edges; the pieces share the open
// clusters' depth.
pub(crate) fn render(chain: &JobChain) -> String {
    let layout = Layout::of(chain);
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(&chain.request_id));
    out.push_str(
        "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\"];\n",
    );
    let mut stack: Vec<(&str, usize, bool)> = layout
        .children(None)
        .into_iter()
        .rev()
        .map(|seq| (seq, 1, false))
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
        for id in layout.members(sequence) {
            let job = &chain.jobs[id];
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
        for child in layout.children(Some(sequence)).into_iter().rev() {
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
        .children(None)
        .into_iter()
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
        let jobs = layout.members(sequence).filter_map(|id| {
            let job = &chain.jobs[id];
            if graph::names::is_wrapper(&job.name, &job.job_type) {
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
            .children(Some(sequence))
            .into_iter()
            .map(|child| (layout.position(child), Work::Sequence(child, depth + 1)));
        let mut items: Vec<(usize, Work)> = jobs.chain(children).collect();
        items.sort_by_key(|(position, _)| *position);
        stack.extend(items.into_iter().rev().map(|(_, work)| work));
    }
    out
}

/// How `spindle graph` prints a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum GraphFormat {
    /// Spin Cycle's JobChain JSON (`requestId`, `jobs`, `adjacencyList`, ...)
    Json,
    /// Graphviz DOT, each sequence a cluster, jobs coloured by state
    Dot,
    /// An indented tree of sequences and jobs with their states
    Tree,
}

/// Prints a chain in `format`.
pub(crate) fn print_chain(chain: &proto::JobChain, format: GraphFormat) -> anyhow::Result<()> {
    let mut stdout = anstream::stdout().lock();
    match format {
        GraphFormat::Json => {
            serde_json::to_writer_pretty(&mut stdout, chain)?;
            writeln!(stdout)?;
        }
        GraphFormat::Dot => write!(stdout, "{}", render(chain))?,
        GraphFormat::Tree => write!(stdout, "{}", tree(chain))?,
    }
    Ok(())
}

//! Graph checks (specs.md section 5): each sequence's dependency graph (unknown deps,
//! cycles, args used before a dependency sets them) and the checks across sequences
//! (call cycles, calls to sequences with errors, `sets` that a called sequence does not
//! set). Codes G1-G8 as in specs.md.
//!
//! Unlike Spin Cycle, an arg counts as available to a node only when the sequence
//! declares it or one of the node's ancestors sets it: Spin Cycle accepted any node
//! added earlier, which made the verdict depend on hash-map order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use crate::check::{SpecPlace, quoted};
use crate::model::{Category, Node, Sequence, Specs};
use crate::{BUILTIN_NOOP, Diagnostic, Pos, Severity};

/// A sequence's nodes in dependency order, with each node's predecessors.
#[derive(Debug, Clone)]
pub struct SequenceGraph {
    /// Node indices (into `Sequence::nodes`) in a topological order; among nodes that are
    /// ready at the same time, file order.
    pub order: Vec<usize>,
    /// For each node index, the indices of its deps.
    pub preds: Vec<Vec<usize>>,
}

/// Why a sequence's nodes do not form a DAG.
enum GraphError {
    UnknownDep { node: usize, dep: usize },
    Cycle { cycle: Vec<usize> },
}

impl SequenceGraph {
    /// The graph of a sequence whose deps name existing nodes and form no cycle.
    pub fn new(sequence: &Sequence) -> Option<SequenceGraph> {
        build(sequence).ok()
    }
}

fn build(seq: &Sequence) -> Result<SequenceGraph, Vec<GraphError>> {
    let index: HashMap<&str, usize> = seq
        .nodes
        .iter()
        .enumerate()
        .map(|(idx, node)| (node.name.as_str(), idx))
        .collect();
    let mut errors = Vec::new();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); seq.nodes.len()];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); seq.nodes.len()];
    let mut seen: HashSet<usize> = HashSet::new();
    for (idx, node) in seq.nodes.iter().enumerate() {
        seen.clear();
        for (dep_idx, dep) in node.deps.iter().enumerate() {
            match index.get(dep.value.as_str()) {
                Some(&pred) if seen.insert(pred) => {
                    preds[idx].push(pred);
                    succs[pred].push(idx);
                }
                Some(_) => {}
                None => errors.push(GraphError::UnknownDep {
                    node: idx,
                    dep: dep_idx,
                }),
            }
        }
    }
    // Ready nodes in file order, for a deterministic order.
    let sorted = proto::topo::sort::<std::collections::BTreeSet<usize>, _>(
        preds.iter().map(Vec::len).collect(),
        |idx| succs[idx].iter().copied(),
    );
    let order = sorted.order.clone();
    if !sorted.is_complete() {
        // Walk back along deps among the remaining nodes until one repeats.
        let remaining: HashSet<usize> = sorted.left().into_iter().collect();
        let start = (0..seq.nodes.len())
            .find(|idx| remaining.contains(idx))
            .unwrap_or(0);
        let mut path = vec![start];
        let mut on_path: HashMap<usize, usize> = HashMap::from([(start, 0)]);
        let mut current = start;
        while let Some(&next) = preds[current].iter().find(|p| remaining.contains(p)) {
            if let Some(&at) = on_path.get(&next) {
                let cycle: Vec<usize> = path[at..].to_vec();
                errors.push(GraphError::Cycle { cycle });
                break;
            }
            on_path.insert(next, path.len());
            path.push(next);
            current = next;
        }
    }
    if errors.is_empty() {
        Ok(SequenceGraph { order, preds })
    } else {
        Err(errors)
    }
}

pub(crate) fn check(specs: &Specs, prior: &[Diagnostic]) -> Vec<Diagnostic> {
    let mut checker = GraphChecker {
        specs,
        out: Vec::new(),
    };
    let mut errored: HashSet<&str> = prior
        .iter()
        .filter(|d| d.severity == Severity::Error && d.code != "duplicate-sequence")
        .filter_map(|d| d.sequence.as_deref())
        .collect();
    for seq in specs.sequences() {
        if errored.contains(seq.name.as_str()) {
            continue;
        }
        if !checker.sequence_graph(seq) {
            errored.insert(&seq.name);
        }
    }
    checker.across_sequences(&mut errored);
    checker.out
}

struct GraphChecker<'s> {
    specs: &'s Specs,
    out: Vec<Diagnostic>,
}

impl<'s> GraphChecker<'s> {
    fn push(
        &mut self,
        code: &'static str,
        seq: &Sequence,
        node: Option<&Node>,
        field: &str,
        pos: Pos,
        message: String,
    ) {
        let place = SpecPlace {
            sequence: seq,
            node,
            field,
            pos,
        };
        self.out
            .push(place.diagnostic(Severity::Error, code, message));
    }

    /// G1, G3, G4 for one sequence. Returns whether it passed.
    fn sequence_graph(&mut self, seq: &Sequence) -> bool {
        match build(seq) {
            Ok(graph) => self.args_set_in_time(seq, &graph),
            Err(errors) => {
                for error in errors {
                    self.graph_error(seq, error);
                }
                false
            }
        }
    }

    /// G4: deps that name no node of the sequence, and cycles.
    fn graph_error(&mut self, seq: &Sequence, error: GraphError) {
        match error {
            GraphError::UnknownDep { node, dep } => {
                let node = &seq.nodes[node];
                let dep = &node.deps[dep];
                let message = if dep.value == node.name {
                    "node depends on itself; expected deps to name other nodes of the sequence"
                        .to_owned()
                } else {
                    format!(
                        "`{}` is not a node of this sequence; expected deps to name nodes of sequence `{}`",
                        dep.value, seq.name
                    )
                };
                self.push("G4", seq, Some(node), "deps", dep.pos, message);
            }
            GraphError::Cycle { cycle } => {
                let mut names: Vec<&str> = cycle
                    .iter()
                    .map(|&idx| seq.nodes[idx].name.as_str())
                    .collect();
                let first = &seq.nodes[cycle[0]];
                names.push(&first.name);
                let message = format!(
                    "dependency cycle: {} (each depends on the next); expected deps without cycles",
                    names.join(" → ")
                );
                self.push(
                    "G4",
                    seq,
                    Some(first),
                    "deps",
                    first.pos_of("deps"),
                    message,
                );
            }
        }
    }

    /// G1, G3: walks the sequence in dependency order, keeping the args set before each
    /// node, and checks that what each node reads is among them.
    fn args_set_in_time(&mut self, seq: &Sequence, graph: &SequenceGraph) -> bool {
        // Which node sets each arg, to explain an arg used before it is set.
        let mut setters: HashMap<&str, &str> = HashMap::new();
        for node in &seq.nodes {
            for name in node.node_sets().filter_map(|set| set.r#as()) {
                setters.entry(name).or_insert(&node.name);
            }
        }
        let base: Rc<HashSet<&str>> = Rc::new(seq.arg_names().collect());
        let mut after: Vec<Option<Rc<HashSet<&str>>>> = vec![None; seq.nodes.len()];
        let mut ok = true;
        for &idx in &graph.order {
            let node = &seq.nodes[idx];
            let before = set_before(&graph.preds[idx], &after, &base);
            let explain = |name: &str| match setters.get(name) {
                Some(setter) if *setter != node.name => format!(
                    "`{name}` (set by node `{setter}`, which this node does not depend on: add it to `deps`)"
                ),
                Some(_) => format!("`{name}` (set by this node itself, so only after it runs)"),
                None => format!("`{name}`"),
            };
            let reading = Reading {
                seq,
                node,
                before: &before,
                explain: &explain,
            };
            ok &= self.if_arg_set(&reading);
            ok &= self.inputs_set(&reading);
            let sets: Vec<&str> = node
                .node_sets()
                .filter_map(|set| set.r#as())
                .filter(|s| !before.contains(s))
                .collect();
            after[idx] = Some(if sets.is_empty() {
                before
            } else {
                let mut own: HashSet<&str> = (*before).clone();
                own.extend(sets);
                Rc::new(own)
            });
        }
        ok
    }

    /// G1: a conditional's `if` arg is set before it.
    fn if_arg_set(&mut self, reading: &Reading<'_>) -> bool {
        let node = reading.node;
        if node.category() == Some(Category::Conditional)
            && let Some(if_arg) = node
                .if_arg
                .as_ref()
                .filter(|arg| !reading.before.contains(arg.value.as_str()))
        {
            let message = format!(
                "`if` arg {} is not set before this node; expected a sequence arg or an arg set by a node this one depends on",
                (reading.explain)(&if_arg.value)
            );
            self.push("G1", reading.seq, Some(node), "if", if_arg.pos, message);
            return false;
        }
        true
    }

    /// G3: the lists a node expands and the args it is given are set before it.
    fn inputs_set(&mut self, reading: &Reading<'_>) -> bool {
        let Reading {
            seq, node, before, ..
        } = *reading;
        let explain = reading.explain;
        let mut missing: Vec<(&str, Pos, &str)> = Vec::new();
        for entry in &node.each {
            if let Some((list, _)) = crate::model::split_each(&entry.value)
                && !before.contains(list)
                && !missing.iter().any(|(n, ..)| *n == list)
            {
                missing.push((list, entry.pos, "each"));
            }
        }
        for arg in node.args.iter().filter_map(|arg| arg.value.as_ref()) {
            let Some(given) = arg.given() else { continue };
            if !before.contains(given) && !missing.iter().any(|(n, ..)| *n == given) {
                let pos = arg
                    .given
                    .as_ref()
                    .or(arg.expected.as_ref())
                    .map_or(node.pos, |g| g.pos);
                missing.push((given, pos, "args.given"));
            }
        }
        let Some(&(_, pos, field)) = missing.first() else {
            return true;
        };
        let names: Vec<String> = missing.iter().map(|(name, ..)| explain(name)).collect();
        let message = format!(
            "{} {} not set before this node; expected a sequence arg or an arg set by a node this one depends on",
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" }
        );
        self.push("G3", seq, Some(node), field, pos, message);
        false
    }

    /// G6, G7, G8: call cycles, calls to sequences with errors, and `sets` of calls.
    fn across_sequences(&mut self, errored: &mut HashSet<&'s str>) {
        let seqs = self.specs.sequences();
        let calls = CallGraph::new(seqs);
        self.call_cycles(seqs, &calls, errored);
        self.failed_callees(seqs, &calls, errored);
        // G7: a call's `sets` are set by the called sequence.
        for seq in seqs {
            if errored.contains(seq.name.as_str()) {
                continue;
            }
            for node in &seq.nodes {
                self.call_sets(seq, node);
            }
        }
    }

    /// G8: sequences left over by the callees-first order are in a call cycle or call
    /// into one.
    fn call_cycles(
        &mut self,
        seqs: &'s [Sequence],
        calls: &CallGraph,
        errored: &mut HashSet<&'s str>,
    ) {
        for &idx in &calls.left {
            if let Some(cycle) = call_cycle(idx, &calls.callees, &calls.pending) {
                let seq = &seqs[idx];
                let mut names: Vec<&str> = cycle.iter().map(|&i| seqs[i].name.as_str()).collect();
                names.push(&seq.name);
                let node = seq.nodes.iter().find(|node| {
                    node.called_sequences()
                        .contains(&seqs[cycle[1 % cycle.len()]].name.as_str())
                });
                let pos = node.map_or(seq.pos, call_pos);
                let message = format!(
                    "sequence calls itself through {}; expected sequences that do not call themselves, directly or through others",
                    names.join(" → ")
                );
                self.push("G8", seq, node, call_field(node), pos, message);
                errored.insert(&seq.name);
            }
        }
    }

    /// G6: callers of sequences with errors, callees first; then whatever is left.
    fn failed_callees(
        &mut self,
        seqs: &'s [Sequence],
        calls: &CallGraph,
        errored: &mut HashSet<&'s str>,
    ) {
        for idx in calls.order.iter().chain(&calls.left).copied() {
            let seq = &seqs[idx];
            if errored.contains(seq.name.as_str()) {
                continue;
            }
            let failed: Vec<&str> = calls.callees[idx]
                .iter()
                .map(|&callee| seqs[callee].name.as_str())
                .filter(|name| errored.contains(name))
                .collect();
            if failed.is_empty() {
                continue;
            }
            let node = seq.nodes.iter().find(|node| {
                node.called_sequences()
                    .iter()
                    .any(|called| failed.contains(called))
            });
            let pos = node.map_or(seq.pos, call_pos);
            let message = format!(
                "calls {} {}, which {} errors; expected calls to sequences that pass their checks",
                if failed.len() == 1 {
                    "sequence"
                } else {
                    "sequences"
                },
                quoted(failed.iter().copied()),
                if failed.len() == 1 { "has" } else { "have" }
            );
            self.push("G6", seq, node, call_field(node), pos, message);
            errored.insert(&seq.name);
        }
    }

    fn call_sets(&mut self, seq: &Sequence, node: &Node) {
        if !matches!(
            node.category(),
            Some(Category::Sequence | Category::Conditional)
        ) {
            return;
        }
        let called: Vec<&str> = node
            .called_sequences()
            .into_iter()
            .filter(|n| self.specs.exists(n))
            .collect();
        if called.is_empty() {
            return;
        }
        let sets_of = |name: &str| -> HashSet<&str> {
            match self.specs.get(name) {
                Some(callee) => callee
                    .arg_names()
                    .chain(
                        callee
                            .nodes
                            .iter()
                            .flat_map(|n| n.node_sets().filter_map(|s| s.r#as())),
                    )
                    .collect(),
                None => HashSet::new(), // the built-in noop sets nothing
            }
        };
        let mut missing: Vec<(&str, Vec<&str>, Pos)> = Vec::new();
        for set in node.sets.iter().filter_map(|s| s.value.as_ref()) {
            let Some(arg) = set.arg.as_ref() else {
                continue;
            };
            let not_setting: Vec<&str> = called
                .iter()
                .copied()
                .filter(|c| !sets_of(c).contains(arg.value.as_str()))
                .collect();
            if !not_setting.is_empty() {
                missing.push((&arg.value, not_setting, arg.pos));
            }
        }
        if let Some(&(_, _, pos)) = missing.first() {
            let parts: Vec<String> = missing
                .iter()
                .map(|(arg, by, _)| {
                    let by: Vec<&str> = by
                        .iter()
                        .map(|b| {
                            if *b == BUILTIN_NOOP {
                                "noop (built in)"
                            } else {
                                b
                            }
                        })
                        .collect();
                    format!("`{arg}` (not set by {})", quoted(by))
                })
                .collect();
            let message = format!(
                "{} in `sets` {} not set by the called sequence: {}; expected args that every called sequence sets (its args, or args its nodes set)",
                if parts.len() == 1 { "arg" } else { "args" },
                if parts.len() == 1 { "is" } else { "are" },
                parts.join(", ")
            );
            self.push("G7", seq, Some(node), "sets.arg", pos, message);
        }
    }
}

/// A node as the walk of its sequence reaches it: the args set before it, and how to
/// explain one that is not.
#[derive(Clone, Copy)]
struct Reading<'a> {
    seq: &'a Sequence,
    node: &'a Node,
    before: &'a HashSet<&'a str>,
    explain: &'a dyn Fn(&str) -> String,
}

/// The args set before a node: the sequence's own for a first node, else those set
/// after its predecessors (shared when it has one).
fn set_before<'a>(
    preds: &[usize],
    after: &[Option<Rc<HashSet<&'a str>>>],
    base: &Rc<HashSet<&'a str>>,
) -> Rc<HashSet<&'a str>> {
    let after_pred = |pred: usize| after[pred].as_ref().expect("preds come first in the order");
    match preds {
        [] => Rc::clone(base),
        [pred] => Rc::clone(after_pred(*pred)),
        _ => {
            let mut union: HashSet<&str> = HashSet::new();
            for &pred in preds {
                union.extend(after_pred(pred).iter().copied());
            }
            Rc::new(union)
        }
    }
}

/// Calls between the sequences of the specs (the built-in noop calls nothing), and the
/// sequences in callees-first order.
struct CallGraph {
    /// Per sequence: the sequences its nodes call.
    callees: Vec<Vec<usize>>,
    /// Sequences whose callees all come before them.
    order: Vec<usize>,
    /// The others: in a call cycle or calling into one.
    left: Vec<usize>,
    /// Per sequence: callees not ordered (non-zero only for `left`).
    pending: Vec<usize>,
}

impl CallGraph {
    fn new(seqs: &[Sequence]) -> CallGraph {
        let index: HashMap<&str, usize> = seqs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect();
        let callees: Vec<Vec<usize>> = seqs
            .iter()
            .map(|seq| {
                let mut called: Vec<usize> = seq
                    .nodes
                    .iter()
                    .flat_map(|node| node.called_sequences())
                    .filter_map(|name| index.get(name).copied())
                    .collect();
                called.sort_unstable();
                called.dedup();
                called
            })
            .collect();
        // A topological order of the reversed call graph: callees first.
        let mut callers: Vec<Vec<usize>> = vec![Vec::new(); seqs.len()];
        for (caller, called) in callees.iter().enumerate() {
            for &callee in called {
                callers[callee].push(caller);
            }
        }
        let sorted = proto::topo::sort::<VecDeque<usize>, _>(
            callees.iter().map(Vec::len).collect(),
            |idx| callers[idx].iter().copied(),
        );
        let left = sorted.left();
        let proto::topo::Sorted {
            order,
            in_degree: pending,
        } = sorted;
        CallGraph {
            callees,
            order,
            left,
            pending,
        }
    }
}

/// A call cycle through `start`, following only sequences left over by Kahn's algorithm.
fn call_cycle(start: usize, callees: &[Vec<usize>], pending: &[usize]) -> Option<Vec<usize>> {
    // Breadth-first search back to `start`, remembering parents for the path.
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(idx) = queue.pop_front() {
        for &next in &callees[idx] {
            if pending[next] == 0 {
                continue;
            }
            if next == start {
                let mut path = vec![idx];
                let mut at = idx;
                while at != start {
                    at = parent[&at];
                    path.push(at);
                }
                path.reverse();
                return Some(path);
            }
            if let std::collections::hash_map::Entry::Vacant(entry) = parent.entry(next) {
                entry.insert(idx);
                queue.push_back(next);
            }
        }
    }
    None
}

fn call_pos(node: &Node) -> Pos {
    match node.category() {
        Some(Category::Conditional) => node.pos_of("eq"),
        _ => node.pos_of("type"),
    }
}

fn call_field(node: Option<&Node>) -> &'static str {
    match node.and_then(Node::category) {
        Some(Category::Conditional) => "eq",
        Some(_) => "type",
        None => "",
    }
}

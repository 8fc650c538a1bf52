//! Building one request's chain: sequences inlined recursively, nodes expanded over
//! `each:` lists, conditionals resolved, every job made by the factory (grapher.md §4-§9).

use std::collections::{BTreeMap, HashSet};

use job::{CreateContext, Job, JobId, NoopJob};
use proto::{JobArgs, JobChain, State};
use rand::RngExt as _;
use serde_json::Value;
use spec::{BUILTIN_NOOP, Category, Node, Sequence, SequenceGraph};

use crate::{Error, Grapher, names};

mod join;
#[cfg(test)]
pub(crate) use join::wave_ends;

/// Builds the chain of request type `request_type` from its top-level job args.
pub(crate) fn build_chain(
    grapher: &Grapher,
    request_id: &str,
    request_type: &str,
    mut job_args: JobArgs,
) -> Result<JobChain, Error> {
    let mut builder = Builder {
        grapher,
        request_id,
        jobs: Vec::new(),
        succs: Vec::new(),
        ids: HashSet::new(),
        rng: rand::rng(),
        each: JobArgs::new(),
    };
    let graph_name = names::request_place(request_type);
    // The request's own sequence is not retried (Spin Cycle records `0s` as its wait).
    let no_retry = Retry {
        count: 0,
        wait: "0s".to_owned(),
    };
    let piece = builder.sequence(&graph_name, request_type, &mut job_args, no_retry, None)?;
    debug_assert_eq!(piece.begin, 0);
    let jobs = &builder.jobs;
    let adjacency_list: BTreeMap<String, Vec<String>> = builder
        .succs
        .iter()
        .enumerate()
        .filter(|(_, succs)| !succs.is_empty())
        .map(|(idx, succs)| {
            let ids = succs.iter().map(|&succ| jobs[succ].id.clone()).collect();
            (jobs[idx].id.clone(), ids)
        })
        .collect();
    // Jobs are large: sort their positions by id, then move each job once into the map
    // (collecting from sorted input builds the map without further moves).
    let mut order: Vec<usize> = (0..builder.jobs.len()).collect();
    order.sort_unstable_by(|&a, &b| builder.jobs[a].id.cmp(&builder.jobs[b].id));
    let mut slots: Vec<Option<proto::Job>> = builder.jobs.into_iter().map(Some).collect();
    let jobs: BTreeMap<String, proto::Job> = order
        .into_iter()
        .filter_map(|idx| slots[idx].take())
        .map(|job| (job.id.clone(), job))
        .collect();
    Ok(JobChain {
        request_id: request_id.to_owned(),
        jobs,
        adjacency_list,
        state: State::Pending,
        finished_jobs: 0,
    })
}

/// A sub-graph with one entry and one exit job (indices into `Builder::jobs`).
#[derive(Debug, Clone, Copy)]
struct Piece {
    begin: usize,
    end: usize,
}

/// One slot of a sequence graph: the sequence's own begin and end noop nodes around its
/// user nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Begin,
    Node(usize),
    End,
}

/// The edges into a sub-graph's end job, which splicing adds and removes; kept apart so
/// that removing one is O(1), and written out in the order they were added.
#[derive(Debug, Default)]
struct EdgesToEnd {
    order: Vec<usize>,
    present: HashSet<usize>,
}

impl EdgesToEnd {
    fn add(&mut self, from: usize) {
        if self.present.insert(from) {
            self.order.push(from);
        }
    }

    fn remove(&mut self, from: usize) {
        self.present.remove(&from);
    }
}

struct Builder<'g> {
    grapher: &'g Grapher,
    request_id: &'g str,
    jobs: Vec<proto::Job>,
    succs: Vec<Vec<usize>>,
    /// Job ids used so far, packed into integers.
    ids: HashSet<u64>,
    rng: rand::rngs::ThreadRng,
    /// The `each:` elements of the iterations being built (outermost first); every job
    /// made meanwhile records them.
    each: JobArgs,
}

const ID_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

impl Builder<'_> {
    /// A job id unique in the request: 4 random alphanumerics, as Spin Cycle's; a fifth
    /// character once the request holds so many jobs that 4 keep colliding.
    fn new_id(&mut self) -> String {
        let len = if self.ids.len() > 2_000_000 { 6 } else { 4 };
        loop {
            let mut packed: u64 = len;
            let mut id = String::with_capacity(len as usize);
            for _ in 0..len {
                let idx = self.rng.random_range(0..ID_CHARS.len());
                packed = packed << 8 | ID_CHARS[idx] as u64;
                id.push(char::from(ID_CHARS[idx]));
            }
            if self.ids.insert(packed) {
                return id;
            }
        }
    }

    /// Makes, creates and serializes one job, and adds it to the chain. `args` are its
    /// job args, which its `create` may change.
    fn job(&mut self, new: NewJob<'_>, args: &mut JobArgs) -> Result<usize, Error> {
        let NewJob {
            place,
            job_type,
            name,
            sets,
            keep_args,
            retry,
            timeout,
        } = new;
        let id = self.new_id();
        let job_id = JobId {
            job_type: job_type.to_owned(),
            name: name.to_owned(),
            id: id.clone(),
            request_id: self.request_id.to_owned(),
        };
        let fail = |source: job::Error| Error::Job {
            sequence: place.sequence.to_owned(),
            node: place.node.to_owned(),
            job_name: name.to_owned(),
            job_type: job_type.to_owned(),
            source: Box::new(source),
        };
        let mut made: Box<dyn Job> = match self.grapher.factory.make(&job_id) {
            Ok(made) => made,
            // Wrappers and sequences' own begin and end jobs work without a factory that
            // knows `noop`.
            Err(job::Error::UnknownType { .. }) if job_type == BUILTIN_NOOP => Box::new(NoopJob),
            Err(err) => return Err(fail(err)),
        };
        let snapshot = if keep_args {
            args.clone()
        } else {
            JobArgs::new()
        };
        made.create(args, &CreateContext { sets }).map_err(fail)?;
        let bytes = made.serialize().map_err(fail)?;
        self.jobs.push(proto::Job {
            id,
            name: name.to_owned(),
            job_type: job_type.to_owned(),
            bytes,
            state: State::Pending,
            args: snapshot,
            data: JobArgs::new(),
            retry: retry.count,
            retry_wait: retry.wait,
            sequence_id: String::new(),
            sequence_retry: 0,
            sequence_retry_wait: String::new(),
            parallel: 0,
            timeout,
            sequence_timeout: String::new(),
            each: self.each.clone(),
            tries: 0,
            locks: Vec::new(),
            releases_locks_of: String::new(),
            elements: None,
        });
        self.succs.push(Vec::new());
        Ok(self.jobs.len() - 1)
    }

    /// A begin/end pair of noop wrapper jobs, `<prefix>_begin → <prefix>_end`.
    fn wrappers(&mut self, place: Place<'_>, prefix: &str) -> Result<Piece, Error> {
        let begin = self.job(
            NewJob::noop(place, &names::begin(prefix), false),
            &mut JobArgs::new(),
        )?;
        let end = self.job(
            NewJob::noop(place, &names::end(prefix), false),
            &mut JobArgs::new(),
        )?;
        Ok(Piece { begin, end })
    }

    fn edge(&mut self, from: usize, to: usize) {
        self.succs[from].push(to);
    }

    /// Builds sequence `seq_name` between wrappers named `graph_name`, to be retried as
    /// `retry` says and each run bounded by `timeout` (the calling node's) and the
    /// sequence's own `timeout:`, whichever is shorter; returns its piece.
    // Long because it is Spin Cycle's sequence building in one pass over the slots
    // (begin, the nodes in dependency order, end): each slot's piece is joined to the
    // pieces it follows as it is made; the node's own pieces are `node_piece`'s.
    fn sequence(
        &mut self,
        graph_name: &str,
        seq_name: &str,
        job_args: &mut JobArgs,
        retry: Retry,
        timeout: Option<std::time::Duration>,
    ) -> Result<Piece, Error> {
        let first_job = self.jobs.len();
        let seq: Option<&Sequence> = self.grapher.specs.get(seq_name);
        let graph: Option<&SequenceGraph> = self.grapher.graphs.get(seq_name);
        let (seq, graph) = match (seq, graph) {
            (Some(seq), Some(graph)) => (Some(seq), Some(graph)),
            (None, _) if seq_name == BUILTIN_NOOP => (None, None),
            (None, _) => {
                return Err(Error::Spec {
                    sequence: seq_name.to_owned(),
                    message: "no such sequence in the specs".to_owned(),
                });
            }
            (Some(_), None) => {
                return Err(Error::Spec {
                    sequence: seq_name.to_owned(),
                    message:
                        "its nodes' deps do not form a graph without cycles (run `spindle lint`)"
                            .to_owned(),
                });
            }
        };
        // Optional and static args the caller or parent did not give get their defaults.
        if let Some(seq) = seq {
            for (kind, decl) in seq.args.all() {
                if kind == proto::RequestArgType::Required {
                    continue;
                }
                if let (Some(name), Some(default)) = (decl.name(), &decl.default) {
                    job_args.get_or_insert_with(name.to_owned(), || default.value.clone());
                }
            }
        }
        let place_name = seq.map_or(BUILTIN_NOOP, |seq| seq.name.as_str());
        let outer = self.wrappers(
            Place {
                sequence: place_name,
                node: "",
            },
            graph_name,
        )?;
        let mut to_end = EdgesToEnd::default();
        to_end.add(outer.begin);

        // The slots in order: begin, the user nodes in dependency order, end.
        let nodes: &[Node] = seq.map_or(&[], |seq| seq.nodes.as_slice());
        let order: Vec<usize> = graph.map_or_else(Vec::new, |graph| graph.order.clone());
        let mut has_succ = vec![false; nodes.len()];
        if let Some(graph) = graph {
            for preds in &graph.preds {
                for &pred in preds {
                    has_succ[pred] = true;
                }
            }
        }
        let slots = std::iter::once(Slot::Begin)
            .chain(order.iter().map(|&idx| Slot::Node(idx)))
            .chain(std::iter::once(Slot::End));
        let mut pieces: Vec<Option<Piece>> = vec![None; nodes.len()];
        let mut begin_piece = None;
        for slot in slots {
            let (piece, preds): (Piece, Vec<Piece>) = match slot {
                Slot::Begin => {
                    let job = self.noop_node(place_name, &names::begin(place_name))?;
                    (
                        Piece {
                            begin: job,
                            end: job,
                        },
                        Vec::new(),
                    )
                }
                Slot::End => {
                    let job = self.noop_node(place_name, &names::end(place_name))?;
                    let mut preds: Vec<Piece> = (0..nodes.len())
                        .filter(|&idx| !has_succ[idx])
                        .filter_map(|idx| pieces[idx])
                        .collect();
                    if preds.is_empty() {
                        preds.extend(begin_piece);
                    }
                    (
                        Piece {
                            begin: job,
                            end: job,
                        },
                        preds,
                    )
                }
                Slot::Node(idx) => {
                    let node = &nodes[idx];
                    let seq = seq.expect("a sequence with nodes is in the specs");
                    let piece = self.node(seq, node, job_args)?;
                    let preds: Vec<Piece> = match graph.map(|g| g.preds[idx].as_slice()) {
                        Some([]) | None => begin_piece.into_iter().collect(),
                        Some(preds) => preds.iter().filter_map(|&p| pieces[p]).collect(),
                    };
                    pieces[idx] = Some(piece);
                    (piece, preds)
                }
            };
            if slot == Slot::Begin {
                begin_piece = Some(piece);
            }
            // Splice the piece in: after each predecessor's end, before the sub-graph's end.
            if preds.is_empty() {
                self.edge(outer.begin, piece.begin);
                to_end.remove(outer.begin);
            } else {
                for pred in &preds {
                    self.edge(pred.end, piece.begin);
                    to_end.remove(pred.end);
                }
            }
            to_end.add(piece.end);
        }
        for from in to_end.order {
            if to_end.present.contains(&from) {
                self.edge(from, outer.end);
            }
        }
        // Jobs of this sequence (not of sequences inside it) belong to it.
        let sequence_id = self.jobs[outer.begin].id.clone();
        for job in &mut self.jobs[first_job..] {
            if job.sequence_id.is_empty() {
                job.sequence_id = sequence_id.clone();
            }
        }
        let timeout = match (timeout, seq.and_then(Sequence::timeout)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let begin = &mut self.jobs[outer.begin];
        begin.sequence_retry = retry.count;
        begin.sequence_retry_wait = retry.wait;
        begin.sequence_timeout = timeout.map(proto::duration::format).unwrap_or_default();
        Ok(outer)
    }

    /// A sequence's own begin or end node: a `noop` job with empty args.
    fn noop_node(&mut self, sequence: &str, name: &str) -> Result<usize, Error> {
        let place = Place {
            sequence,
            node: name,
        };
        self.job(NewJob::noop(place, name, true), &mut JobArgs::new())
    }

    /// One node, expanded over its `each:` lists; returns the piece to splice in.
    fn node(
        &mut self,
        seq: &Sequence,
        node: &Node,
        job_args: &mut JobArgs,
    ) -> Result<Piece, Error> {
        let (lists, n_iterations) = expansion(seq, node, job_args)?;
        let mut iteration_pieces = Vec::with_capacity(n_iterations);
        for iteration in 0..n_iterations {
            let mut inputs = node_inputs(seq, node, job_args, &lists, iteration)?;
            let outer = (!lists.is_empty()).then(|| self.each.clone());
            for (_, element, items) in &lists {
                self.each
                    .insert((*element).to_owned(), items[iteration].clone());
            }
            let piece = self.node_piece(seq, node, job_args, &mut inputs);
            if let Some(outer) = outer {
                self.each = outer;
            }
            let piece = piece?;
            // With several iterations the last one's outputs win, as in Spin Cycle.
            node_outputs(seq, node, &inputs, job_args)?;
            iteration_pieces.push(piece);
        }
        self.join_iterations(seq, node, &iteration_pieces)
    }

    /// One iteration of a node: its job, or the sequence it calls (or picks).
    fn node_piece(
        &mut self,
        seq: &Sequence,
        node: &Node,
        job_args: &JobArgs,
        inputs: &mut JobArgs,
    ) -> Result<Piece, Error> {
        let mut locks = crate::locks::node_locks(&self.grapher.specs, seq, node, inputs)?;
        let piece = self.node_piece_unlocked(seq, node, job_args, inputs)?;
        if let Some(Category::Job) = node.category() {
            let job_type = node.node_type().unwrap_or_default();
            crate::locks::pool_locks(&self.grapher.specs, job_type, &mut locks);
        } else if !locks.is_empty() {
            // A sequence's locks: taken by its first job, released by its last.
            let (begin, end) = (
                self.jobs[piece.begin].id.clone(),
                self.jobs[piece.end].id.clone(),
            );
            for lock in &mut locks {
                lock.until.clone_from(&end);
            }
            self.jobs[piece.end].releases_locks_of = begin;
        }
        self.jobs[piece.begin].locks = locks;
        Ok(piece)
    }

    fn node_piece_unlocked(
        &mut self,
        seq: &Sequence,
        node: &Node,
        job_args: &JobArgs,
        inputs: &mut JobArgs,
    ) -> Result<Piece, Error> {
        match node.category() {
            Some(Category::Job) => {
                let new = NewJob {
                    place: Place {
                        sequence: &seq.name,
                        node: &node.name,
                    },
                    job_type: node.node_type().unwrap_or_default(),
                    name: &node.name,
                    sets: node
                        .node_sets()
                        .filter_map(|set| set.arg().map(str::to_owned))
                        .collect(),
                    keep_args: true,
                    retry: Retry::of(node),
                    timeout: node
                        .timeout
                        .as_ref()
                        .map(|t| t.value.clone())
                        .unwrap_or_default(),
                };
                let job = self.job(new, inputs)?;
                Ok(Piece {
                    begin: job,
                    end: job,
                })
            }
            Some(Category::Sequence) => self.sequence(
                &names::sequence_place(&node.name),
                node.node_type().unwrap_or_default(),
                inputs,
                Retry::of(node),
                node.timeout(),
            ),
            Some(Category::Conditional) => {
                let chosen = choose_branch(node, job_args, inputs)
                    .map_err(|message| value_error(seq, node, message))?;
                self.sequence(
                    &format!("conditional_{}", node.name),
                    &chosen,
                    inputs,
                    Retry::of(node),
                    node.timeout(),
                )
            }
            None => Err(Error::Spec {
                sequence: seq.name.clone(),
                message: format!(
                    "node `{}` has no valid category (run `spindle lint`)",
                    node.name
                ),
            }),
        }
    }
}

/// Where a job comes from, for error messages: its sequence and node.
#[derive(Debug, Clone, Copy)]
struct Place<'a> {
    sequence: &'a str,
    node: &'a str,
}

/// A job or sequence retry setting: how many times, and the wait between.
#[derive(Debug, Clone, Default)]
struct Retry {
    count: u32,
    /// A Go duration; empty when there is no retry, `0s` when there is one without a
    /// `retryWait`.
    wait: String,
}

impl Retry {
    /// The node's `retry` and `retryWait`.
    fn of(node: &Node) -> Retry {
        let wait = match (&node.retry_wait, node.retry()) {
            (Some(wait), _) => wait.value.clone(),
            (None, 0) => String::new(),
            (None, _) => "0s".to_owned(),
        };
        Retry {
            count: node.retry(),
            wait,
        }
    }
}

/// What `Builder::job` makes.
#[derive(Debug)]
struct NewJob<'a> {
    place: Place<'a>,
    job_type: &'a str,
    name: &'a str,
    /// The args the node declares that the job sets.
    sets: Vec<String>,
    /// Whether the chain keeps the job's args (user nodes and sequences' own begin and end
    /// jobs do; wrappers do not).
    keep_args: bool,
    retry: Retry,
    /// The node's `timeout:`, as written (a Go duration); empty for none.
    timeout: String,
}

impl<'a> NewJob<'a> {
    /// A built-in job the grapher adds (a wave's wait or approval), keeping its args.
    fn builtin(place: Place<'a>, job_type: &'a str, name: &'a str) -> NewJob<'a> {
        NewJob {
            place,
            job_type,
            name,
            sets: Vec::new(),
            keep_args: true,
            retry: Retry::default(),
            timeout: String::new(),
        }
    }

    /// A `noop` job without sets or retries.
    fn noop(place: Place<'a>, name: &'a str, keep_args: bool) -> NewJob<'a> {
        NewJob {
            place,
            job_type: BUILTIN_NOOP,
            name,
            sets: Vec::new(),
            keep_args,
            retry: Retry::default(),
            timeout: String::new(),
        }
    }
}

/// A list a node expands over: its arg name, the element's name, the values.
type List<'a> = (&'a str, &'a str, Vec<Value>);

fn value_error(seq: &Sequence, node: &Node, message: String) -> Error {
    Error::Value {
        sequence: seq.name.clone(),
        node: node.name.clone(),
        message,
    }
}

/// How a list arg may be given, as errors say it.
const LIST_FORMS: &str =
    r#"a list: JSON such as ["a","b"], or items separated by commas such as a,b"#;

/// The lists a node expands over (`each:`), all of one length, and that length (1 for a
/// node without `each:`).
///
/// A list arg is a JSON list, or a string of items separated by commas (as a command
/// line or a form gives it).
fn expansion<'n>(
    seq: &Sequence,
    node: &'n Node,
    job_args: &JobArgs,
) -> Result<(Vec<List<'n>>, usize), Error> {
    let mut lists: Vec<List<'n>> = Vec::new();
    for (list, element) in node.each_pairs() {
        match job_args.get(list) {
            None => {
                return Err(value_error(
                    seq,
                    node,
                    format!(
                        "`each: {list}:{element}`: arg `{list}` is not set; expected {LIST_FORMS}"
                    ),
                ));
            }
            Some(Value::Array(items)) => lists.push((list, element, items.clone())),
            // A list typed on a command line or in a form: `a,b`.
            Some(Value::String(text)) if !text.trim().is_empty() => {
                let items = text
                    .split(',')
                    .map(|item| Value::String(item.trim().to_owned()))
                    .collect();
                lists.push((list, element, items));
            }
            Some(other) => {
                return Err(value_error(
                    seq,
                    node,
                    format!(
                        "`each: {list}:{element}`: arg `{list}` is {}; expected {LIST_FORMS}",
                        proto::json_kind(other)
                    ),
                ));
            }
        }
    }
    let Some((_, _, first)) = lists.first() else {
        return Ok((lists, 1));
    };
    if let Some((list, _, items)) = lists
        .iter()
        .find(|(_, _, items)| items.len() != first.len())
    {
        return Err(value_error(
            seq,
            node,
            format!(
                "`each:` lists have different lengths: `{}` has {} elements, `{list}` has {}; expected lists of equal length",
                lists[0].0,
                first.len(),
                items.len()
            ),
        ));
    }
    let n_iterations = first.len();
    Ok((lists, n_iterations))
}

/// The job args of one iteration of a node: its `args` (each `given` as its `expected`)
/// and the iteration's element of each list.
fn node_inputs(
    seq: &Sequence,
    node: &Node,
    job_args: &JobArgs,
    lists: &[List<'_>],
    iteration: usize,
) -> Result<JobArgs, Error> {
    let mut inputs = JobArgs::new();
    for arg in node.node_args() {
        let (Some(expected), Some(given)) = (arg.expected(), arg.given()) else {
            continue;
        };
        match job_args.get(given) {
            Some(value) => inputs.insert(expected.to_owned(), value.clone()),
            None => {
                return Err(value_error(
                    seq,
                    node,
                    format!(
                        "arg `{given}` (passed as `{expected}`) is not set; expected it to be a request arg or set by an earlier node"
                    ),
                ));
            }
        };
    }
    for (_, element, items) in lists {
        inputs.insert((*element).to_owned(), items[iteration].clone());
    }
    Ok(inputs)
}

/// Copies what a node's job (or the nodes of its sequence) set into the job args, under
/// the node's `sets` names; an arg it declares but did not set is an error.
fn node_outputs(
    seq: &Sequence,
    node: &Node,
    inputs: &JobArgs,
    job_args: &mut JobArgs,
) -> Result<(), Error> {
    for set in node.node_sets() {
        let (Some(arg), Some(as_name)) = (set.arg(), set.r#as()) else {
            continue;
        };
        let Some(value) = inputs.get(arg) else {
            let what = match node.category() {
                Some(Category::Job) => {
                    format!("job (type `{}`)", node.node_type().unwrap_or_default())
                }
                _ => "called sequence".to_owned(),
            };
            return Err(value_error(
                seq,
                node,
                format!("the {what} did not set `{arg}`, which the node's `sets` declares"),
            ));
        };
        job_args.insert(as_name.to_owned(), value.clone());
    }
    Ok(())
}

/// Picks a conditional's sequence from its `if` arg; the arg is passed on under its name.
fn choose_branch(node: &Node, job_args: &JobArgs, inputs: &mut JobArgs) -> Result<String, String> {
    let Some(if_arg) = node.if_arg.as_ref().map(|arg| arg.value.as_str()) else {
        return Err(
            "conditional node has no `if`; expected the name of the arg that picks the branch"
                .to_owned(),
        );
    };
    let options = || {
        let mut keys: Vec<&str> = node.eq.iter().map(|(key, _)| key.value.as_str()).collect();
        keys.sort_unstable();
        keys.join(", ")
    };
    let value = match job_args.get(if_arg) {
        None | Some(Value::Null) => {
            return Err(format!(
                "`if: {if_arg}`: arg `{if_arg}` is not set; expected one of: {}",
                options()
            ));
        }
        Some(value) => value.clone(),
    };
    let text = match &value {
        Value::String(text) => text.clone(),
        Value::Bool(_) | Value::Number(_) => value.to_string(),
        other => {
            return Err(format!(
                "`if: {if_arg}`: arg `{if_arg}` is {}; expected a string, one of: {}",
                proto::json_kind(other),
                options()
            ));
        }
    };
    inputs.insert(if_arg.to_owned(), value);
    let branch = |key: &str| {
        node.eq
            .iter()
            .find(|(k, _)| k.value == key)
            .map(|(_, target)| target.value.clone())
    };
    match branch(&text).or_else(|| branch("default")) {
        Some(chosen) => Ok(chosen),
        None => Err(format!(
            "`if: {if_arg}`: value {text:?} matches no branch and there is no `default`; expected one of: {}",
            options()
        )),
    }
}

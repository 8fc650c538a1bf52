//! The spec model: sequences, their args and ACLs, and their nodes, as written in the
//! files (normalization is applied through accessors such as [`NodeArg::given`]), with the
//! position of everything a diagnostic may point at.

use proto::RequestArgType;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::{BUILTIN_NOOP, Pos};

/// A value with the position it was written at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spanned<T> {
    pub value: T,
    pub pos: Pos,
}

impl<T> Spanned<T> {
    pub fn new(value: T, pos: Pos) -> Spanned<T> {
        Spanned { value, pos }
    }
}

/// Every sequence of a set of spec files, in the order they were read.
#[derive(Debug, Default)]
pub struct Specs {
    sequences: Vec<Sequence>,
    index: HashMap<String, usize>,
    schedules: Vec<crate::Schedule>,
    pools: Vec<Pool>,
}

impl Specs {
    /// The `pools:` of every file, in the order they were read.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// The pools every job of `job_type` is in.
    pub fn pools_of<'s>(&'s self, job_type: &'s str) -> impl Iterator<Item = &'s Pool> + 's {
        self.pools
            .iter()
            .filter(move |pool| pool.types.iter().any(|t| t.value == job_type))
    }

    /// Adds a pool; a pool of the same name is returned in the error.
    pub(crate) fn add_pool(&mut self, pool: Pool) -> Result<(), Box<Pool>> {
        if self.pools.iter().any(|p| p.name == pool.name) {
            return Err(Box::new(pool));
        }
        self.pools.push(pool);
        Ok(())
    }

    /// The `schedules:` of every file, in the order they were read.
    pub fn schedules(&self) -> &[crate::Schedule] {
        &self.schedules
    }

    pub(crate) fn add_schedule(
        &mut self,
        schedule: crate::Schedule,
    ) -> Result<(), Box<crate::Schedule>> {
        if self.schedules.iter().any(|s| s.name == schedule.name) {
            return Err(Box::new(schedule));
        }
        self.schedules.push(schedule);
        Ok(())
    }

    /// Adds a sequence; a sequence of the same name is returned in the error.
    pub(crate) fn insert(&mut self, sequence: Sequence) -> Result<(), Box<Sequence>> {
        if self.index.contains_key(&sequence.name) {
            return Err(Box::new(sequence));
        }
        self.index
            .insert(sequence.name.clone(), self.sequences.len());
        self.sequences.push(sequence);
        Ok(())
    }

    pub fn sequences(&self) -> &[Sequence] {
        &self.sequences
    }

    /// A sequence defined in the specs (not the built-in `noop`).
    pub fn get(&self, name: &str) -> Option<&Sequence> {
        self.index.get(name).map(|&idx| &self.sequences[idx])
    }

    /// Whether a node may call `name`: a sequence of the specs or the built-in `noop`.
    pub fn exists(&self, name: &str) -> bool {
        name == BUILTIN_NOOP || self.index.contains_key(name)
    }

    /// The request types: sequences with `request: true`, sorted by name.
    pub fn requests(&self) -> Vec<&Sequence> {
        let mut requests: Vec<&Sequence> = self.sequences.iter().filter(|s| s.request).collect();
        requests.sort_by(|a, b| a.name.cmp(&b.name));
        requests
    }

    pub fn len(&self) -> usize {
        self.sequences.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sequences.is_empty()
    }
}

/// A named set of nodes; with `request: true`, a request type.
#[derive(Debug, Clone)]
pub struct Sequence {
    pub name: String,
    /// The file that defines it, as given to the loader.
    pub file: Arc<PathBuf>,
    /// Where the sequence's name is written.
    pub pos: Pos,
    pub request: bool,
    pub args: SequenceArgs,
    pub acl: Vec<Acl>,
    /// In file order.
    pub nodes: Vec<Node>,
    /// Spindle: a Go duration bounding every run of the sequence (on a request sequence,
    /// the request's deadline).
    pub timeout: Option<Spanned<String>>,
    /// Spindle: the locks a request of this type holds while it runs (issue #34).
    pub locks: Vec<Lock>,
    /// Spindle: a request's place in its locks' queues unless its creator gives one
    /// (higher is served first; 0 when not written).
    pub priority: Option<Spanned<i32>>,
    /// Positions of the fields written, by field name.
    pub field_pos: BTreeMap<&'static str, Pos>,
}

impl Sequence {
    /// The bound on every run, when `timeout` is set and a duration.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
            .as_ref()
            .and_then(|timeout| proto::duration::parse(&timeout.value).ok())
            .filter(|timeout| !timeout.is_zero())
    }

    /// Where `field` is written, or the sequence's own position when it is not.
    pub fn pos_of(&self, field: &str) -> Pos {
        self.field_pos.get(field).copied().unwrap_or(self.pos)
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|node| node.name == name)
    }

    /// Names of all required, optional and static args.
    pub fn arg_names(&self) -> impl Iterator<Item = &str> {
        self.args.all().filter_map(|(_, arg)| arg.name())
    }
}

/// The three kinds of sequence args, each in spec order.
#[derive(Debug, Clone, Default)]
pub struct SequenceArgs {
    pub required: Vec<ArgDecl>,
    pub optional: Vec<ArgDecl>,
    pub statics: Vec<ArgDecl>,
}

impl SequenceArgs {
    /// Every arg with its kind, required first.
    pub fn all(&self) -> impl Iterator<Item = (RequestArgType, &ArgDecl)> {
        let required = self
            .required
            .iter()
            .map(|arg| (RequestArgType::Required, arg));
        let optional = self
            .optional
            .iter()
            .map(|arg| (RequestArgType::Optional, arg));
        let statics = self.statics.iter().map(|arg| (RequestArgType::Static, arg));
        required.chain(optional).chain(statics)
    }

    pub fn is_required(&self, name: &str) -> bool {
        self.required.iter().any(|arg| arg.name() == Some(name))
    }

    pub fn is_optional(&self, name: &str) -> bool {
        self.optional.iter().any(|arg| arg.name() == Some(name))
    }
}

/// A declared sequence arg.
#[derive(Debug, Clone)]
pub struct ArgDecl {
    pub name: Option<Spanned<String>>,
    pub desc: String,
    /// Any YAML value; scalars are kept as the text written (`175` is "175").
    pub default: Option<Spanned<Value>>,
    /// `secret: true` (Spindle, issue #33): its value is never stored in the clear nor
    /// shown, and reaches a job only in its environment.
    pub secret: bool,
    /// Where the entry starts.
    pub pos: Pos,
}

impl ArgDecl {
    pub fn name(&self) -> Option<&str> {
        self.name.as_ref().map(|name| name.value.as_str())
    }
}

/// What a request does when a lock it declares is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenTaken {
    /// Wait in the lock's queue (the default).
    Queue,
    /// Fail at once, naming the holder.
    Skip,
    /// Stop the holders, then take the lock when they have ended.
    CancelInProgress,
}

impl WhenTaken {
    pub const NAMES: [&'static str; 3] = ["queue", "skip", "cancel-in-progress"];

    pub fn parse(text: &str) -> Option<WhenTaken> {
        match text {
            "queue" => Some(WhenTaken::Queue),
            "skip" => Some(WhenTaken::Skip),
            "cancel-in-progress" => Some(WhenTaken::CancelInProgress),
            _ => None,
        }
    }
}

/// A lock a request type holds while a request of it runs: one per value of its `key`
/// arg (one for all without a key), held by at most `limit` requests at once, shared by
/// every type that names it.
#[derive(Debug, Clone)]
pub struct Lock {
    pub name: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub limit: Option<Spanned<u32>>,
    pub when_taken: Option<Spanned<String>>,
    /// Waiters of one priority are served round robin over this: `user` (the caller)
    /// or an arg of the type (a team); first come first served without it.
    pub fair_by: Option<Spanned<String>>,
    pub pos: Pos,
}

impl Lock {
    /// At most this many holders at once (1, a mutex, when not written).
    pub fn limit(&self) -> u32 {
        self.limit.as_ref().map_or(1, |limit| limit.value)
    }

    /// The policy written, `queue` when none (or one the linter refuses).
    pub fn when_taken(&self) -> WhenTaken {
        self.when_taken
            .as_ref()
            .and_then(|w| WhenTaken::parse(&w.value))
            .unwrap_or(WhenTaken::Queue)
    }
}

/// A job pool (issue #34): at most `limit` jobs of its `types` run at once across every
/// runner. It is a lock without a key that each such job holds while it runs, so a node
/// may also join it by naming it in its `locks:`.
#[derive(Debug, Clone)]
pub struct Pool {
    pub name: String,
    pub file: Arc<PathBuf>,
    /// Where its name is written.
    pub pos: Pos,
    pub limit: Option<Spanned<u32>>,
    /// Job types whose every job is in the pool.
    pub types: Vec<Spanned<String>>,
}

impl Pool {
    /// At most this many jobs at once (1 when not written).
    pub fn limit(&self) -> u32 {
        self.limit.as_ref().map_or(1, |limit| limit.value)
    }
}

/// A lock's key arg whose value cannot key it, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LockKeyError(pub String);

/// The longest value a lock's key may have, in characters (what the databases index).
pub const LOCK_KEY_MAX: usize = 500;

/// The key of lock `name` (keyed by arg `key_arg`) for the arg's `value`: a string as it
/// is, a number or true/false as written; else (a list, a map, null, not given, or over
/// [`LOCK_KEY_MAX`] characters) what is wrong and what was expected.
pub fn lock_key(name: &str, key_arg: &str, value: Option<&Value>) -> Result<String, LockKeyError> {
    let key = match value {
        Some(Value::String(text)) => text.clone(),
        Some(value @ (Value::Number(_) | Value::Bool(_))) => value.to_string(),
        other => {
            return Err(LockKeyError(format!(
                "lock `{name}` is keyed by arg `{key_arg}`, whose value is {}; expected a string, a number or true/false (one lock per value)",
                other.map_or_else(
                    || "not given".to_owned(),
                    |v| format!("{} {v}", proto::json_kind(v))
                )
            )));
        }
    };
    let length = key.chars().count();
    if length > LOCK_KEY_MAX {
        return Err(LockKeyError(format!(
            "lock `{name}` is keyed by arg `{key_arg}`, whose value is {length} characters long; expected at most {LOCK_KEY_MAX}"
        )));
    }
    Ok(key)
}

/// An ACL entry of a request type.
#[derive(Debug, Clone)]
pub struct Acl {
    pub role: Option<Spanned<String>>,
    pub admin: Option<Spanned<bool>>,
    pub ops: Vec<Spanned<String>>,
    pub pos: Pos,
}

/// A node's category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    Job,
    Sequence,
    Conditional,
}

impl Category {
    pub fn parse(text: &str) -> Option<Category> {
        match text {
            "job" => Some(Category::Job),
            "sequence" => Some(Category::Sequence),
            "conditional" => Some(Category::Conditional),
            _ => None,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Category::Job => "job",
            Category::Sequence => "sequence",
            Category::Conditional => "conditional",
        })
    }
}

/// One node of a sequence.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    /// Where the node's name is written.
    pub pos: Pos,
    /// As written; [`Node::category`] reads it.
    pub category: Option<Spanned<String>>,
    /// Job type, or the sequence a sequence node runs.
    pub node_type: Option<Spanned<String>>,
    /// `None` items are null entries (`- ~`).
    pub args: Vec<Spanned<Option<NodeArg>>>,
    pub sets: Vec<Spanned<Option<NodeSet>>>,
    pub deps: Vec<Spanned<String>>,
    pub retry: Option<Spanned<u32>>,
    pub retry_wait: Option<Spanned<String>>,
    /// Spindle: a Go duration bounding each try of a job node.
    pub timeout: Option<Spanned<String>>,
    /// `list:element` entries, as written.
    pub each: Vec<Spanned<String>>,
    pub parallel: Option<Spanned<u32>>,
    pub if_arg: Option<Spanned<String>>,
    /// Branch value to sequence name, in file order.
    pub eq: Vec<(Spanned<String>, Spanned<String>)>,
    /// Spindle: the locks the node's job (or the sequence it runs) holds while it runs
    /// (issue #34); a key names one of the args the node passes (`expected`) or an
    /// `each:` element.
    pub locks: Vec<Lock>,
    /// Spindle (issue #50): how many of an `each:` node's elements may fail with the
    /// node still completing.
    pub max_failures: Option<Spanned<Share>>,
    /// Spindle: `on_budget_exceeded:` as written (`stop` or `finish`).
    pub on_budget_exceeded: Option<Spanned<String>>,
    /// Spindle: the waves' cumulative sizes, as written.
    pub waves: Vec<Spanned<Share>>,
    /// Spindle: a Go duration waited between waves.
    pub wave_wait: Option<Spanned<String>>,
    /// Spindle: an approval before each wave after the first: `Some` with the roles that
    /// may answer (none: anyone who may approve the request) when written `true` or as a
    /// list of roles.
    pub wave_approval: Option<Spanned<Vec<String>>>,
    /// Positions of the fields written, by field name.
    pub field_pos: BTreeMap<&'static str, Pos>,
}

/// Spindle (issue #50): a number of an `each:` node's elements, written as a count
/// (`4`) or a percentage of them (`10%`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Share {
    Count(u32),
    Percent(f64),
}

impl Share {
    /// Reads `4` or `10%` (or `2.5%`); `None` for anything else.
    pub fn parse(text: &str) -> Option<Share> {
        let text = text.trim();
        match text.strip_suffix('%') {
            Some(percent) => percent
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite())
                .map(Share::Percent),
            None => text.parse::<u32>().ok().map(Share::Count),
        }
    }

    /// As many of `n` elements, rounded down (a budget: `1%` of 150 is 1), at most `n`.
    pub fn floor_of(self, n: usize) -> usize {
        match self {
            Share::Count(count) => (count as usize).min(n),
            Share::Percent(percent) => {
                ((percent / 100.0 * n as f64 + 1e-9).floor().max(0.0) as usize).min(n)
            }
        }
    }

    /// As many of `n` elements, rounded up (a wave: `10%` of 8 is 1), at most `n`.
    pub fn ceil_of(self, n: usize) -> usize {
        match self {
            Share::Count(count) => (count as usize).min(n),
            Share::Percent(percent) => {
                ((percent / 100.0 * n as f64 - 1e-9).ceil().max(0.0) as usize).min(n)
            }
        }
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Share::Count(count) => write!(f, "{count}"),
            Share::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

impl Node {
    /// Where `field` is written, or the node's own position when it is not.
    pub fn pos_of(&self, field: &str) -> Pos {
        self.field_pos.get(field).copied().unwrap_or(self.pos)
    }

    pub fn category(&self) -> Option<Category> {
        self.category
            .as_ref()
            .and_then(|category| Category::parse(&category.value))
    }

    pub fn node_type(&self) -> Option<&str> {
        self.node_type.as_ref().map(|t| t.value.as_str())
    }

    pub fn retry(&self) -> u32 {
        self.retry.as_ref().map_or(0, |retry| retry.value)
    }

    /// The wait between tries; normalization gives `0s` when `retry` is set without it.
    pub fn retry_wait(&self) -> Option<Duration> {
        match &self.retry_wait {
            Some(wait) => proto::duration::parse(&wait.value).ok(),
            None => Some(Duration::ZERO),
        }
    }

    /// The bound on each try, when `timeout` is set and a duration.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
            .as_ref()
            .and_then(|timeout| proto::duration::parse(&timeout.value).ok())
    }

    /// Well-formed `each` entries split into `(list, element)`.
    pub fn each_pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.each
            .iter()
            .filter_map(|entry| split_each(&entry.value))
    }

    /// The args entries that are not null.
    pub fn node_args(&self) -> impl Iterator<Item = &NodeArg> {
        self.args.iter().filter_map(|arg| arg.value.as_ref())
    }

    /// The sets entries that are not null.
    pub fn node_sets(&self) -> impl Iterator<Item = &NodeSet> {
        self.sets.iter().filter_map(|set| set.value.as_ref())
    }

    /// The sequences this node calls: its `type` for a sequence node, every `eq` target
    /// for a conditional (in file order, without repeats). Job nodes call none.
    pub fn called_sequences(&self) -> Vec<&str> {
        match self.category() {
            Some(Category::Sequence) => self.node_type().into_iter().collect(),
            Some(Category::Conditional) => {
                let mut called: Vec<&str> = Vec::new();
                for (_, target) in &self.eq {
                    if !called.contains(&target.value.as_str()) {
                        called.push(&target.value);
                    }
                }
                called
            }
            _ => Vec::new(),
        }
    }

    /// The names this node passes in: every `args.expected` and every `each` element.
    pub fn declared_inputs(&self) -> Vec<&str> {
        let expected = self.node_args().filter_map(NodeArg::expected);
        let elements = self.each_pairs().map(|(_, element)| element);
        expected.chain(elements).collect()
    }
}

/// Splits `list:element`; `None` unless there is exactly one colon.
pub(crate) fn split_each(entry: &str) -> Option<(&str, &str)> {
    let (list, element) = entry.split_once(':')?;
    (!element.contains(':')).then_some((list, element))
}

/// One `args` entry of a node: the job or sub-sequence sees `given`'s value as `expected`.
#[derive(Debug, Clone)]
pub struct NodeArg {
    pub expected: Option<Spanned<String>>,
    pub given: Option<Spanned<String>>,
}

impl NodeArg {
    pub fn expected(&self) -> Option<&str> {
        self.expected.as_ref().map(|e| e.value.as_str())
    }

    /// `given`, defaulting to `expected`.
    pub fn given(&self) -> Option<&str> {
        self.given
            .as_ref()
            .or(self.expected.as_ref())
            .map(|g| g.value.as_str())
    }
}

/// One `sets` entry of a node: the job sets `arg`, the sequence sees it as `as`.
#[derive(Debug, Clone)]
pub struct NodeSet {
    pub arg: Option<Spanned<String>>,
    pub r#as: Option<Spanned<String>>,
}

impl NodeSet {
    pub fn arg(&self) -> Option<&str> {
        self.arg.as_ref().map(|a| a.value.as_str())
    }

    /// `as`, defaulting to `arg`.
    pub fn r#as(&self) -> Option<&str> {
        self.r#as
            .as_ref()
            .or(self.arg.as_ref())
            .map(|a| a.value.as_str())
    }
}

//! A chain as a runner receives it: its jobs in the order of their ids, each already
//! shared (`Arc`) with its run-time data taken out, and its edges as pairs of job
//! indices. Decoded straight from a hand-over's JSON ([`Incoming`]'s `Deserialize`), or
//! made from a [`proto::JobChain`] (`From`).
//!
//! Each job is kept as a [`RunJob`]: what running and logging it need, the names many
//! jobs share (name, type, sequence) stored once, and the durations few jobs set boxed
//! apart (about 200 bytes a job less than a `proto::Job`).
//!
//! Why not decode a `proto::JobChain` and convert it: its jobs sit in a map (a node per
//! ~11 jobs, each job's id twice) and its adjacency list is a map of vectors of strings
//! (~40 bytes per edge end), all alive while the runner's form is built next to it. On a
//! 100,000-job expansion that intermediate form was the runner's peak memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use proto::{JobArgs, JobChain, State, SuspendedJobChain};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::state::JobIdx;

/// A job chain ready to be validated and run (see the module's documentation).
#[derive(Debug, Default)]
pub struct Incoming {
    pub(crate) request_id: String,
    /// The jobs, in the order of their ids; their `data` is in `data`.
    pub(crate) jobs: Vec<Arc<RunJob>>,
    /// Per job (same order): its run-time data.
    pub(crate) data: Vec<JobArgs>,
    /// (from, to) per edge, ordered by `from` and, for one `from`, as the adjacency list
    /// lists its successors.
    pub(crate) edges: Vec<(JobIdx, JobIdx)>,
    pub(crate) finished_jobs: u64,
    /// The first thing wrong with the chain's structure that only validation reports.
    pub(crate) flaw: Option<Flaw>,
    /// Names seen so far, each stored once (dropped with the chain's decode).
    names: HashSet<Arc<str>>,
}

/// A job as the runner keeps it (see the module's documentation). [`RunJob::to_proto`]
/// gives back the job as it arrived, for a suspended chain.
#[derive(Debug, Default)]
pub(crate) struct RunJob {
    pub(crate) id: String,
    pub(crate) name: Arc<str>,
    pub(crate) job_type: Arc<str>,
    pub(crate) bytes: Box<[u8]>,
    pub(crate) args: JobArgs,
    pub(crate) each: JobArgs,
    pub(crate) sequence_id: Arc<str>,
    /// As received (the current state is the chain's).
    pub(crate) state: State,
    pub(crate) retry: u32,
    pub(crate) sequence_retry: u32,
    pub(crate) parallel: u32,
    pub(crate) tries: u32,
    /// `retryWait`, `sequenceRetryWait`, `timeout` and `sequenceTimeout`, when any is set.
    pub(crate) durations: Option<Box<Durations>>,
    /// `locks` and `releasesLocksOf`, when either is set (few jobs).
    pub(crate) locks: Option<Box<Locks>>,
    /// On a fan-out job of a node with a budget or waves (issue #50).
    pub(crate) elements: Option<Box<proto::Elements>>,
}

/// A job's locks as received (issue #34).
#[derive(Debug, Default, Clone)]
pub(crate) struct Locks {
    /// Taken before the job's first try.
    pub(crate) take: Vec<proto::JobLock>,
    /// The job (a sequence's first) whose locks this job's completion releases.
    pub(crate) releases_of: String,
}

/// A job's durations as received (Go durations; empty: none).
#[derive(Debug, Default, Clone)]
pub(crate) struct Durations {
    pub(crate) retry_wait: String,
    pub(crate) sequence_retry_wait: String,
    pub(crate) timeout: String,
    pub(crate) sequence_timeout: String,
}

impl RunJob {
    /// The runner's form of `job`, its names taken from (or added to) `names`; the job's
    /// data is returned apart.
    fn new(job: proto::Job, names: &mut HashSet<Arc<str>>) -> (RunJob, JobArgs) {
        let proto::Job {
            id,
            name,
            job_type,
            bytes,
            state,
            args,
            data,
            retry,
            retry_wait,
            sequence_id,
            sequence_retry,
            sequence_retry_wait,
            parallel,
            tries,
            timeout,
            sequence_timeout,
            each,
            locks,
            releases_locks_of,
            elements,
        } = job;
        let mut shared = |text: String| -> Arc<str> {
            if let Some(known) = names.get(text.as_str()) {
                return Arc::clone(known);
            }
            let text: Arc<str> = text.into();
            names.insert(Arc::clone(&text));
            text
        };
        let durations = Durations {
            retry_wait,
            sequence_retry_wait,
            timeout,
            sequence_timeout,
        };
        let set = !(durations.retry_wait.is_empty()
            && durations.sequence_retry_wait.is_empty()
            && durations.timeout.is_empty()
            && durations.sequence_timeout.is_empty());
        let job = RunJob {
            id,
            name: shared(name),
            job_type: shared(job_type),
            bytes: bytes.into_boxed_slice(),
            args,
            each,
            sequence_id: shared(sequence_id),
            state,
            retry,
            sequence_retry,
            parallel,
            tries,
            durations: set.then(|| Box::new(durations)),
            locks: (!locks.is_empty() || !releases_locks_of.is_empty()).then(|| {
                Box::new(Locks {
                    take: locks,
                    releases_of: releases_locks_of,
                })
            }),
            elements,
        };
        (job, data)
    }

    /// The job as it arrived, with `state` and `data` in place of its received ones.
    pub(crate) fn to_proto(&self, state: State, data: JobArgs) -> proto::Job {
        let Durations {
            retry_wait,
            sequence_retry_wait,
            timeout,
            sequence_timeout,
        } = self.durations.as_deref().cloned().unwrap_or_default();
        proto::Job {
            id: self.id.clone(),
            name: self.name.to_string(),
            job_type: self.job_type.to_string(),
            bytes: self.bytes.to_vec(),
            state,
            args: self.args.clone(),
            data,
            retry: self.retry,
            retry_wait,
            sequence_id: self.sequence_id.to_string(),
            sequence_retry: self.sequence_retry,
            sequence_retry_wait,
            parallel: self.parallel,
            tries: self.tries,
            timeout,
            sequence_timeout,
            each: self.each.clone(),
            locks: self
                .locks
                .as_ref()
                .map(|l| l.take.clone())
                .unwrap_or_default(),
            releases_locks_of: self
                .locks
                .as_ref()
                .map(|l| l.releases_of.clone())
                .unwrap_or_default(),
            elements: self.elements.clone(),
        }
    }

    /// The job's durations (all empty when it sets none).
    pub(crate) fn durations(&self) -> &Durations {
        static NONE: Durations = Durations {
            retry_wait: String::new(),
            sequence_retry_wait: String::new(),
            timeout: String::new(),
            sequence_timeout: String::new(),
        };
        self.durations.as_deref().unwrap_or(&NONE)
    }
}

/// What the decode (or the conversion) found that makes the chain invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Flaw {
    /// A job filed under an id other than its own.
    Misfiled { key: String, id: String },
    /// Two jobs with one id.
    Duplicate(String),
    /// The adjacency list names a job the chain does not have.
    UnknownJob,
}

impl Incoming {
    /// The request the chain belongs to.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// How many jobs the chain has.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    fn note(&mut self, flaw: Flaw) {
        self.flaw.get_or_insert(flaw);
    }

    /// Takes in one decoded job, filed under `key`.
    fn push(&mut self, key: &str, job: proto::Job) {
        if key != job.id {
            self.note(Flaw::Misfiled {
                key: key.to_owned(),
                id: job.id.clone(),
            });
        }
        let (job, data) = RunJob::new(job, &mut self.names);
        self.data.push(data);
        self.jobs.push(Arc::new(job));
    }

    /// Puts the jobs in the order of their ids (a sender's map already has them so) and
    /// notes a repeated id.
    fn order_jobs(&mut self) {
        if !self.jobs.is_sorted_by(|a, b| a.id <= b.id) {
            let mut order: Vec<usize> = (0..self.jobs.len()).collect();
            order.sort_by(|&a, &b| self.jobs[a].id.cmp(&self.jobs[b].id));
            self.jobs = order.iter().map(|&at| Arc::clone(&self.jobs[at])).collect();
            let mut data = std::mem::take(&mut self.data);
            self.data = order
                .iter()
                .map(|&at| std::mem::take(&mut data[at]))
                .collect();
        }
        if let Some(pair) = self.jobs.windows(2).find(|pair| pair[0].id == pair[1].id) {
            let id = pair[0].id.clone();
            self.note(Flaw::Duplicate(id));
        }
    }

    /// Job ids to indices, for reading edges.
    fn index(&self) -> Index<'_> {
        let mut index = Index::with_capacity_and_hasher(self.jobs.len(), Default::default());
        index.extend(
            self.jobs
                .iter()
                .enumerate()
                .map(|(at, job)| (job.id.as_str(), JobIdx::new(at))),
        );
        index
    }

    /// Puts the edges in the order of their `from` job (a sender's map already has them
    /// so); stable, so each job's successors keep their listed order.
    fn order_edges(&mut self) {
        if !self.edges.is_sorted_by_key(|&(from, _)| from) {
            self.edges.sort_by_key(|&(from, _)| from);
        }
    }

    /// Reads an adjacency list given as strings, once the jobs are known.
    fn add_edges<'a>(&mut self, list: impl IntoIterator<Item = (&'a str, &'a [String])>) {
        let index = self.index();
        let mut edges = Vec::new();
        let mut unknown = false;
        for (from, tos) in list {
            let Some(&from) = index.get(from) else {
                unknown = true;
                continue;
            };
            for to in tos {
                match index.get(to.as_str()) {
                    Some(&to) => edges.push((from, to)),
                    None => unknown = true,
                }
            }
        }
        drop(index);
        if unknown {
            self.note(Flaw::UnknownJob);
        }
        self.edges.extend(edges);
    }
}

impl From<JobChain> for Incoming {
    fn from(chain: JobChain) -> Incoming {
        let JobChain {
            request_id,
            jobs,
            adjacency_list,
            // The chain's own state is the Request Manager's; a runner starts from its
            // jobs' states.
            state: _,
            finished_jobs,
        } = chain;
        let mut incoming = Incoming {
            request_id,
            jobs: Vec::with_capacity(jobs.len()),
            data: Vec::with_capacity(jobs.len()),
            finished_jobs,
            ..Incoming::default()
        };
        // The map is freed node by node as its jobs move out.
        for (key, job) in jobs {
            incoming.push(&key, job);
        }
        incoming.order_jobs();
        incoming.add_edges(
            adjacency_list
                .iter()
                .map(|(from, tos)| (from.as_str(), tos.as_slice())),
        );
        incoming.order_edges();
        incoming.names = HashSet::new();
        incoming
    }
}

/// A suspended chain as a runner receives it to resume it: the chain in the runner's
/// form (decoded as [`Incoming`] is) and its try counters. Decoded from a
/// `proto::SuspendedJobChain`'s JSON, or made from one (`From`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resumed {
    pub(crate) request_id: String,
    pub(crate) job_chain: Incoming,
    #[serde(default, deserialize_with = "counters")]
    pub(crate) total_job_tries: BTreeMap<String, u32>,
    #[serde(default, deserialize_with = "counters")]
    pub(crate) latest_run_job_tries: BTreeMap<String, u32>,
    #[serde(default, deserialize_with = "counters")]
    pub(crate) sequence_tries: BTreeMap<String, u32>,
}

impl Resumed {
    /// The request the chain belongs to.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }
}

impl From<SuspendedJobChain> for Resumed {
    fn from(suspended: SuspendedJobChain) -> Resumed {
        let SuspendedJobChain {
            request_id,
            job_chain,
            total_job_tries,
            latest_run_job_tries,
            sequence_tries,
        } = suspended;
        Resumed {
            request_id,
            job_chain: job_chain.into(),
            total_job_tries,
            latest_run_job_tries,
            sequence_tries,
        }
    }
}

/// Try counters by job id; null is none.
fn counters<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, u32>, D::Error> {
    Ok(Option::deserialize(deserializer)?.unwrap_or_default())
}

/// The fields of a job chain (`proto::JobChain`'s, in JSON).
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum Field {
    RequestId,
    Jobs,
    AdjacencyList,
    State,
    FinishedJobs,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for Incoming {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Incoming, D::Error> {
        deserializer.deserialize_map(ChainVisitor)
    }
}

struct ChainVisitor;

impl<'de> Visitor<'de> for ChainVisitor {
    type Value = Incoming;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a job chain (an object with requestId, jobs and adjacencyList)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Incoming, A::Error> {
        let mut chain = Incoming::default();
        let (mut request_id, mut jobs, mut edges) = (false, false, false);
        // An adjacency list that came before the jobs waits for them as strings.
        let mut early_list: Option<Vec<(String, Vec<String>)>> = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::RequestId => {
                    once(&mut request_id, "requestId")?;
                    chain.request_id = map.next_value()?;
                }
                Field::Jobs => {
                    once(&mut jobs, "jobs")?;
                    map.next_value_seed(OrNull(JobsSeed(&mut chain)))?;
                    chain.order_jobs();
                }
                Field::AdjacencyList => {
                    once(&mut edges, "adjacencyList")?;
                    if jobs {
                        let index = chain.index();
                        let mut unknown = false;
                        let mut pairs = Vec::with_capacity(chain.jobs.len());
                        map.next_value_seed(OrNull(EdgesSeed {
                            index: &index,
                            pairs: &mut pairs,
                            unknown: &mut unknown,
                        }))?;
                        drop(index);
                        chain.edges = pairs;
                        if unknown {
                            chain.note(Flaw::UnknownJob);
                        }
                    } else {
                        let list: Option<HashMap<String, Vec<String>>> = map.next_value()?;
                        let mut list: Vec<(String, Vec<String>)> =
                            list.unwrap_or_default().into_iter().collect();
                        list.sort_by(|a, b| a.0.cmp(&b.0));
                        early_list = Some(list);
                    }
                }
                // Checked as `proto::JobChain` checks it, then not kept (see `From`).
                Field::State => {
                    map.next_value::<State>()?;
                }
                Field::FinishedJobs => chain.finished_jobs = map.next_value()?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !request_id {
            return Err(de::Error::missing_field("requestId"));
        }
        if let Some(list) = early_list {
            chain.add_edges(
                list.iter()
                    .map(|(from, tos)| (from.as_str(), tos.as_slice())),
            );
        }
        chain.order_edges();
        chain.names = HashSet::new();
        Ok(chain)
    }
}

/// Refuses a field given twice, as a derived `Deserialize` does.
fn once<E: de::Error>(seen: &mut bool, field: &'static str) -> Result<(), E> {
    if std::mem::replace(seen, true) {
        return Err(E::duplicate_field(field));
    }
    Ok(())
}

/// A job id, borrowed from the input when it has no escapes.
struct Id<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Id<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Id<'de>, D::Error> {
        struct IdVisitor;
        impl<'de> Visitor<'de> for IdVisitor {
            type Value = Id<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a job id (a string)")
            }
            fn visit_borrowed_str<E: de::Error>(self, id: &'de str) -> Result<Id<'de>, E> {
                Ok(Id(id.into()))
            }
            fn visit_str<E: de::Error>(self, id: &str) -> Result<Id<'de>, E> {
                Ok(Id(id.to_owned().into()))
            }
            fn visit_string<E: de::Error>(self, id: String) -> Result<Id<'de>, E> {
                Ok(Id(id.into()))
            }
        }
        deserializer.deserialize_str(IdVisitor)
    }
}

/// A seed's value, or nothing for null (a chain's lists may be null).
struct OrNull<S>(S);

impl<'de, S: DeserializeSeed<'de, Value = ()>> DeserializeSeed<'de> for OrNull<S> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de, Value = ()>> Visitor<'de> for OrNull<S> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("null or a value")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0.deserialize(deserializer)
    }
}

/// The `jobs` map, each job pushed as it is read.
struct JobsSeed<'a>(&'a mut Incoming);

impl<'de> DeserializeSeed<'de> for JobsSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for JobsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of job ids to jobs")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if let Some(size) = map.size_hint() {
            self.0.jobs.reserve(size);
            self.0.data.reserve(size);
        }
        while let Some(key) = map.next_key::<Id>()? {
            let job: proto::Job = map.next_value()?;
            self.0.push(&key.0, job);
        }
        Ok(())
    }
}

/// Job ids to their indices: a chain's every edge is two lookups (ids are a few bytes
/// the Request Manager made: a fast hash, seeded at random, rather than SipHash).
type Index<'i> = HashMap<&'i str, JobIdx, foldhash::fast::RandomState>;

/// Where the adjacency list's edges go as they are read, by index.
struct EdgesSeed<'a, 'i> {
    index: &'a Index<'i>,
    pairs: &'a mut Vec<(JobIdx, JobIdx)>,
    unknown: &'a mut bool,
}

impl<'de> DeserializeSeed<'de> for EdgesSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EdgesSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of job ids to lists of job ids")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(from) = map.next_key::<Id>()? {
            let from = self.index.get(from.0.as_ref()).copied();
            if from.is_none() {
                *self.unknown = true;
            }
            map.next_value_seed(OrNull(Successors {
                from,
                edges: EdgesSeed {
                    index: self.index,
                    pairs: &mut *self.pairs,
                    unknown: &mut *self.unknown,
                },
            }))?;
        }
        Ok(())
    }
}

/// One job's list of successors.
struct Successors<'a, 'i> {
    from: Option<JobIdx>,
    edges: EdgesSeed<'a, 'i>,
}

impl<'de> DeserializeSeed<'de> for Successors<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Successors<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of job ids")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let EdgesSeed {
            index,
            pairs,
            unknown,
        } = self.edges;
        while let Some(to) = seq.next_element::<Id>()? {
            match (self.from, index.get(to.0.as_ref())) {
                (Some(from), Some(&to)) => pairs.push((from, to)),
                (_, None) => *unknown = true,
                (None, Some(_)) => {}
            }
        }
        Ok(())
    }
}

//! A chain's `each:` elements (issue #50), read back from the chain alone: for every
//! expansion (a `repeat_<node>_begin` job), its elements in order — each the sub-graph
//! after a fan-out job up to where the elements meet — with their names, waves and jobs,
//! and the node's failure budget. What the elements API lists and what recovery keeps
//! failed.

use std::collections::{HashMap, HashSet, VecDeque};

use proto::JobChain;

use crate::names;

/// One `each:` expansion of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    pub node: String,
    /// Its `repeat_<node>_begin` job.
    pub begin: String,
    /// How many elements may fail with the node still completing (`max_failures:`);
    /// `None` without a budget.
    pub max_failures: Option<u32>,
    /// How many waves (0 without `waves:`).
    pub waves: u32,
    pub elements: Vec<Element>,
}

/// One element of an expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Its own `each:` values (see [`proto::args::element_name`]).
    pub name: String,
    /// Its wave (1-based; 0 without waves).
    pub wave: u32,
    /// Its jobs, its first job first.
    pub jobs: Vec<String>,
    /// The job people are shown for it: its first that is not one of the grapher's
    /// begin and end wrappers (its first job when all are).
    pub shown: String,
}

/// Every expansion of `chain` with more than one element or with a budget or waves, in
/// the order of their begin jobs' ids.
pub fn fleets(chain: &JobChain) -> Vec<Fleet> {
    let begins: Vec<(&proto::Job, &str)> = chain
        .jobs
        .values()
        .filter_map(|job| Some((job, names::expansion_of(&job.name)?)))
        .collect();
    if begins.is_empty() {
        return Vec::new();
    }
    let jobs = Jobs::of(chain);
    // The fan-outs of each budget (or waves), by the job keeping it.
    let mut fan_outs: HashMap<&str, Vec<(&str, &proto::Elements)>> = HashMap::new();
    for job in chain.jobs.values() {
        if let Some(elements) = &job.elements {
            fan_outs
                .entry(elements.budget.as_str())
                .or_default()
                .push((job.id.as_str(), elements));
        }
    }
    let mut fleets = Vec::new();
    for (job, node) in begins {
        let (max_failures, waves, groups) = match fan_outs.get_mut(job.id.as_str()) {
            Some(groups) => {
                groups.sort_by_key(|(_, elements)| elements.wave);
                let first = groups[0].1;
                let groups: Vec<(&str, &str, u32)> = groups
                    .iter()
                    .map(|(id, elements)| (*id, elements.end.as_str(), elements.wave))
                    .collect();
                (first.max_failures, first.waves, groups)
            }
            None => {
                // A plain expansion: its elements meet at its own end wrapper.
                let end_name = names::end(&names::repeat_place(node));
                let Some(end) = first_named(&jobs, jobs.succs(&job.id).first(), &end_name) else {
                    continue;
                };
                (None, 0, vec![(job.id.as_str(), end, 0)])
            }
        };
        let mut elements = Vec::new();
        for (fan_out, end, wave) in groups {
            let outer = &jobs.job(fan_out).each;
            elements.reserve(jobs.succs(fan_out).len());
            for piece in jobs.succs(fan_out) {
                // Looked up once: an element is usually one job (its name, what is shown
                // and its jobs are that job's).
                let (first, next) = jobs.get(piece);
                let element_jobs = reached_before(&jobs, piece, next, end);
                let shown = if proto::is_wrapper(&first.name, &first.job_type) {
                    element_jobs
                        .iter()
                        .find(|id| {
                            let job = jobs.job(id);
                            !proto::is_wrapper(&job.name, &job.job_type)
                        })
                        .unwrap_or(&element_jobs[0])
                        .clone()
                } else {
                    piece.clone()
                };
                elements.push(Element {
                    shown,
                    name: proto::args::element_name(&first.each, outer),
                    wave,
                    jobs: element_jobs,
                });
            }
        }
        fleets.push(Fleet {
            node: node.to_owned(),
            begin: job.id.clone(),
            max_failures,
            waves,
            elements,
        });
    }
    fleets
}

/// A chain's jobs with their successors, by id: one lookup in a hash map, where the
/// chain's own maps take two searches of a tree whose nodes, at 100,000 jobs, are each a
/// miss of the processor's caches (expansions of 100,000 hosts: most of their time).
struct Jobs<'c> {
    by_id: HashMap<&'c str, (&'c proto::Job, &'c [String]), foldhash::fast::RandomState>,
}

impl<'c> Jobs<'c> {
    fn of(chain: &'c JobChain) -> Jobs<'c> {
        let mut by_id = HashMap::with_capacity_and_hasher(
            chain.jobs.len(),
            foldhash::fast::RandomState::default(),
        );
        // Both maps are in the order of their ids: their successors are read alongside.
        let mut succs = chain.adjacency_list.iter().peekable();
        for (id, job) in &chain.jobs {
            while succs.next_if(|(from, _)| *from < id).is_some() {}
            let next = succs
                .next_if(|(from, _)| *from == id)
                .map_or(&[][..], |(_, next)| next.as_slice());
            by_id.insert(id.as_str(), (job, next));
        }
        Jobs { by_id }
    }

    /// The job `id` and its successors (a chain's every edge names jobs of the chain).
    fn get(&self, id: &str) -> (&'c proto::Job, &'c [String]) {
        self.by_id[id]
    }

    fn job(&self, id: &str) -> &'c proto::Job {
        self.get(id).0
    }

    fn succs(&self, id: &str) -> &'c [String] {
        self.by_id.get(id).map_or(&[][..], |(_, next)| next)
    }
}

/// The first job named `name` on the path of first successors from `from`.
fn first_named<'c>(jobs: &Jobs<'c>, from: Option<&String>, name: &str) -> Option<&'c str> {
    let mut at = from?.as_str();
    loop {
        let (job, next) = jobs.by_id.get(at)?;
        if job.name == name {
            return Some(job.id.as_str());
        }
        at = next.first()?;
    }
}

/// The jobs reached from `first` (whose successors are `next`) without passing `end`,
/// `first` first.
fn reached_before(jobs: &Jobs<'_>, first: &str, next: &[String], end: &str) -> Vec<String> {
    let mut order = vec![first.to_owned()];
    // An element of one job (what most are) leads to `end` alone: no walk.
    if next.iter().all(|next| next == end) {
        return order;
    }
    let mut seen: HashSet<&str> = HashSet::from([first]);
    let mut queue = VecDeque::from([first]);
    while let Some(at) = queue.pop_front() {
        for next in jobs.succs(at) {
            if next != end && seen.insert(next) {
                order.push(next.clone());
                queue.push_back(next);
            }
        }
    }
    order
}

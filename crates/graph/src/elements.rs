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
    let succs = |id: &str| chain.adjacency_list.get(id).map_or(&[][..], Vec::as_slice);
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
    for job in chain.jobs.values() {
        let Some(node) = names::expansion_of(&job.name) else {
            continue;
        };
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
                let Some(end) = first_named(chain, succs(&job.id).first(), &end_name) else {
                    continue;
                };
                (None, 0, vec![(job.id.as_str(), end, 0)])
            }
        };
        let mut elements = Vec::new();
        for (fan_out, end, wave) in groups {
            let outer = &chain.jobs[fan_out].each;
            elements.reserve(succs(fan_out).len());
            for piece in succs(fan_out) {
                // Looked up once: a chain's jobs are a map of every job, and an element
                // is usually one job (its name, what is shown and its jobs are that job's).
                let first = &chain.jobs[piece.as_str()];
                let jobs = reached_before(chain, piece, end);
                let shown = if proto::is_wrapper(&first.name, &first.job_type) {
                    jobs.iter()
                        .find(|id| {
                            let job = &chain.jobs[id.as_str()];
                            !proto::is_wrapper(&job.name, &job.job_type)
                        })
                        .unwrap_or(&jobs[0])
                        .clone()
                } else {
                    piece.clone()
                };
                elements.push(Element {
                    shown,
                    name: proto::args::element_name(&first.each, outer),
                    wave,
                    jobs,
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

/// The first job named `name` on the path of first successors from `from`.
fn first_named<'c>(chain: &'c JobChain, from: Option<&String>, name: &str) -> Option<&'c str> {
    let mut at = from?;
    loop {
        let job = chain.jobs.get(at)?;
        if job.name == name {
            return Some(job.id.as_str());
        }
        at = chain.adjacency_list.get(at)?.first()?;
    }
}

/// The jobs reached from `first` without passing `end`, `first` first.
fn reached_before(chain: &JobChain, first: &str, end: &str) -> Vec<String> {
    let mut order = vec![first.to_owned()];
    // An element of one job (what most are) leads to `end` alone: no walk.
    let next = chain
        .adjacency_list
        .get(first)
        .map_or(&[][..], Vec::as_slice);
    if next.iter().all(|next| next == end) {
        return order;
    }
    let mut seen: HashSet<&str> = HashSet::from([first]);
    let mut queue = VecDeque::from([first]);
    while let Some(at) = queue.pop_front() {
        for next in chain.adjacency_list.get(at).into_iter().flatten() {
            if next != end && seen.insert(next) {
                order.push(next.clone());
                queue.push_back(next);
            }
        }
    }
    order
}

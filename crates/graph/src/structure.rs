//! A chain's structure for people, the one model every view reads (the web UI's layout,
//! DOT and the terminal tree): jobs in run order, the sequences as groups (named by their
//! begin job), the `each:` expansions as groups of their iterations, how they nest, the
//! edges between the items of each group, and labels. Built in phases from the chain's
//! [`Outline`] alone, reading back the wrapper names the grapher made ([`crate::names`]).

use std::collections::{HashMap, HashSet, VecDeque};

use proto::JobChain;
use serde::Serialize;
use serde_json::Value;

use crate::names;
pub use crate::outline::{Each, Outline, OutlineJob};

/// A job or a group, inside the group that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Item {
    Job(u32),
    Group(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupKind {
    /// What holds the request's own sequence.
    Root,
    Sequence,
    /// The iterations of one `each:` node.
    Expansion,
}

#[derive(Debug)]
pub struct Group {
    /// A sequence's begin job id; `each:` and the begin wrapper's id for an expansion.
    pub id: String,
    pub kind: GroupKind,
    /// A sequence's node or request type; an expansion's node.
    pub name: String,
    /// A sequence's own `each:` element (the values those around it do not have).
    pub each: String,
    /// As the web UI shows it: a sequence's name with its element and retries (an
    /// iteration's element alone), an expansion's name and count.
    pub label: String,
    pub parent: Option<u32>,
    pub depth: u32,
    /// In run order.
    pub items: Vec<Item>,
    /// Between items (their indices in `items`), once each.
    pub edges: Vec<(u32, u32)>,
    /// Jobs inside, at any depth, not counting the grapher's begin and end wrappers.
    pub jobs: u32,
}

/// A chain's groups and where each job is, by job index (jobs in run order).
#[derive(Debug)]
pub struct Structure {
    /// Job index by id.
    pub index: HashMap<String, u32>,
    /// The innermost group holding each job (an expansion, a sequence, or the root 0).
    pub job_group: Vec<u32>,
    /// The sequence each job belongs to (its `sequenceId`'s group; the root 0 when the
    /// chain names none it has).
    pub job_sequence: Vec<u32>,
    pub groups: Vec<Group>,
    pub group_index: HashMap<String, u32>,
    labels: Vec<String>,
    wrappers: Vec<bool>,
    /// Each job as a view shows it, in run order.
    jobs: Vec<OutlineJob>,
}

/// `name=value` pairs, strings unquoted, joined with `sep`.
pub fn each_text(each: &proto::JobArgs, sep: &str) -> String {
    pairs_text(each.iter().map(|(name, value)| (name.as_str(), value)), sep)
}

pub(crate) fn pairs_text<'a>(
    pairs: impl Iterator<Item = (&'a str, &'a Value)>,
    sep: &str,
) -> String {
    pairs
        .map(|(name, value)| match value {
            Value::String(text) => format!("{name}={text}"),
            other => format!("{name}={other}"),
        })
        .collect::<Vec<_>>()
        .join(sep)
}

/// The `each:` elements `own` has that `outer` does not.
pub fn own_each(own: &proto::JobArgs, outer: Option<&proto::JobArgs>) -> proto::JobArgs {
    own.iter()
        .filter(|(name, value)| outer.and_then(|each| each.get(name)) != Some(*value))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// The chain's jobs in run order (a topological order, breadth first from the start
/// job, ties by id), any left by a cycle after them, and the edges by index.
struct Ordered<'c> {
    ids: Vec<&'c str>,
    jobs: Vec<&'c OutlineJob>,
    /// Each of the outline's jobs' place in the run order.
    place: Vec<u32>,
    index: HashMap<String, u32>,
    preds: Vec<Vec<u32>>,
    succs: Vec<Vec<u32>>,
}

fn run_order(outline: &Outline) -> Ordered<'_> {
    // The outline keeps its jobs sorted by id: index i is the i-th id.
    let ids: Vec<&str> = outline.jobs.iter().map(|job| job.id.as_str()).collect();
    let by_id: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for (from, tos) in &outline.adjacency_list {
        let Some(&f) = by_id.get(from.as_str()) else {
            continue;
        };
        succs[f].extend(tos.iter().filter_map(|to| by_id.get(to.as_str()).copied()));
    }
    // A chain with a cycle is refused before it is stored; keep any rest anyway.
    let sorted = proto::topo::sort_lists::<VecDeque<usize>>(&succs);
    let rest = sorted.left();
    let order: Vec<usize> = sorted.order.into_iter().chain(rest).collect();
    // The edges again, by place in the run order.
    let mut place = vec![0u32; ids.len()];
    for (at, &i) in order.iter().enumerate() {
        place[i] = at as u32;
    }
    let n = order.len();
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut ordered_succs: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, tos) in succs.iter().enumerate() {
        let f = place[i];
        for &to in tos {
            let t = place[to];
            ordered_succs[f as usize].push(t);
            preds[t as usize].push(f);
        }
    }
    let ordered: Vec<&str> = order.iter().map(|&i| ids[i]).collect();
    let index: HashMap<String, u32> = ordered
        .iter()
        .enumerate()
        .map(|(i, id)| ((*id).to_owned(), i as u32))
        .collect();
    Ordered {
        ids: ordered,
        jobs: order.iter().map(|&i| &outline.jobs[i]).collect(),
        place,
        index,
        preds,
        succs: ordered_succs,
    }
}

fn group(id: String, kind: GroupKind, name: String, parent: Option<u32>, jobs: u32) -> Group {
    Group {
        id,
        kind,
        name,
        each: String::new(),
        label: String::new(),
        parent,
        depth: 0,
        items: Vec::new(),
        edges: Vec::new(),
        jobs,
    }
}

/// The groups of the sequences (after the root), each job's sequence, and each
/// sequence's parent: the sequence of a job just before its begin job.
fn sequences(ordered: &Ordered<'_>, groups: &mut Vec<Group>) -> (Vec<u32>, HashMap<u32, u32>) {
    let jobs = &ordered.jobs;
    // Each job's sequence's begin job, looked up once for a run of jobs naming the same
    // (a fan-out's jobs all do).
    let mut last: Option<(&str, Option<u32>)> = None;
    let begin_of: Vec<Option<u32>> = jobs
        .iter()
        .map(|job| match last {
            Some((id, begin)) if id == job.sequence_id => begin,
            _ => {
                let begin = ordered.index.get(&job.sequence_id).copied();
                last = Some((&job.sequence_id, begin));
                begin
            }
        })
        .collect();
    let mut begins: Vec<u32> = begin_of
        .iter()
        .flatten()
        .copied()
        .collect::<HashSet<u32>>()
        .into_iter()
        .collect();
    begins.sort_unstable();
    let mut group_of_begin: HashMap<u32, u32> = HashMap::new();
    for &begin in &begins {
        group_of_begin.insert(begin, groups.len() as u32);
        let id = ordered.ids[begin as usize].to_owned();
        let name = names::sequence_name(&jobs[begin as usize].name).to_owned();
        groups.push(group(id, GroupKind::Sequence, name, None, 0));
    }
    let job_sequence: Vec<u32> = begin_of
        .iter()
        .map(|begin| {
            begin
                .and_then(|begin| group_of_begin.get(&begin))
                .copied()
                .unwrap_or(0)
        })
        .collect();
    let parents = begins
        .iter()
        .map(|&begin| {
            let own = group_of_begin[&begin];
            let parent = ordered.preds[begin as usize]
                .iter()
                .map(|&p| job_sequence[p as usize])
                .find(|&g| g != own)
                .unwrap_or(0);
            (own, parent)
        })
        .collect();
    (job_sequence, parents)
}

/// The expansions: what a `repeat_<node>_begin` wrapper leads to inside its sequence
/// (its iterations: sequences it calls, or jobs), each item in one expansion at most.
fn expansions(
    ordered: &Ordered<'_>,
    job_sequence: &[u32],
    parents: &HashMap<u32, u32>,
    groups: &mut Vec<Group>,
) -> HashMap<Item, u32> {
    let sequence_at: HashMap<&str, u32> = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.kind == GroupKind::Sequence)
        .map(|(i, g)| (g.id.as_str(), i as u32))
        .collect();
    let mut found: Vec<(u32, &str, Vec<Item>)> = Vec::new();
    let mut in_expansion: HashMap<Item, u32> = HashMap::new();
    // A node with waves (issue #50): its elements follow each wave's begin job, which
    // names the node's `repeat_<node>_begin` as its budget's.
    let mut waves: HashMap<&str, Vec<(u32, u32)>> = HashMap::new();
    for (j, id) in ordered.ids.iter().enumerate() {
        if let Some(elements) = &ordered.jobs[j].elements
            && elements.budget != **id
        {
            waves
                .entry(elements.budget.as_str())
                .or_default()
                .push((elements.wave, j as u32));
        }
    }
    for (j, id) in ordered.ids.iter().enumerate() {
        let Some(name) = names::expansion_of(&ordered.jobs[j].name) else {
            continue;
        };
        let home = job_sequence[j];
        let mut members = Vec::new();
        let mut fan_outs: Vec<(u32, u32)> = waves.get(*id).cloned().unwrap_or_default();
        fan_outs.sort_unstable();
        let sources: Vec<u32> = if fan_outs.is_empty() {
            vec![j as u32]
        } else {
            fan_outs.into_iter().map(|(_, at)| at).collect()
        };
        for &s in sources
            .iter()
            .flat_map(|&source| &ordered.succs[source as usize])
        {
            let item = match sequence_at.get(ordered.ids[s as usize]) {
                Some(&g) if g != home && parents.get(&g) == Some(&home) => Item::Group(g),
                _ if job_sequence[s as usize] == home => Item::Job(s),
                _ => continue,
            };
            if !in_expansion.contains_key(&item) {
                members.push(item);
            }
        }
        if members.is_empty() {
            continue;
        }
        let g = (groups.len() + found.len()) as u32;
        for item in &members {
            in_expansion.insert(*item, g);
        }
        found.push((j as u32, name, members));
    }
    for (j, name, members) in found {
        let id = format!("each:{}", ordered.ids[j as usize]);
        let mut expansion = group(id, GroupKind::Expansion, name.to_owned(), None, 0);
        expansion.parent = Some(job_sequence[j as usize]);
        expansion.label = format!("{name} ×{}", members.len());
        groups.push(expansion);
    }
    in_expansion
}

/// Each group's depth (parents do not always come before children by index: walk up).
fn depths(groups: &mut [Group]) {
    for g in 1..groups.len() {
        let mut depth = 0;
        let mut at = groups[g].parent;
        while let Some(p) = at {
            depth += 1;
            at = groups[p as usize].parent;
            if depth > groups.len() as u32 {
                break;
            }
        }
        groups[g].depth = depth;
    }
}

/// Each group's items in run order (a group's place is its first job's), its count of
/// jobs (its own: not the begin and end wrappers, which `wrappers` marks), and each item's
/// slot in its group.
fn items(groups: &mut [Group], job_group: &[u32], wrappers: &[bool]) -> HashMap<Item, u32> {
    let mut first_job: Vec<u32> = vec![u32::MAX; groups.len()];
    for (j, &g) in job_group.iter().enumerate() {
        let mut at = Some(g);
        while let Some(group) = at {
            let slot = &mut first_job[group as usize];
            *slot = (*slot).min(j as u32);
            groups[group as usize].jobs += u32::from(group != 0 && !wrappers[j]);
            at = groups[group as usize].parent;
        }
    }
    groups[0].jobs = wrappers.iter().filter(|wrapper| !**wrapper).count() as u32;
    let mut items: Vec<Vec<(u32, Item)>> = vec![Vec::new(); groups.len()];
    for (j, &g) in job_group.iter().enumerate() {
        items[g as usize].push((j as u32, Item::Job(j as u32)));
    }
    for (g, group) in groups.iter().enumerate().skip(1) {
        let parent = group.parent.unwrap_or(0);
        items[parent as usize].push((first_job[g], Item::Group(g as u32)));
    }
    let mut slot_of: HashMap<Item, u32> = HashMap::with_capacity(job_group.len() + groups.len());
    for (g, list) in items.iter_mut().enumerate() {
        list.sort_by_key(|(first, _)| *first);
        groups[g].items = list.iter().map(|(_, item)| *item).collect();
        for (slot, (_, item)) in list.iter().enumerate() {
            slot_of.insert(*item, slot as u32);
        }
    }
    slot_of
}

/// The chain's edges, each lifted to the innermost group holding both ends (between the
/// items there that hold them), once each.
fn edges(
    groups: &mut [Group],
    job_group: &[u32],
    succs: &[Vec<u32>],
    slot_of: &HashMap<Item, u32>,
) {
    let container = |groups: &[Group], item: Item| -> Option<u32> {
        match item {
            Item::Job(j) => Some(job_group[j as usize]),
            Item::Group(g) => groups[g as usize].parent,
        }
    };
    let mut edges: Vec<HashSet<(u32, u32)>> = vec![HashSet::new(); groups.len()];
    for (u, tos) in succs.iter().enumerate() {
        for &v in tos {
            let (mut a, mut b) = (Item::Job(u as u32), Item::Job(v));
            let (mut ga, mut gb) = (container(groups, a), container(groups, b));
            while let (Some(x), Some(y)) = (ga, gb) {
                if x == y {
                    break;
                }
                if groups[x as usize].depth >= groups[y as usize].depth {
                    a = Item::Group(x);
                    ga = groups[x as usize].parent;
                } else {
                    b = Item::Group(y);
                    gb = groups[y as usize].parent;
                }
            }
            if let (Some(g), true) = (ga, ga == gb)
                && a != b
            {
                edges[g as usize].insert((slot_of[&a], slot_of[&b]));
            }
        }
    }
    for (g, set) in edges.into_iter().enumerate() {
        let mut list: Vec<(u32, u32)> = set.into_iter().collect();
        list.sort_unstable();
        groups[g].edges = list;
    }
}

/// The nearest sequence at or above group `g`.
fn ancestor_sequence(groups: &[Group], g: u32) -> Option<u32> {
    let mut at = Some(g);
    while let Some(group) = at {
        if groups[group as usize].kind == GroupKind::Sequence {
            return Some(group);
        }
        at = groups[group as usize].parent;
    }
    None
}

/// Each sequence's own `each:` element and label: its name, the element, its retries;
/// an iteration is named by its element alone (its expansion's header names the rest).
fn sequence_labels(ordered: &Ordered<'_>, groups: &mut [Group]) {
    let begin_of = |groups: &[Group], g: u32| -> Option<&OutlineJob> {
        let &j = ordered.index.get(&groups[g as usize].id)?;
        Some(ordered.jobs[j as usize])
    };
    for g in 1..groups.len() {
        if groups[g].kind != GroupKind::Sequence {
            continue;
        }
        let Some(begin) = begin_of(groups, g as u32) else {
            continue;
        };
        let outer = groups[g]
            .parent
            .and_then(|p| ancestor_sequence(groups, p))
            .and_then(|p| begin_of(groups, p))
            .map(|job| &job.each);
        let each = begin.each.own_text(outer, ", ");
        let in_expansion = groups[g]
            .parent
            .is_some_and(|p| groups[p as usize].kind == GroupKind::Expansion);
        let mut label = groups[g].name.clone();
        if in_expansion && !each.is_empty() {
            label.clone_from(&each);
        } else if !each.is_empty() {
            label = format!("{label} [{each}]");
        }
        if begin.sequence_retry > 0 {
            label = format!("{label} (retry {})", begin.sequence_retry);
        }
        groups[g].each = each;
        groups[g].label = label;
    }
}

/// Each job's label: its name, with its element when it is an iteration of an expansion.
fn job_labels(ordered: &Ordered<'_>, job_group: &[u32], groups: &[Group]) -> Vec<String> {
    // Each expansion's sequence's begin job's element, found once.
    let mut outer_of: HashMap<u32, Option<&Each>> = HashMap::new();
    ordered
        .jobs
        .iter()
        .enumerate()
        .map(|(j, job)| {
            let g = job_group[j];
            if g != 0 && groups[g as usize].kind == GroupKind::Expansion {
                let outer = *outer_of.entry(g).or_insert_with(|| {
                    let p = ancestor_sequence(groups, g)?;
                    let &begin = ordered.index.get(&groups[p as usize].id)?;
                    Some(&ordered.jobs[begin as usize].each)
                });
                let each = job.each.own_text(outer, ", ");
                if !each.is_empty() {
                    return format!("{} [{each}]", job.name);
                }
            }
            job.name.clone()
        })
        .collect()
}

impl Structure {
    pub fn of(chain: &JobChain) -> Structure {
        Structure::of_outline(Outline::of(chain))
    }

    pub fn of_outline(outline: Outline) -> Structure {
        let ordered = run_order(&outline);
        let n = ordered.ids.len();
        let mut groups = vec![group(
            String::new(),
            GroupKind::Root,
            String::new(),
            None,
            n as u32,
        )];
        let (job_sequence, parents) = sequences(&ordered, &mut groups);
        let in_expansion = expansions(&ordered, &job_sequence, &parents, &mut groups);
        for (&own, &parent) in &parents {
            groups[own as usize].parent = Some(
                in_expansion
                    .get(&Item::Group(own))
                    .copied()
                    .unwrap_or(parent),
            );
        }
        let job_group: Vec<u32> = (0..n as u32)
            .map(|j| {
                in_expansion
                    .get(&Item::Job(j))
                    .copied()
                    .unwrap_or(job_sequence[j as usize])
            })
            .collect();
        depths(&mut groups);
        let wrappers: Vec<bool> = ordered
            .jobs
            .iter()
            .map(|job| names::is_wrapper(&job.name, &job.job_type))
            .collect();
        let slot_of = items(&mut groups, &job_group, &wrappers);
        edges(&mut groups, &job_group, &ordered.succs, &slot_of);
        sequence_labels(&ordered, &mut groups);
        let labels = job_labels(&ordered, &job_group, &groups);
        let group_index = groups
            .iter()
            .enumerate()
            .skip(1)
            .map(|(g, group)| (group.id.clone(), g as u32))
            .collect();
        let Ordered { index, place, .. } = ordered;
        // The jobs moved into run order.
        let mut placed: Vec<(u32, OutlineJob)> = place.into_iter().zip(outline.jobs).collect();
        placed.sort_unstable_by_key(|(at, _)| *at);
        Structure {
            index,
            job_group,
            job_sequence,
            groups,
            group_index,
            labels,
            wrappers,
            jobs: placed.into_iter().map(|(_, job)| job).collect(),
        }
    }

    /// How many jobs the chain has.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// Job `j`'s id.
    pub fn job_id(&self, j: u32) -> &str {
        &self.jobs[j as usize].id
    }

    /// Job `j` as drawn: its name, with the `each:` element of its expansion.
    pub fn label(&self, j: u32) -> &str {
        &self.labels[j as usize]
    }

    /// Whether job `j` is a begin or end wrapper.
    pub fn is_wrapper(&self, j: u32) -> bool {
        self.wrappers[j as usize]
    }

    /// Job `j` as a view shows it.
    pub fn job(&self, j: u32) -> &OutlineJob {
        &self.jobs[j as usize]
    }

    /// The groups holding job `j`, innermost first (the root last).
    pub fn ancestors(&self, j: u32) -> impl Iterator<Item = u32> + '_ {
        let mut at = Some(self.job_group[j as usize]);
        std::iter::from_fn(move || {
            let group = at?;
            at = self.groups[group as usize].parent;
            Some(group)
        })
    }

    /// The nearest sequence at or above group `g`.
    pub fn sequence_of_group(&self, g: u32) -> Option<u32> {
        ancestor_sequence(&self.groups, g)
    }

    /// The sequence holding sequence `g` (`None` for the request's own).
    pub fn parent_sequence(&self, g: u32) -> Option<u32> {
        self.groups[g as usize]
            .parent
            .and_then(|p| self.sequence_of_group(p))
    }
}

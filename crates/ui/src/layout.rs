//! The request page's drawing of a job chain: its structure (sequences and expansions as
//! nested groups, computed once per chain, which never changes) and a layered layout of
//! what is visible (computed for each set of open groups the viewer asks for).
//!
//! Each group is laid out on its own, left to right: its items (jobs and groups inside
//! it) are put in layers by longest path over the edges between them, ordered in each
//! layer by the barycenter of their predecessors, and stacked; an open group's size is
//! that of its content, so groups nest. An edge of the chain between two jobs in
//! different groups is drawn once, between the two items that hold them inside the
//! innermost group holding both (a chain enters a sequence only through its begin job
//! and leaves it through its end job, so nothing is lost). Large groups start closed
//! and show counts by state; an open group shows at most [`ITEM_CAP`] items, the rest
//! as one "more" node.

use std::collections::{HashMap, HashSet, VecDeque};

use proto::JobChain;
use serde::Serialize;
use serde_json::Value;

/// Items an open group shows; past it the rest are one "more" node.
pub const ITEM_CAP: usize = 200;
/// Visible nodes the default view opens groups up to, breadth first.
pub const DEFAULT_BUDGET: usize = 150;
/// An expansion with more iterations than this starts closed whatever the budget.
pub const LARGE_EXPANSION: usize = 24;

const JOB_W: f64 = 150.0;
const JOB_H: f64 = 40.0;
const DOT: f64 = 12.0;
const CLOSED_W: f64 = 196.0;
const CLOSED_H: f64 = 58.0;
const GAP_X: f64 = 30.0;
const GAP_Y: f64 = 14.0;
const PAD: f64 = 12.0;
const HEADER: f64 = 26.0;

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
    pub label: String,
    pub parent: Option<u32>,
    pub depth: u32,
    /// In run order.
    pub items: Vec<Item>,
    /// Between items (their indices in `items`), once each.
    pub edges: Vec<(u32, u32)>,
    /// Jobs inside, at any depth.
    pub jobs: u32,
}

/// A chain's groups and where each job is, by job index (jobs in run order).
#[derive(Debug)]
pub struct Structure {
    pub job_ids: Vec<String>,
    pub index: HashMap<String, u32>,
    /// The group holding each job.
    pub job_group: Vec<u32>,
    pub groups: Vec<Group>,
    pub group_index: HashMap<String, u32>,
    labels: Vec<String>,
    wrappers: Vec<bool>,
    /// Each job as the chain has it, without its args and data (what a view shows).
    jobs: Vec<proto::Job>,
}

/// A begin or end wrapper: a noop that only joins (drawn as a dot).
fn is_wrapper(name: &str, job_type: &str) -> bool {
    job_type == "noop" && (name.ends_with("_begin") || name.ends_with("_end"))
}

/// `name=value` pairs, strings unquoted.
fn each_text(each: &proto::JobArgs) -> String {
    each.iter()
        .map(|(name, value)| match value {
            Value::String(text) => format!("{name}={text}"),
            other => format!("{name}={other}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `each:` elements `own` has that `outer` does not.
fn own_each(own: &proto::JobArgs, outer: Option<&proto::JobArgs>) -> String {
    let own: proto::JobArgs = own
        .iter()
        .filter(|(name, value)| outer.and_then(|each| each.get(name)) != Some(*value))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    each_text(&own)
}

impl Structure {
    pub fn of(chain: &JobChain) -> Structure {
        // Jobs in a topological order (Kahn's, ties by id), which is run order.
        let mut indegree: HashMap<&str, usize> =
            chain.jobs.keys().map(|id| (id.as_str(), 0)).collect();
        for succs in chain.adjacency_list.values() {
            for succ in succs {
                if let Some(n) = indegree.get_mut(succ.as_str()) {
                    *n += 1;
                }
            }
        }
        let mut ready: std::collections::BTreeSet<&str> = indegree
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(id, _)| *id)
            .collect();
        let mut ordered: Vec<&str> = Vec::with_capacity(chain.jobs.len());
        let mut queue: VecDeque<&str> = VecDeque::new();
        while let Some(first) = ready.pop_first() {
            queue.push_back(first);
            while let Some(id) = queue.pop_front() {
                ordered.push(id);
                for succ in chain.adjacency_list.get(id).into_iter().flatten() {
                    if let Some(n) = indegree.get_mut(succ.as_str()) {
                        *n -= 1;
                        if *n == 0 {
                            queue.push_back(succ.as_str());
                        }
                    }
                }
            }
        }
        // A chain with a cycle is refused before it is stored; keep any rest anyway.
        if ordered.len() < chain.jobs.len() {
            let seen: HashSet<&str> = ordered.iter().copied().collect();
            let mut rest: Vec<&str> = chain
                .jobs
                .keys()
                .map(String::as_str)
                .filter(|id| !seen.contains(id))
                .collect();
            rest.sort_unstable();
            ordered.extend(rest);
        }
        let index: HashMap<String, u32> = ordered
            .iter()
            .enumerate()
            .map(|(i, id)| ((*id).to_owned(), i as u32))
            .collect();
        let n = ordered.len();
        let jobs: Vec<&proto::Job> = ordered.iter().map(|id| &chain.jobs[*id]).collect();
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut succs: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (from, tos) in &chain.adjacency_list {
            let Some(&f) = index.get(from) else { continue };
            for to in tos {
                if let Some(&t) = index.get(to) {
                    succs[f as usize].push(t);
                    preds[t as usize].push(f);
                }
            }
        }

        // Groups: the synthetic root, then each sequence (named by its begin job).
        let mut groups = vec![Group {
            id: String::new(),
            kind: GroupKind::Root,
            label: String::new(),
            parent: None,
            depth: 0,
            items: Vec::new(),
            edges: Vec::new(),
            jobs: n as u32,
        }];
        let mut group_of_seq: HashMap<u32, u32> = HashMap::new();
        for job in &jobs {
            if let Some(&begin) = index.get(&job.sequence_id)
                && !group_of_seq.contains_key(&begin)
            {
                group_of_seq.insert(begin, 0);
            }
        }
        let mut seqs: Vec<u32> = group_of_seq.keys().copied().collect();
        seqs.sort_unstable();
        for &begin in &seqs {
            let id = groups.len() as u32;
            group_of_seq.insert(begin, id);
            groups.push(Group {
                id: ordered[begin as usize].to_owned(),
                kind: GroupKind::Sequence,
                label: String::new(),
                parent: None,
                depth: 0,
                items: Vec::new(),
                edges: Vec::new(),
                jobs: 0,
            });
        }
        let seq_group = |job: u32| -> u32 {
            index
                .get(&jobs[job as usize].sequence_id)
                .and_then(|begin| group_of_seq.get(begin))
                .copied()
                .unwrap_or(0)
        };
        // A sequence's parent: the sequence of a job just before its begin job.
        let mut seq_parent: HashMap<u32, u32> = HashMap::new();
        for &begin in &seqs {
            let own = group_of_seq[&begin];
            let parent = preds[begin as usize]
                .iter()
                .map(|&p| seq_group(p))
                .find(|&g| g != own)
                .unwrap_or(0);
            seq_parent.insert(own, parent);
        }
        // Expansions: what a `repeat_..._begin` wrapper leads to, inside its sequence.
        let mut in_expansion: HashMap<Item, u32> = HashMap::new();
        for (j, job) in jobs.iter().enumerate() {
            if !(job.name.starts_with("repeat_") && job.name.ends_with("_begin")) {
                continue;
            }
            let home = seq_group(j as u32);
            let mut members = Vec::new();
            for &s in &succs[j] {
                let item = match group_of_seq.get(&s) {
                    Some(&g) if g != home && seq_parent.get(&g) == Some(&home) => Item::Group(g),
                    _ if seq_group(s) == home => Item::Job(s),
                    _ => continue,
                };
                if !in_expansion.contains_key(&item) {
                    members.push(item);
                }
            }
            if members.is_empty() {
                continue;
            }
            let id = groups.len() as u32;
            let name = job
                .name
                .strip_prefix("repeat_")
                .and_then(|n| n.strip_suffix("_begin"))
                .unwrap_or(&job.name);
            groups.push(Group {
                id: format!("each:{}", ordered[j]),
                kind: GroupKind::Expansion,
                label: format!("{name} ×{}", members.len()),
                parent: Some(home),
                depth: 0,
                items: Vec::new(),
                edges: Vec::new(),
                jobs: 0,
            });
            for item in members {
                in_expansion.insert(item, id);
            }
        }
        for (&own, &parent) in &seq_parent {
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
                    .unwrap_or_else(|| seq_group(j))
            })
            .collect();
        // Depths (parents before children is not guaranteed by index: walk up).
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
        // Items in run order: a group's place is its first job's.
        let mut first_job: Vec<u32> = vec![u32::MAX; groups.len()];
        for (j, &g) in job_group.iter().enumerate() {
            let mut at = Some(g);
            while let Some(group) = at {
                let slot = &mut first_job[group as usize];
                *slot = (*slot).min(j as u32);
                groups[group as usize].jobs += u32::from(group != 0);
                at = groups[group as usize].parent;
            }
        }
        groups[0].jobs = n as u32;
        let mut items: Vec<Vec<(u32, Item)>> = vec![Vec::new(); groups.len()];
        for (j, &g) in job_group.iter().enumerate() {
            items[g as usize].push((j as u32, Item::Job(j as u32)));
        }
        for g in 1..groups.len() {
            let parent = groups[g].parent.unwrap_or(0);
            items[parent as usize].push((first_job[g], Item::Group(g as u32)));
        }
        let mut slot_of: HashMap<Item, u32> = HashMap::with_capacity(n + groups.len());
        for (g, list) in items.iter_mut().enumerate() {
            list.sort_by_key(|(first, _)| *first);
            groups[g].items = list.iter().map(|(_, item)| *item).collect();
            for (slot, (_, item)) in list.iter().enumerate() {
                slot_of.insert(*item, slot as u32);
            }
        }
        // Edges, lifted to the innermost group holding both ends.
        let container = |item: Item| -> Option<u32> {
            match item {
                Item::Job(j) => Some(job_group[j as usize]),
                Item::Group(g) => groups[g as usize].parent,
            }
        };
        let mut edges: Vec<HashSet<(u32, u32)>> = vec![HashSet::new(); groups.len()];
        for (u, tos) in succs.iter().enumerate() {
            for &v in tos {
                let (mut a, mut b) = (Item::Job(u as u32), Item::Job(v));
                let (mut ga, mut gb) = (container(a), container(b));
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
        // Labels.
        for g in 1..groups.len() {
            if groups[g].kind != GroupKind::Sequence {
                continue;
            }
            let begin = &chain.jobs[&groups[g].id];
            let mut name = begin.name.strip_suffix("_begin").unwrap_or(&begin.name);
            for prefix in ["sequence_", "request_"] {
                name = name.strip_prefix(prefix).unwrap_or(name);
            }
            let outer = groups[g]
                .parent
                .and_then(|p| ancestor_sequence(&groups, p))
                .map(|p| &chain.jobs[&groups[p as usize].id].each);
            let each = own_each(&begin.each, outer);
            // An iteration is named by its element: its expansion's header names the rest.
            let in_expansion = groups[g]
                .parent
                .is_some_and(|p| groups[p as usize].kind == GroupKind::Expansion);
            let mut label = name.to_owned();
            if in_expansion && !each.is_empty() {
                label = each;
            } else if !each.is_empty() {
                label = format!("{label} [{each}]");
            }
            if begin.sequence_retry > 0 {
                label = format!("{label} (retry {})", begin.sequence_retry);
            }
            groups[g].label = label;
        }
        let labels = jobs
            .iter()
            .enumerate()
            .map(|(j, job)| {
                if job_group[j] != 0 && groups[job_group[j] as usize].kind == GroupKind::Expansion {
                    let outer = ancestor_sequence(&groups, job_group[j])
                        .map(|p| &chain.jobs[&groups[p as usize].id].each);
                    let each = own_each(&job.each, outer);
                    if !each.is_empty() {
                        return format!("{} [{each}]", job.name);
                    }
                }
                job.name.clone()
            })
            .collect();
        let wrappers = jobs
            .iter()
            .map(|job| is_wrapper(&job.name, &job.job_type))
            .collect();
        let light = jobs
            .iter()
            .map(|job| proto::Job {
                args: proto::JobArgs::new(),
                data: proto::JobArgs::new(),
                bytes: Vec::new(),
                ..(*job).clone()
            })
            .collect();
        let group_index = groups
            .iter()
            .enumerate()
            .skip(1)
            .map(|(g, group)| (group.id.clone(), g as u32))
            .collect();
        Structure {
            job_ids: ordered.iter().map(|id| (*id).to_owned()).collect(),
            index,
            job_group,
            groups,
            group_index,
            labels,
            wrappers,
            jobs: light,
        }
    }

    /// Job `j` as drawn: its name, with the `each:` element of its expansion.
    pub fn label(&self, j: u32) -> &str {
        &self.labels[j as usize]
    }

    /// Job `j` of the chain (without its args and data).
    pub fn job(&self, j: u32) -> &proto::Job {
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

/// Which groups the viewer opened or closed, by id, against the defaults.
#[derive(Debug, Default, Clone)]
pub struct Toggles {
    pub open: HashSet<String>,
    pub closed: HashSet<String>,
}

impl Toggles {
    /// From the `open` and `closed` query parameters (comma-separated ids).
    pub fn parse(open: &str, closed: &str) -> Toggles {
        let split = |text: &str| {
            text.split(',')
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
                .collect()
        };
        Toggles {
            open: split(open),
            closed: split(closed),
        }
    }
}

/// One drawn node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Node {
    Job {
        id: String,
        label: String,
        #[serde(rename = "type")]
        job_type: String,
        wrapper: bool,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
    },
    Group {
        id: String,
        label: String,
        group: GroupKind,
        open: bool,
        jobs: u32,
        items: u32,
        depth: u32,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
    },
    /// Items of an open group past [`ITEM_CAP`].
    More {
        id: String,
        items: u32,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
    },
}

/// What is drawn for one set of toggles.
#[derive(Debug, Clone, Serialize)]
pub struct Drawing {
    pub width: f64,
    pub height: f64,
    /// Open groups first (outermost first), then closed groups, jobs and more nodes.
    pub nodes: Vec<Node>,
    /// `[x1, y1, x2, y2]`: from the right middle of one node to the left middle of another.
    pub edges: Vec<[f64; 4]>,
    /// The jobs drawn, by index (for their states).
    #[serde(skip)]
    pub jobs: Vec<u32>,
    /// Closed groups drawn, by index (for their counts).
    #[serde(skip)]
    pub closed: Vec<u32>,
    /// Each more node's id and the items it stands for, in its group.
    #[serde(skip)]
    pub more: Vec<(String, Vec<Item>)>,
}

/// A placed box of the layout, relative to its group's content.
#[derive(Debug, Clone)]
struct Placed {
    node: Node,
    /// Nested nodes (an open group's), relative to this node's top left.
    inner: Vec<Placed>,
    inner_edges: Vec<[f64; 4]>,
    w: f64,
    h: f64,
}

impl Structure {
    /// Which groups are open: the root and its children always, then breadth first
    /// while the view stays within [`DEFAULT_BUDGET`] nodes, a large expansion never;
    /// the toggles override the defaults.
    pub fn open_groups(&self, toggles: &Toggles) -> Vec<bool> {
        let mut open = vec![false; self.groups.len()];
        // An expansion's iterations open all together or not at all (decided when the
        // first is reached), so that they look alike.
        let mut iterations_fit: HashMap<u32, bool> = HashMap::new();
        let shown = |g: &Group| g.items.len().min(ITEM_CAP + 1);
        let mut visible = 1usize;
        let mut queue = VecDeque::from([0u32]);
        while let Some(g) = queue.pop_front() {
            let group = &self.groups[g as usize];
            let items = shown(group);
            let parent = group.parent.map(|p| &self.groups[p as usize]);
            let is_open = if toggles.open.contains(&group.id) {
                true
            } else if toggles.closed.contains(&group.id) {
                false
            } else if g == 0 || group.parent == Some(0) {
                true
            } else if group.kind == GroupKind::Expansion && group.items.len() > LARGE_EXPANSION {
                false
            } else if let Some(expansion) = parent.filter(|p| p.kind == GroupKind::Expansion) {
                let p = group.parent.unwrap_or(0);
                *iterations_fit.entry(p).or_insert_with(|| {
                    let cost: usize = expansion
                        .items
                        .iter()
                        .take(ITEM_CAP)
                        .map(|item| match item {
                            Item::Group(c) => shown(&self.groups[*c as usize]).saturating_sub(1),
                            Item::Job(_) => 0,
                        })
                        .sum();
                    visible + cost <= DEFAULT_BUDGET
                })
            } else {
                visible + items <= DEFAULT_BUDGET + 1
            };
            if !is_open {
                continue;
            }
            open[g as usize] = true;
            visible = visible + items - 1;
            for item in &group.items {
                if let Item::Group(child) = item {
                    queue.push_back(*child);
                }
            }
        }
        open
    }

    /// Lays out what `toggles` show.
    pub fn draw(&self, toggles: &Toggles) -> Drawing {
        let open = self.open_groups(toggles);
        let mut drawing = Drawing {
            width: 0.0,
            height: 0.0,
            nodes: Vec::new(),
            edges: Vec::new(),
            jobs: Vec::new(),
            closed: Vec::new(),
            more: Vec::new(),
        };
        let root = self.place_group(0, &open, &mut drawing);
        drawing.width = root.w;
        drawing.height = root.h;
        let mut groups = Vec::new();
        let mut rest = Vec::new();
        flatten(
            root.inner,
            &root.inner_edges,
            0.0,
            0.0,
            &mut groups,
            &mut rest,
            &mut drawing.edges,
        );
        drawing.nodes = groups;
        drawing.nodes.extend(rest);
        drawing
    }

    /// An open group's content, laid out in layers; its size includes padding and, but
    /// for the root, a header.
    fn place_group(&self, g: u32, open: &[bool], drawing: &mut Drawing) -> Placed {
        let group = &self.groups[g as usize];
        // What is shown: the first ITEM_CAP items, then one more node for the rest.
        let shown = group.items.len().min(ITEM_CAP);
        let hidden = &group.items[shown..];
        let more_slot = (!hidden.is_empty()).then_some(shown as u32);
        let count = shown + usize::from(more_slot.is_some());
        let to_shown = |slot: u32| -> u32 {
            if (slot as usize) < shown {
                slot
            } else {
                shown as u32
            }
        };
        let mut edges: Vec<(u32, u32)> = group
            .edges
            .iter()
            .map(|&(a, b)| (to_shown(a), to_shown(b)))
            .filter(|(a, b)| a != b)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        let mut placed: Vec<Placed> = Vec::with_capacity(count);
        for item in &group.items[..shown] {
            placed.push(match *item {
                Item::Job(j) => {
                    drawing.jobs.push(j);
                    let (w, h) = if self.wrappers[j as usize] {
                        (DOT, DOT)
                    } else {
                        (JOB_W, JOB_H)
                    };
                    Placed {
                        node: Node::Job {
                            id: self.job_ids[j as usize].clone(),
                            label: self.labels[j as usize].clone(),
                            job_type: self.jobs[j as usize].job_type.clone(),
                            wrapper: self.wrappers[j as usize],
                            x: 0.0,
                            y: 0.0,
                            w,
                            h,
                        },
                        inner: Vec::new(),
                        inner_edges: Vec::new(),
                        w,
                        h,
                    }
                }
                Item::Group(child) => {
                    let sub = &self.groups[child as usize];
                    if open[child as usize] {
                        let inner = self.place_group(child, open, drawing);
                        Placed {
                            node: group_node(sub, true, inner.w, inner.h),
                            ..inner
                        }
                    } else {
                        drawing.closed.push(child);
                        Placed {
                            node: group_node(sub, false, CLOSED_W, CLOSED_H),
                            inner: Vec::new(),
                            inner_edges: Vec::new(),
                            w: CLOSED_W,
                            h: CLOSED_H,
                        }
                    }
                }
            });
        }
        if more_slot.is_some() {
            let id = format!("more:{}", group.id);
            drawing.more.push((id.clone(), hidden.to_vec()));
            placed.push(Placed {
                node: Node::More {
                    id,
                    items: hidden.len() as u32,
                    x: 0.0,
                    y: 0.0,
                    w: CLOSED_W,
                    h: CLOSED_H,
                },
                inner: Vec::new(),
                inner_edges: Vec::new(),
                w: CLOSED_W,
                h: CLOSED_H,
            });
        }
        // Layers by longest path (items are in run order, so predecessors come first;
        // an edge against that order is ignored rather than looped on).
        let mut layer = vec![0usize; count];
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); count];
        for &(a, b) in &edges {
            if a < b {
                preds[b as usize].push(a);
            }
        }
        for i in 0..count {
            layer[i] = preds[i]
                .iter()
                .map(|&p| layer[p as usize] + 1)
                .max()
                .unwrap_or(0);
        }
        let layers = layer.iter().max().map_or(0, |m| m + 1);
        let mut columns: Vec<Vec<u32>> = vec![Vec::new(); layers];
        for (i, &l) in layer.iter().enumerate() {
            columns[l].push(i as u32);
        }
        // Order in each layer by the mean position of predecessors, twice.
        let mut position = vec![0f64; count];
        for column in &columns {
            for (p, &i) in column.iter().enumerate() {
                position[i as usize] = p as f64;
            }
        }
        for _ in 0..2 {
            for column in columns.iter_mut().skip(1) {
                let key = |i: &u32| -> f64 {
                    let ps = &preds[*i as usize];
                    if ps.is_empty() {
                        position[*i as usize]
                    } else {
                        ps.iter().map(|&p| position[p as usize]).sum::<f64>() / ps.len() as f64
                    }
                };
                let mut keyed: Vec<(f64, u32)> = column.iter().map(|i| (key(i), *i)).collect();
                keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                *column = keyed.into_iter().map(|(_, i)| i).collect();
                for (p, &i) in column.iter().enumerate() {
                    position[i as usize] = p as f64;
                }
            }
        }
        // Coordinates: columns left to right, each stacked and centred vertically.
        let top = if g == 0 { PAD } else { HEADER + PAD / 2.0 };
        let widths: Vec<f64> = columns
            .iter()
            .map(|c| c.iter().map(|&i| placed[i as usize].w).fold(0.0, f64::max))
            .collect();
        let heights: Vec<f64> = columns
            .iter()
            .map(|c| {
                c.iter().map(|&i| placed[i as usize].h).sum::<f64>()
                    + GAP_Y * (c.len().saturating_sub(1)) as f64
            })
            .collect();
        let content_h = heights.iter().copied().fold(0.0, f64::max);
        let mut x = PAD;
        let mut at = vec![(0f64, 0f64); count];
        for (l, column) in columns.iter().enumerate() {
            let mut y = top + (content_h - heights[l]) / 2.0;
            for &i in column {
                let item = &placed[i as usize];
                at[i as usize] = (x + (widths[l] - item.w) / 2.0, y);
                y += item.h + GAP_Y;
            }
            x += widths[l] + GAP_X;
        }
        let w = (x - GAP_X + PAD).max(if g == 0 { 0.0 } else { CLOSED_W });
        let h = top + content_h + PAD;
        let inner_edges = edges
            .iter()
            .filter(|(a, b)| a < b)
            .map(|&(a, b)| {
                let (ax, ay) = at[a as usize];
                let (bx, by) = at[b as usize];
                let pa = &placed[a as usize];
                let pb = &placed[b as usize];
                [ax + pa.w, ay + edge_y(pa), bx, by + edge_y(pb)]
            })
            .collect();
        let inner = placed
            .into_iter()
            .zip(at)
            .map(|(mut p, (x, y))| {
                set_xy(&mut p.node, x, y);
                p
            })
            .collect();
        Placed {
            node: Node::More {
                id: String::new(),
                items: 0,
                x: 0.0,
                y: 0.0,
                w,
                h,
            },
            inner,
            inner_edges,
            w,
            h,
        }
    }
}

/// Where an edge meets a node: its middle, or an open group's header line.
fn edge_y(placed: &Placed) -> f64 {
    match placed.node {
        Node::Group { open: true, .. } => HEADER / 2.0,
        _ => placed.h / 2.0,
    }
}

fn group_node(group: &Group, open: bool, w: f64, h: f64) -> Node {
    Node::Group {
        id: group.id.clone(),
        label: group.label.clone(),
        group: group.kind,
        open,
        jobs: group.jobs,
        items: group.items.len() as u32,
        depth: group.depth,
        x: 0.0,
        y: 0.0,
        w,
        h,
    }
}

fn set_xy(node: &mut Node, nx: f64, ny: f64) {
    match node {
        Node::Job { x, y, .. } | Node::Group { x, y, .. } | Node::More { x, y, .. } => {
            *x = nx;
            *y = ny;
        }
    }
}

/// Absolute coordinates: open groups (outermost first) into `groups`, the rest into
/// `rest`, edges shifted by the offset of the group they are in.
fn flatten(
    placed: Vec<Placed>,
    edges: &[[f64; 4]],
    dx: f64,
    dy: f64,
    groups: &mut Vec<Node>,
    rest: &mut Vec<Node>,
    all_edges: &mut Vec<[f64; 4]>,
) {
    all_edges.extend(
        edges
            .iter()
            .map(|e| [e[0] + dx, e[1] + dy, e[2] + dx, e[3] + dy]),
    );
    for mut p in placed {
        let (x, y) = match &p.node {
            Node::Job { x, y, .. } | Node::Group { x, y, .. } | Node::More { x, y, .. } => (*x, *y),
        };
        set_xy(&mut p.node, x + dx, y + dy);
        let is_open = matches!(p.node, Node::Group { open: true, .. });
        if is_open {
            groups.push(p.node);
            flatten(
                p.inner,
                &p.inner_edges,
                x + dx,
                y + dy,
                groups,
                rest,
                all_edges,
            );
        } else {
            rest.push(p.node);
        }
    }
}

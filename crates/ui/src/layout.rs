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
//! as one "more" node. A fan-out taller than the [`Frame`] it is shown in is wrapped
//! into rows (its iterations as small tiles) no wider than the room beside it, so that
//! 50 hosts fit on a screen with the way in and out in view.

use std::collections::{HashMap, HashSet, VecDeque};

use proto::JobChain;
use serde::Serialize;

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
/// A closed iteration of a fan-out: a tile, so that many fit in a row.
const TILE_W: f64 = 130.0;
const TILE_H: f64 = 36.0;
/// Between the tiles of a wrapped fan-out, across and down.
const TILE_GAP: f64 = 8.0;

pub use graph::structure::{Group, GroupKind, Item};

/// The chain's structure ([`graph::structure::Structure`], which DOT and the terminal
/// tree read too), with the layout of what is visible.
#[derive(Debug)]
pub struct Structure(graph::structure::Structure);

impl std::ops::Deref for Structure {
    type Target = graph::structure::Structure;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Structure {
    pub fn of(chain: &JobChain) -> Structure {
        Structure(graph::structure::Structure::of(chain))
    }

    pub fn of_outline(outline: graph::structure::Outline) -> Structure {
        Structure(graph::structure::Structure::of_outline(outline))
    }
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

/// The box a drawing is shown in (the page's drawing frame), in pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
}

impl Frame {
    /// A laptop's screen, for a caller that does not say.
    pub const DEFAULT: Frame = Frame {
        width: 1200.0,
        height: 700.0,
    };
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
    /// Whether a fan-out was wrapped into rows to fit the frame (so that a larger frame
    /// would change the layout).
    pub wrapped: bool,
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
    /// Open groups drawn, by index (for the worst state inside, which colours them).
    #[serde(skip)]
    pub opened: Vec<u32>,
    /// Each more node's id and the items it stands for, in its group.
    #[serde(skip)]
    pub more: Vec<(String, Vec<Item>)>,
}

impl Drawing {
    fn empty() -> Drawing {
        Drawing {
            width: 0.0,
            height: 0.0,
            wrapped: false,
            nodes: Vec::new(),
            edges: Vec::new(),
            jobs: Vec::new(),
            closed: Vec::new(),
            opened: Vec::new(),
            more: Vec::new(),
        }
    }
}

/// One pass of the layout: which groups are open, which fan-outs are wrapped into rows
/// (by group index, at most how wide, padding included), and each open fan-out's size.
struct Pass<'a> {
    open: &'a [bool],
    wrap: HashMap<u32, f64>,
    /// `(group, width, height)` of each open expansion as laid out.
    expansions: Vec<(u32, f64, f64)>,
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

    /// Lays out what `toggles` show, every fan-out in one column.
    pub fn draw(&self, toggles: &Toggles) -> Drawing {
        self.draw_in(toggles, None)
    }

    /// Lays out what `toggles` show for a `frame`: an open fan-out taller than the
    /// frame is wrapped into rows sharing the width the drawing leaves free (nothing
    /// wraps when the drawing is already as wide as the frame).
    pub fn draw_in(&self, toggles: &Toggles, frame: Option<Frame>) -> Drawing {
        let open = self.open_groups(toggles);
        let mut pass = Pass {
            open: &open,
            wrap: HashMap::new(),
            expansions: Vec::new(),
        };
        let mut drawing = Drawing::empty();
        let mut root = self.place_group(0, &mut pass, &mut drawing);
        if let Some(frame) = frame {
            let tall: Vec<(u32, f64)> = pass
                .expansions
                .iter()
                .filter(|(_, _, h)| *h > frame.height)
                .map(|&(g, w, _)| (g, w))
                .collect();
            let slack = frame.width - root.w;
            if !tall.is_empty() && slack >= 0.0 {
                let share = slack / tall.len() as f64;
                pass.wrap = tall.into_iter().map(|(g, w)| (g, w + share)).collect();
                drawing = Drawing::empty();
                root = self.place_group(0, &mut pass, &mut drawing);
                drawing.wrapped = true;
            }
        }
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
    fn place_group(&self, g: u32, pass: &mut Pass, drawing: &mut Drawing) -> Placed {
        let group = &self.groups[g as usize];
        // What is shown: the first ITEM_CAP items, then one more node for the rest.
        let shown = group.items.len().min(ITEM_CAP);
        let to_shown = |slot: u32| -> u32 { slot.min(shown as u32) };
        let mut edges: Vec<(u32, u32)> = group
            .edges
            .iter()
            .map(|&(a, b)| (to_shown(a), to_shown(b)))
            .filter(|(a, b)| a != b)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        let placed = self.place_items(group, shown, pass, drawing);
        let (mut columns, preds) = layers(placed.len(), &edges);
        let placed = match pass.wrap.get(&g) {
            // A fan-out's iterations have no edges between them: one layer.
            Some(&limit) if columns.len() == 1 && edges.is_empty() => arrange_rows(placed, limit),
            _ => {
                order_layers(&mut columns, &preds, placed.len());
                arrange(g, placed, &columns, &edges)
            }
        };
        if group.kind == GroupKind::Expansion {
            pass.expansions.push((g, placed.w, placed.h));
        }
        placed
    }

    /// The shown items of a group, sized (an open group laid out inside), and a "more"
    /// node for the hidden rest.
    fn place_items(
        &self,
        group: &Group,
        shown: usize,
        pass: &mut Pass,
        drawing: &mut Drawing,
    ) -> Vec<Placed> {
        let hidden = &group.items[shown..];
        let count = shown + usize::from(!hidden.is_empty());
        let mut placed: Vec<Placed> = Vec::with_capacity(count);
        for item in &group.items[..shown] {
            placed.push(match *item {
                Item::Job(j) => {
                    drawing.jobs.push(j);
                    let (w, h) = if self.is_wrapper(j) {
                        (DOT, DOT)
                    } else {
                        (JOB_W, JOB_H)
                    };
                    Placed {
                        node: Node::Job {
                            id: self.job_id(j).to_owned(),
                            label: self.label(j).to_owned(),
                            job_type: self.job(j).job_type.clone(),
                            wrapper: self.is_wrapper(j),
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
                    if pass.open[child as usize] {
                        drawing.opened.push(child);
                        let inner = self.place_group(child, pass, drawing);
                        Placed {
                            node: group_node(sub, true, inner.w, inner.h),
                            ..inner
                        }
                    } else {
                        drawing.closed.push(child);
                        // A fan-out's iterations are tiles; other groups show more.
                        let (w, h) = if group.kind == GroupKind::Expansion {
                            (TILE_W, TILE_H)
                        } else {
                            (CLOSED_W, CLOSED_H)
                        };
                        Placed {
                            node: group_node(sub, false, w, h),
                            inner: Vec::new(),
                            inner_edges: Vec::new(),
                            w,
                            h,
                        }
                    }
                }
            });
        }
        if !hidden.is_empty() {
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
        placed
    }
}

/// Each item's layer by longest path (items are in run order, so predecessors come
/// first; an edge against that order is ignored rather than looped on), as columns of
/// items, and each item's predecessors.
fn layers(count: usize, edges: &[(u32, u32)]) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    // Layers by longest path (items are in run order, so predecessors come first;
    // an edge against that order is ignored rather than looped on).
    let mut layer = vec![0usize; count];
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); count];
    for &(a, b) in edges {
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
    (columns, preds)
}

/// Orders each layer by the mean position of its items' predecessors, twice.
fn order_layers(columns: &mut [Vec<u32>], preds: &[Vec<u32>], count: usize) {
    let mut position = vec![0f64; count];
    for column in columns.iter() {
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
}

/// Coordinates: columns left to right, each stacked and centred vertically; the edges
/// between the placed items; the group's size.
fn arrange(g: u32, placed: Vec<Placed>, columns: &[Vec<u32>], edges: &[(u32, u32)]) -> Placed {
    let count = placed.len();
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
    placed_at(placed, at, edges, w, h)
}

/// Coordinates of a wrapped fan-out: its items (with no edges between them) in rows
/// left to right, top to bottom, each row at most `limit` wide with the group's padding.
fn arrange_rows(placed: Vec<Placed>, limit: f64) -> Placed {
    let room = limit - 2.0 * PAD;
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    let mut row_w = 0.0;
    for (i, item) in placed.iter().enumerate() {
        let row = rows.last_mut().expect("one row at least");
        let wider = row_w + TILE_GAP + item.w;
        if row.is_empty() || wider <= room {
            row_w = if row.is_empty() { item.w } else { wider };
            row.push(i);
        } else {
            rows.push(vec![i]);
            row_w = item.w;
        }
    }
    let mut at = vec![(0f64, 0f64); placed.len()];
    let mut y = HEADER + PAD / 2.0;
    let mut content_w = 0f64;
    for row in &rows {
        let row_h = row.iter().map(|&i| placed[i].h).fold(0.0, f64::max);
        let mut x = PAD;
        for &i in row {
            at[i] = (x, y + (row_h - placed[i].h) / 2.0);
            x += placed[i].w + TILE_GAP;
        }
        content_w = content_w.max(x - TILE_GAP - PAD);
        y += row_h + TILE_GAP;
    }
    let w = (content_w + 2.0 * PAD).max(CLOSED_W);
    let h = y - TILE_GAP + PAD;
    placed_at(placed, at, &[], w, h)
}

/// A group's content placed at `at`, with the edges between its items.
fn placed_at(
    placed: Vec<Placed>,
    at: Vec<(f64, f64)>,
    edges: &[(u32, u32)],
    w: f64,
    h: f64,
) -> Placed {
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

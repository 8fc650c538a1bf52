//! The one topological sort (Kahn's algorithm) every crate uses: over the nodes `0..n`
//! given their in-degrees and a way to list each node's successors, with the order in
//! which ready nodes are taken chosen by the caller ([`Ready`]): first come first served
//! ([`VecDeque`], linear, the run order of a job chain) or lowest index first
//! ([`BTreeSet`], a spec's nodes in file order).

use std::collections::{BTreeSet, VecDeque};

/// The nodes whose predecessors are all taken, waiting to be taken.
pub trait Ready: Default {
    fn put(&mut self, node: usize);
    fn take(&mut self) -> Option<usize>;
}

/// First come, first served: a breadth-first order from the roots (in index order).
impl Ready for VecDeque<usize> {
    fn put(&mut self, node: usize) {
        self.push_back(node);
    }
    fn take(&mut self) -> Option<usize> {
        self.pop_front()
    }
}

/// The lowest index first.
impl Ready for BTreeSet<usize> {
    fn put(&mut self, node: usize) {
        self.insert(node);
    }
    fn take(&mut self) -> Option<usize> {
        self.pop_first()
    }
}

/// A topological order, and what is left: the nodes on or after a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sorted {
    pub order: Vec<usize>,
    /// Each node's predecessors not in `order`: above zero for the nodes left out.
    pub in_degree: Vec<usize>,
}

impl Sorted {
    /// Whether every node is in the order (there is no cycle).
    pub fn is_complete(&self) -> bool {
        self.order.len() == self.in_degree.len()
    }

    /// The nodes left out (on or after a cycle), in index order.
    pub fn left(&self) -> Vec<usize> {
        (0..self.in_degree.len())
            .filter(|&node| self.in_degree[node] > 0)
            .collect()
    }
}

/// Kahn's algorithm: `in_degree[node]` predecessors each; `succs(node)` its successors
/// (one entry per edge counted in `in_degree`). Ready nodes are taken in `R`'s order.
pub fn sort<R, S>(mut in_degree: Vec<usize>, mut succs: impl FnMut(usize) -> S) -> Sorted
where
    R: Ready,
    S: IntoIterator<Item = usize>,
{
    let mut ready = R::default();
    for (node, &degree) in in_degree.iter().enumerate() {
        if degree == 0 {
            ready.put(node);
        }
    }
    let mut order = Vec::with_capacity(in_degree.len());
    while let Some(node) = ready.take() {
        order.push(node);
        for succ in succs(node) {
            let degree = &mut in_degree[succ];
            *degree -= 1;
            if *degree == 0 {
                ready.put(succ);
            }
        }
    }
    Sorted { order, in_degree }
}

/// [`sort`] over successor lists.
pub fn sort_lists<R: Ready>(succs: &[Vec<usize>]) -> Sorted {
    let mut in_degree = vec![0; succs.len()];
    for list in succs {
        for &succ in list {
            in_degree[succ] += 1;
        }
    }
    sort::<R, _>(in_degree, |node| succs[node].iter().copied())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, VecDeque};

    use super::{Sorted, sort_lists};

    #[test]
    fn breadth_first_or_lowest_first_and_what_a_cycle_leaves() {
        // 0 → 2, 0 → 1, 1 → 3, 2 → 3
        let succs = vec![vec![2, 1], vec![3], vec![3], vec![]];
        assert_eq!(
            sort_lists::<VecDeque<usize>>(&succs).order,
            vec![0, 2, 1, 3]
        );
        assert_eq!(
            sort_lists::<BTreeSet<usize>>(&succs).order,
            vec![0, 1, 2, 3]
        );
        // 0 → 1 → 2 → 1, 2 → 3
        let cyclic = vec![vec![1], vec![2], vec![1, 3], vec![]];
        let sorted: Sorted = sort_lists::<VecDeque<usize>>(&cyclic);
        assert!(!sorted.is_complete());
        assert_eq!(sorted.order, vec![0]);
        assert_eq!(sorted.left(), vec![1, 2, 3]);
    }
}

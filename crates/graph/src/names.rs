//! The names of the jobs the grapher adds around a chain's own jobs, made and read back
//! here only: every sequence is a `<place>_begin` → … → `<place>_end` pair of noop jobs,
//! where the place is `request_<type>` for the request's own sequence and
//! `sequence_<node>` for a sequence a node calls; an `each:` node's iterations sit
//! between `repeat_<node>_begin` and `repeat_<node>_end`, and a node with nothing to run
//! is `noop_<node>_begin` → `noop_<node>_end`.

/// The place of the request's own sequence.
pub fn request_place(request_type: &str) -> String {
    format!("request_{request_type}")
}

/// The place of the sequence node `node` calls.
pub fn sequence_place(node: &str) -> String {
    format!("sequence_{node}")
}

/// The wrappers around the iterations of `each:` node `node`.
pub fn repeat_place(node: &str) -> String {
    format!("repeat_{node}")
}

/// The wrappers around wave `number` (1-based) of `each:` node `node`'s elements, inside
/// its `repeat_` wrappers.
pub fn wave_place(node: &str, number: usize) -> String {
    format!("wave_{node}_{number}")
}

/// The `sleep` job before wave `number` of `node` (its `wave_wait`).
pub fn wave_wait(node: &str, number: usize) -> String {
    format!("{node}_wave_{number}_wait")
}

/// The `approval` job before wave `number` of `node` (its `wave_approval`).
pub fn wave_approval(node: &str, number: usize) -> String {
    format!("{node}_wave_{number}_approval")
}

/// The wrappers of a node with nothing to run (an empty expansion).
pub fn noop_place(node: &str) -> String {
    format!("noop_{node}")
}

/// The name of a place's begin job.
pub fn begin(place: &str) -> String {
    format!("{place}_begin")
}

/// The name of a place's end job.
pub fn end(place: &str) -> String {
    format!("{place}_end")
}

/// Whether a job is a begin or end wrapper: a noop that only joins.
pub use proto::is_wrapper;

/// The node whose iterations a `repeat_<node>_begin` job opens; `None` for other jobs.
pub fn expansion_of(name: &str) -> Option<&str> {
    name.strip_prefix("repeat_")?.strip_suffix("_begin")
}

/// The place a begin job opens (its name without `_begin`; the name as it is for other
/// jobs).
pub fn place_of(begin_name: &str) -> &str {
    begin_name.strip_suffix("_begin").unwrap_or(begin_name)
}

/// A sequence's name as people know it, from its begin job's name: the node or request
/// type (without `request_`/`sequence_` and `_begin`).
pub fn sequence_name(begin_name: &str) -> &str {
    let place = place_of(begin_name);
    ["sequence_", "request_"]
        .iter()
        .fold(place, |name, prefix| {
            name.strip_prefix(prefix).unwrap_or(name)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_made_are_read_back() {
        let request = begin(&request_place("deploy"));
        assert_eq!(sequence_name(&request), "deploy");
        let called = begin(&sequence_place("drain"));
        assert_eq!(sequence_name(&called), "drain");
        assert_eq!(place_of(&called), "sequence_drain");
        let repeat = begin(&repeat_place("hosts"));
        assert_eq!(expansion_of(&repeat), Some("hosts"));
        assert_eq!(expansion_of(&end(&repeat_place("hosts"))), None);
        assert_eq!(expansion_of("hosts"), None);
        assert!(is_wrapper(&end(&noop_place("x")), "noop"));
        assert!(!is_wrapper(&begin("x"), "shell"));
        assert!(!is_wrapper("x", "noop"));
    }
}

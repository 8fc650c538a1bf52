//! A chain's outline read from its stored JSON is what the chain itself gives, and the
//! structure of either is the same.

use super::*;
use crate::structure::{Outline, Structure};

/// What a view reads of a structure, job by job and group by group.
fn seen(structure: &Structure) -> Vec<String> {
    let jobs = (0..structure.job_count() as u32).map(|j| {
        let job = structure.job(j);
        format!(
            "job {} {} {} [{}] group {} seq {} wrapper {} retry {} {:?}",
            structure.job_id(j),
            job.job_type,
            structure.label(j),
            job.each.text(","),
            structure.job_group[j as usize],
            structure.job_sequence[j as usize],
            structure.is_wrapper(j),
            job.retry,
            job.elements,
        )
    });
    let groups = structure.groups.iter().map(|group| {
        format!(
            "group {} {:?} {} label {} each {} parent {:?} depth {} items {:?} edges {:?} jobs {}",
            group.id,
            group.kind,
            group.name,
            group.label,
            group.each,
            group.parent,
            group.depth,
            group.items,
            group.edges,
            group.jobs
        )
    });
    jobs.chain(groups).collect()
}

#[test]
fn the_outline_of_a_chain_json_is_the_chain_s_own() {
    let nested = (
        expansion_tests::EXPANSION,
        "r",
        json!({"hosts": ["a", "b", "c"]}),
    );
    let rolling = (
        rollout_tests::ROLLING,
        "restart",
        json!({"hosts": ["w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8"]}),
    );
    for (spec, request_type, request_args) in [nested, rolling] {
        let chain = grapher(spec)
            .create(request_type, &args(request_args))
            .unwrap()
            .job_chain;
        let json = serde_json::to_string(&chain).unwrap();
        let read = Outline::from_json(&json).unwrap();
        let of_chain = Outline::of(&chain);
        assert_eq!(read.jobs, of_chain.jobs, "{request_type}");
        assert_eq!(read.adjacency_list, chain.adjacency_list, "{request_type}");
        // Sorted by id, every job once.
        let ids: Vec<&str> = read.jobs.iter().map(|job| job.id.as_str()).collect();
        let keys: Vec<&str> = chain.jobs.keys().map(String::as_str).collect();
        assert_eq!(ids, keys);
        // The args are not read; the element is.
        assert!(chain.jobs.values().any(|job| !job.args.is_empty()));
        assert!(read.jobs.iter().any(|job| job.each.get("host").is_some()));
        let whole = Structure::of(&chain);
        let outlined = Structure::of_outline(read);
        assert_eq!(seen(&outlined), seen(&whole), "{request_type}");
        assert!(
            seen(&whole)
                .iter()
                .any(|line| line.contains("[host=w3]") || line.contains("label host=b")),
            "{:#?}",
            seen(&whole)
        );
    }
}

#[test]
fn a_chain_json_that_does_not_read_says_where() {
    let err = Outline::from_json(r#"{"requestId": "r", "jobs": 5}"#).unwrap_err();
    assert!(err.to_string().contains("an object of jobs by id"), "{err}");
    let err = Outline::from_json(r#"{"jobs": {"a": {"id": "a", "type": "t", "each": [1]}}}"#)
        .unwrap_err();
    assert!(err.to_string().contains("each: element names"), "{err}");
    // Go's nulls read as empty, as the whole chain's do.
    let read = Outline::from_json(
        r#"{"jobs": {"a": {"id": "a", "type": "t", "each": null, "sequenceId": null}}, "adjacencyList": null}"#,
    )
    .unwrap();
    assert_eq!(read.jobs.len(), 1);
    assert!(read.jobs[0].each.is_empty());
    assert!(
        Outline::from_json(r#"{"jobs": null}"#)
            .unwrap()
            .jobs
            .is_empty()
    );
}

//! Fleet rollouts (issue #50): a node's failure budget resolved against its elements,
//! and its waves with their waits and approvals.

use super::*;

pub(super) const ROLLING: &str = "sequences:
  restart:
    request: true
    args:
      required:
        - name: hosts
    nodes:
      each-host:
        category: job
        type: t
        each: [hosts:host]
        max_failures: 25%
        on_budget_exceeded: stop
        waves: [1, 50%, 100%]
        wave_wait: 5m
        wave_approval: [ops]
        parallel: 2
";

fn job_named<'c>(chain: &'c JobChain, name: &str) -> &'c proto::Job {
    chain
        .jobs
        .values()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("no job {name}"))
}

#[test]
fn waves_are_joined_one_after_another_with_their_waits_and_approvals() {
    let created = grapher(ROLLING)
        .create(
            "restart",
            &args(json!({"hosts": ["w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8"]})),
        )
        .unwrap();
    let chain = &created.job_chain;
    let rendered = render(chain);
    let expected = "\
request_restart_begin [noop] -> restart_begin
restart_begin [noop] -> repeat_each-host_begin
repeat_each-host_begin [noop] -> wave_each-host_1_begin
wave_each-host_1_begin [noop] -> each-host
each-host [t] -> wave_each-host_1_end
wave_each-host_1_end [noop] -> each-host_wave_2_wait
each-host_wave_2_wait [sleep] -> each-host_wave_2_approval
each-host_wave_2_approval [approval] -> wave_each-host_2_begin
wave_each-host_2_begin [noop] parallel=2 -> each-host, each-host, each-host
";
    assert!(rendered.starts_with(expected), "{rendered}");
    assert!(rendered.contains("wave_each-host_3_begin [noop] parallel=2 -> each-host, each-host, each-host, each-host\n"), "{rendered}");
    assert!(rendered.ends_with("wave_each-host_3_end [noop] -> repeat_each-host_end\nrepeat_each-host_end [noop] -> restart_end\nrestart_end [noop] -> request_restart_end\nrequest_restart_end [noop]\n"), "{rendered}");

    // Every wave's begin names its end, the one budget (25% of 8 is 2) and its number.
    let budget = job_named(chain, "repeat_each-host_begin");
    assert!(budget.elements.is_none());
    for (wave, size) in [(1, 1), (2, 3), (3, 4)] {
        let begin = job_named(chain, &format!("wave_each-host_{wave}_begin"));
        let elements = begin.elements.as_deref().expect("a wave's elements");
        assert_eq!(elements.node, "each-host");
        assert_eq!(elements.budget, budget.id);
        assert_eq!(
            elements.end,
            job_named(chain, &format!("wave_each-host_{wave}_end")).id
        );
        assert_eq!(elements.max_failures, Some(2));
        assert_eq!(elements.count, 8);
        assert!(elements.stop);
        assert_eq!((elements.wave, elements.waves), (wave, 3));
        assert_eq!(chain.adjacency_list[&begin.id].len(), size);
    }
    // The wait is a sleep of wave_wait; the approval asks the roles given, naming the wave.
    let wait = job_named(chain, "each-host_wave_3_wait");
    assert_eq!(wait.args["duration"], json!("5m"));
    let approval = job_named(chain, "each-host_wave_3_approval");
    assert_eq!(approval.args["message"], json!("wave 3 of 3: 4 hosts"));
    assert_eq!(approval.args["roles"], json!(["ops"]));
}

#[test]
fn a_budget_alone_keeps_the_elements_between_repeat_wrappers_even_for_one() {
    let spec = "sequences:
  r:
    request: true
    args:
      required:
        - name: hosts
    nodes:
      x:
        category: job
        type: t
        each: [hosts:host]
        max_failures: 1
";
    let created = grapher(spec)
        .create("r", &args(json!({"hosts": ["a"]})))
        .unwrap();
    let chain = &created.job_chain;
    assert_eq!(
        render(chain),
        "request_r_begin [noop] -> r_begin
r_begin [noop] -> repeat_x_begin
repeat_x_begin [noop] -> x
x [t] -> repeat_x_end
repeat_x_end [noop] -> r_end
r_end [noop] -> request_r_end
request_r_end [noop]
"
    );
    let begin = job_named(chain, "repeat_x_begin");
    let elements = begin.elements.as_deref().unwrap();
    assert_eq!(elements.budget, begin.id);
    assert_eq!(elements.end, job_named(chain, "repeat_x_end").id);
    assert_eq!((elements.max_failures, elements.count), (Some(1), 1));
    assert!(!elements.stop);
    assert_eq!((elements.wave, elements.waves), (0, 0));
}

#[test]
fn wave_sizes_are_cumulative_and_the_rest_is_one_more_wave() {
    let node = |waves: &[spec::Share]| spec::Node {
        waves: waves
            .iter()
            .map(|&share| spec::Spanned::new(share, spec::Pos::default()))
            .collect(),
        ..grapher(ROLLING).specs.get("restart").unwrap().nodes[0].clone()
    };
    use spec::Share::{Count, Percent};
    let ends = |waves: &[spec::Share], count| crate::build::wave_ends(&node(waves), count);
    assert_eq!(
        ends(
            &[Count(1), Percent(10.0), Percent(50.0), Percent(100.0)],
            40
        ),
        [1, 4, 20, 40]
    );
    // 10% of 8 rounds up to 1, which adds nothing after the canary: no empty wave.
    assert_eq!(ends(&[Count(1), Percent(10.0), Percent(100.0)], 8), [1, 8]);
    // Past the last wave written, the rest runs as one more wave.
    assert_eq!(ends(&[Count(2), Count(5)], 9), [2, 5, 9]);
    // More than there are elements: one wave of all of them.
    assert_eq!(ends(&[Count(50)], 3), [3]);
    assert_eq!(ends(&[], 3), [3]);
}

#[test]
fn a_chains_elements_are_read_back_with_their_names_waves_and_jobs() {
    let created = grapher(ROLLING)
        .create("restart", &args(json!({"hosts": ["w1", "w2", "w3", "w4"]})))
        .unwrap();
    let fleets = crate::elements::fleets(&created.job_chain);
    assert_eq!(fleets.len(), 1);
    let fleet = &fleets[0];
    assert_eq!(fleet.node, "each-host");
    assert_eq!((fleet.max_failures, fleet.waves), (Some(1), 3));
    let seen: Vec<(&str, u32, usize)> = fleet
        .elements
        .iter()
        .map(|element| (element.name.as_str(), element.wave, element.jobs.len()))
        .collect();
    assert_eq!(
        seen,
        [("w1", 1, 1), ("w2", 2, 1), ("w3", 3, 1), ("w4", 3, 1)]
    );

    // A plain expansion of sequences: each element's jobs are its sequence's.
    let created = grapher(EXPANSION_OF_SEQUENCES)
        .create("r", &args(json!({"hosts": ["a", "b"]})))
        .unwrap();
    let fleets = crate::elements::fleets(&created.job_chain);
    assert_eq!(fleets.len(), 1);
    assert_eq!((fleets[0].max_failures, fleets[0].waves), (None, 0));
    let names: Vec<Vec<&str>> = fleets[0]
        .elements
        .iter()
        .map(|element| {
            element
                .jobs
                .iter()
                .map(|id| created.job_chain.jobs[id].name.as_str())
                .collect()
        })
        .collect();
    assert_eq!(
        names,
        [
            [
                "sequence_x_begin",
                "y_begin",
                "use-host",
                "y_end",
                "sequence_x_end"
            ],
            [
                "sequence_x_begin",
                "y_begin",
                "use-host",
                "y_end",
                "sequence_x_end"
            ]
        ]
    );
    assert_eq!(fleets[0].elements[1].name, "b");
}

const EXPANSION_OF_SEQUENCES: &str = "sequences:
  r:
    request: true
    args:
      required:
        - name: hosts
    nodes:
      x:
        category: sequence
        type: y
        each: [hosts:host]
  y:
    args:
      required:
        - name: host
    nodes:
      use-host:
        category: job
        type: t
        args: [{expected: host}]
";

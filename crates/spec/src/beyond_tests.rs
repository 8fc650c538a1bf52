//! Spindle's own checks: job types against the binary's (issue #12), schedules, the
//! specs' fingerprint, locks.

use super::*;

// ---- issue #12: job types against the binary's ----

fn with_job_types(yaml: &str) -> Vec<Diagnostic> {
    let mut job_types = crate::JobTypes::new();
    job_types
        .add("noop", &[])
        .add("sleep", &["duration".to_owned()])
        .add("shell-command", &["cmd".to_owned()]);
    let mut report = lint_str(Path::new("t.yaml"), yaml);
    report.check_job_types(&job_types);
    report.diagnostics
}

#[test]
fn an_unknown_job_type_is_an_error_at_its_line_with_the_near_miss() {
    let bad = "sequences:\n  s:\n    args:\n      required:\n        - name: duration\n    nodes:\n      a:\n        category: job\n        type: slep #!\n        args: [{expected: duration}]\n";
    let found = with_job_types(bad);
    assert_eq!(found.len(), 1, "{found:#?}");
    let hit = &found[0];
    assert_eq!((hit.code, hit.severity), ("job-type", Severity::Error));
    assert_eq!(hit.line, Some(marked_line(bad)));
    assert_eq!(hit.field.as_deref(), Some("type"));
    assert_eq!(
        hit.message,
        "unknown job type `slep` (did you mean `sleep`?); expected one of the job types this binary runs: `noop`, `shell-command`, `sleep`, or one a job program serves (`jobs:` in the config: docs/job-protocol.md)"
    );
    // Far from every known type: no guess.
    let found = with_job_types(&bad.replace("slep", "provision-db"));
    assert!(!found[0].message.contains("did you mean"), "{found:#?}");
    // Known types, sequences and the linter without job types: nothing.
    assert!(with_job_types(&bad.replace("slep", "sleep")).is_empty());
    assert!(lint(bad).is_empty());
}

/// A pool naming a type nothing runs holds nothing: an error at the type, with the near
/// miss (noticed in issue #34's review).
#[test]
fn a_pools_unknown_job_type_is_an_error_with_the_near_miss() {
    let specs = "pools:\n  ssh:\n    limit: 2\n    types: [shell-command, shel-command] #!\nsequences:\n  s:\n    nodes:\n      a:\n        category: job\n        type: noop\n";
    let found = with_job_types(specs);
    assert_eq!(found.len(), 1, "{found:#?}");
    let hit = &found[0];
    assert_eq!((hit.code, hit.severity), ("job-type", Severity::Error));
    assert_eq!(hit.line, Some(marked_line(specs)));
    assert_eq!(hit.field.as_deref(), Some("pools.ssh.types"));
    assert!(
        hit.message
            .starts_with("unknown job type `shel-command` (did you mean `shell-command`?)"),
        "{}",
        hit.message
    );
    assert!(with_job_types(&specs.replace(", shel-command", "")).is_empty());
}

#[test]
fn a_job_node_must_pass_the_job_args_its_type_requires() {
    let bad = "sequences:\n  s:\n    args:\n      required:\n        - name: ms\n    nodes:\n      a:\n        category: job\n        type: sleep\n        args: #!\n          - expected: ms\n";
    let found = with_job_types(bad);
    assert_eq!(found.len(), 1, "{found:#?}");
    let hit = &found[0];
    assert_eq!((hit.code, hit.line), ("job-args", Some(marked_line(bad))));
    assert!(
        hit.message.starts_with("job type `sleep` requires job arg `duration`, which this node does not pass; expected `- expected: duration`"),
        "{}",
        hit.message
    );
    // Passed under its name (given another arg), or as an `each` element: fine.
    let good = bad.replace(
        "- expected: ms",
        "- expected: duration\n            given: ms",
    );
    assert!(
        with_job_types(&good).is_empty(),
        "{:#?}",
        with_job_types(&good)
    );
    let each = "sequences:\n  s:\n    args:\n      required:\n        - name: waits\n    nodes:\n      a:\n        category: job\n        type: sleep\n        each: [waits:duration]\n";
    assert!(
        with_job_types(each).is_empty(),
        "{:#?}",
        with_job_types(each)
    );
}

/// Issue #16: `schedules:` are read and linted: cron expression, time zone, policies,
/// the request type and its args.
#[test]
fn schedules_are_read_and_linted() {
    let text = r#"sequences:
  backup:
    request: true
    args:
      required:
        - name: host
          desc: what to back up
      optional:
        - name: level
          default: full
    nodes:
      run:
        category: job
        type: noop
schedules:
  nightly:
    cron: "0 2 * * *"
    timezone: Europe/Berlin
    request: backup
    args: {host: db1}
    overlap: start
  every-second:
    cron: "* * * * * *"
    request: backup
    args: {host: db2, level: incremental}
    missed: start
  broken-cron:
    cron: "0 25 * * *"
    request: backup
    args: {host: db1}
  bad-zone:
    cron: "0 2 * * *"
    timezone: Mars/Olympus
    request: backup
    args: {host: db1}
  no-such-request:
    cron: "0 2 * * *"
    request: restore
  missing-arg:
    cron: "0 2 * * *"
    request: backup
    args: {colour: blue, hots: db1}
  bad-policy:
    cron: "0 2 * * *"
    request: backup
    args: {host: db1}
    overlap: sometimes
"#;
    let report = crate::lint_str(Path::new("specs.yaml"), text);
    let errors: Vec<(String, String)> = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| (d.field.clone().unwrap_or_default(), d.message.clone()))
        .collect();
    let has = |field: &str, words: &str| {
        assert!(
            errors.iter().any(|(f, m)| f == field && m.contains(words)),
            "no {field}: {words} in {errors:#?}"
        );
    };
    has(
        "schedules.broken-cron.cron",
        "schedule `broken-cron`: `cron`:",
    );
    has(
        "schedules.bad-zone.timezone",
        "unknown time zone \"Mars/Olympus\"",
    );
    has(
        "schedules.no-such-request.request",
        "`restore` is not a request type; expected one of: `backup`",
    );
    has("schedules.missing-arg.args", "requires `host`");
    has("schedules.missing-arg.args", "has no arg `colour`");
    has(
        "schedules.missing-arg.args",
        "has no arg `hots` (did you mean `host`?)",
    );
    has(
        "schedules.bad-policy.overlap",
        "\"sometimes\"; expected skip or start",
    );
    assert_eq!(errors.len(), 7, "{errors:#?}");
    let schedules = report.specs.schedules();
    assert_eq!(schedules.len(), 7);
    let nightly = schedules[0].fires().unwrap();
    assert_eq!(
        (nightly.overlap, nightly.missed),
        (
            crate::schedule::Overlap::Start,
            crate::schedule::Missed::Skip
        )
    );
    // 02:00 in Berlin in winter is 01:00 UTC.
    let after = chrono::DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
        .unwrap()
        .to_utc();
    assert_eq!(
        nightly.next(after).unwrap().to_rfc3339(),
        "2026-12-02T01:00:00+00:00"
    );
    let every = schedules[1].fires().unwrap();
    let until = after + chrono::Duration::seconds(3);
    assert_eq!(every.due(after, until).len(), 3);
    assert_eq!(every.args["level"], "incremental");
}

/// `--watch-specs` reads the files only when their fingerprint moves: it must move when a
/// spec file is changed, added or removed, and not otherwise.
#[test]
fn a_fingerprint_moves_with_the_spec_files_and_only_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().to_path_buf()];
    let spec = dir.path().join("a.yaml");
    std::fs::write(&spec, "sequences: {}\n").unwrap();
    let first = crate::fingerprint(&paths).unwrap();
    assert_eq!(
        crate::fingerprint(&paths).unwrap(),
        first,
        "nothing changed"
    );
    std::fs::write(dir.path().join("notes.txt"), "not a spec").unwrap();
    assert_eq!(
        crate::fingerprint(&paths).unwrap(),
        first,
        "not a spec file"
    );
    std::fs::create_dir(dir.path().join("more")).unwrap();
    let added = dir.path().join("more").join("b.yml");
    std::fs::write(&added, "sequences: {}\n").unwrap();
    let with_added = crate::fingerprint(&paths).unwrap();
    assert_ne!(with_added, first, "a file added in a subdirectory");
    std::fs::remove_file(&added).unwrap();
    assert_eq!(crate::fingerprint(&paths).unwrap(), first, "and removed");
    std::fs::write(&spec, "sequences: {}\n# changed\n").unwrap();
    assert_ne!(crate::fingerprint(&paths).unwrap(), first, "a file changed");
    assert!(crate::fingerprint(&[dir.path().join("missing")]).is_err());
}

/// A request type `failover` (required `cluster`) with the given `locks:` body, and a
/// second request type `drain` with `other` as its locks.
fn lock_spec(locks: &str, other: &str) -> String {
    format!(
        "sequences:
  failover:
    request: true
    args:
      required:
        - name: cluster
    locks:
{locks}
    nodes:
      a:
        category: job
        type: t
  drain:
    request: true
    args:
      required:
        - name: cluster
    locks:
{other}
    nodes:
      a:
        category: job
        type: t
"
    )
}

const GOOD_LOCK: &str =
    "      - name: cluster-ops\n        key: cluster\n        limit: 1\n        when_taken: queue";

#[test]
fn l1_to_l8_locks() {
    use Severity::Error;
    case(
        "L1",
        Error,
        &lock_spec("      - key: cluster #!", GOOD_LOCK),
        &lock_spec(GOOD_LOCK, GOOD_LOCK),
    );
    case(
        "L2",
        Error,
        &lock_spec(
            "      - name: cluster-ops\n        key: clustr #!",
            GOOD_LOCK,
        ),
        &lock_spec(GOOD_LOCK, GOOD_LOCK),
    );
    case(
        "L3",
        Error,
        &lock_spec("      - name: cluster-ops\n        limit: 0 #!", GOOD_LOCK),
        &lock_spec(GOOD_LOCK, GOOD_LOCK),
    );
    case(
        "L4",
        Error,
        &lock_spec(
            "      - name: cluster-ops\n        when_taken: wait #!",
            GOOD_LOCK,
        ),
        &lock_spec(
            "      - name: cluster-ops\n        when_taken: cancel-in-progress",
            GOOD_LOCK,
        ),
    );
    case(
        "L6",
        Error,
        &lock_spec(
            GOOD_LOCK,
            "      - name: cluster-ops\n        key: cluster\n        limit: 3 #!",
        ),
        // Without a limit, a lock is a mutex: the same limit as GOOD_LOCK's.
        &lock_spec(GOOD_LOCK, "      - name: cluster-ops\n        key: cluster"),
    );
    case(
        "L7",
        Error,
        &lock_spec(
            &format!("{GOOD_LOCK}\n      - name: cluster-ops #!"),
            GOOD_LOCK,
        ),
        &lock_spec(
            &format!("{GOOD_LOCK}\n      - name: api-quota\n        limit: 5"),
            GOOD_LOCK,
        ),
    );
    case(
        "L8",
        Error,
        &lock_spec(
            "      - name: cluster-ops\n        fair_by: team #!",
            GOOD_LOCK,
        ),
        &lock_spec(
            "      - name: cluster-ops\n        fair_by: user",
            GOOD_LOCK,
        ),
    );
    // A "did you mean" for a mistyped key and policy.
    let found = lint(&lock_spec(
        "      - name: cluster-ops\n        key: clustr\n        when_taken: skipp",
        GOOD_LOCK,
    ));
    let text: Vec<&str> = found.iter().map(|d| d.message.as_str()).collect();
    assert!(
        text.iter().any(|m| m.contains("(did you mean `cluster`?)"))
            && text.iter().any(|m| m.contains("(did you mean `skip`?)")),
        "{text:#?}"
    );
    // Locks on a sequence that is not a request type.
    let found = lint(
        "sequences:
  helper:
    args: {}
    locks:
      - name: x
    nodes:
      a:
        category: job
        type: t
",
    );
    assert!(found.iter().any(|d| d.code == "L5"), "{found:#?}");
    // An unknown field of a lock.
    let found = lint(&lock_spec(
        "      - name: cluster-ops\n        limt: 2",
        GOOD_LOCK,
    ));
    assert!(
        found
            .iter()
            .any(|d| d.message.contains("limt") && d.message.contains("did you mean `limit`")),
        "{found:#?}"
    );
}

// ---- issue #33: secret args ----

#[test]
fn s12_a_static_arg_is_not_secret_and_others_say_they_are() {
    case(
        "S12",
        Severity::Error,
        &seq_spec(
            "      static:\n        - name: key #!\n          default: abc\n          secret: true",
            "",
        ),
        &seq_spec(
            "      required:\n        - name: key\n          secret: true",
            "",
        ),
    );
    let report = lint_str(
        Path::new("t.yaml"),
        &seq_spec(
            "      required:\n        - name: key\n          secret: yes\n        - name: host",
            "",
        ),
    );
    let args: Vec<(String, bool)> = report.specs.sequences()[0]
        .args
        .all()
        .map(|(_, arg)| (arg.name().unwrap().to_owned(), arg.secret))
        .collect();
    assert_eq!(args, [("key".to_owned(), true), ("host".to_owned(), false)]);
}

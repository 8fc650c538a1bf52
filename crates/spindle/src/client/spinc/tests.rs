//! The client commands' own parsing, without a server.

use chrono::{TimeZone, Utc};

use super::show::filter_time;

/// Issue #12: `find since=`/`until=` take a time, a date or how long ago.
#[test]
fn filter_times_are_times_dates_or_durations_ago() {
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap();
    let at = |y, mo, d, h, mi, s| Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap();
    for (value, expected) in [
        ("2026-11-30 08:15:00 UTC", at(2026, 11, 30, 8, 15, 0)),
        ("2026-11-30 08:15:00", at(2026, 11, 30, 8, 15, 0)),
        ("2026-11-30T08:15:00+01:00", at(2026, 11, 30, 7, 15, 0)),
        ("2026-11-30", at(2026, 11, 30, 0, 0, 0)),
        ("1h", at(2026, 12, 1, 11, 0, 0)),
        ("90m", at(2026, 12, 1, 10, 30, 0)),
        ("2d", at(2026, 11, 29, 12, 0, 0)),
    ] {
        assert_eq!(filter_time(value, now), Some(expected), "{value}");
    }
    for bad in ["yesterday", "2026-13-01", "-1h", "d", "1x"] {
        assert_eq!(filter_time(bad, now), None, "{bad}");
    }
}

#[test]
fn the_documented_user_config_is_valid() {
    let text = include_str!("../../../../../docs/examples/spindle.yaml");
    let config: super::UserConfig = serde_saphyr::from_str(text).unwrap();
    assert_eq!(config.addr.as_deref(), Some("rm.example.com:32308"));
}

/// Issue #36: `watch`'s running jobs name their expansion element, so that the jobs of a
/// 50-host fan-out are told apart.
#[test]
fn running_jobs_name_their_expansion_element() {
    let job = |name: &str, host: Option<&str>, status: &str| proto::JobStatus {
        name: name.to_owned(),
        status: status.to_owned(),
        each: host
            .map(|host| {
                [("host".to_owned(), serde_json::json!(host))]
                    .into_iter()
                    .collect()
            })
            .unwrap_or_default(),
        ..proto::JobStatus::default()
    };
    let waiting = proto::JobStatus {
        job_type: "noop".to_owned(),
        ..job(
            "sequence_restart_begin",
            Some("web-39"),
            "waiting for lock host[web-39]",
        )
    };
    let line = super::running_line(&[
        job("drain", Some("web-37"), "sleeping 1.5s"),
        job("drain", Some("web-38"), ""),
        job("check", None, "running sh"),
        waiting,
    ]);
    // A sequence waiting for its locks is named by its node, not its begin job.
    assert_eq!(
        line,
        "drain [host=web-37]: sleeping 1.5s, drain [host=web-38], check: running sh, restart [host=web-39]: waiting for lock host[web-39]"
    );
}

/// Issue #47: `find` shows a schedule's runs by the schedule (the time is CREATED's),
/// not cut to `schedul..:45:00Z`.
#[test]
fn a_schedules_runs_are_shown_by_the_schedule() {
    assert_eq!(
        super::caller("schedule:nightly-backup@2026-12-04T10:45:00Z"),
        "schedule:nightly-backup"
    );
    assert_eq!(super::caller("ann"), "ann");
    assert_eq!(super::caller("schedule:odd"), "schedule:odd");
    let columns = super::request_columns(Some((
        "dc9s6e2jueqtlcrisq1g",
        "backup",
        "schedule:nightly@2026-12-04T10:45:00Z",
        proto::State::Complete,
    )));
    assert!(columns.contains("schedule:nightly "), "{columns}");
}

//! Why a request failed, in a few lines: each job whose last try failed, with that try's
//! error and exit code and the end of its stderr, and the command that shows the rest.

use std::collections::BTreeMap;

use proto::{JobLog, State};

/// Lines of a failed try's stderr shown.
const STDERR_LINES: usize = 5;
/// Failed jobs shown; the rest are counted.
const JOBS_SHOWN: usize = 5;

/// The last try of each job whose last try did not succeed (FAIL or UNKNOWN), in the
/// order they ended.
pub(crate) fn failed_jobs(job_log: &[JobLog]) -> Vec<&JobLog> {
    let mut last: BTreeMap<&str, &JobLog> = BTreeMap::new();
    for entry in job_log {
        let newer = last
            .get(entry.job_id.as_str())
            .is_none_or(|seen| entry.r#try > seen.r#try);
        if newer {
            last.insert(&entry.job_id, entry);
        }
    }
    let mut failed: Vec<&JobLog> = last
        .into_values()
        .filter(|entry| matches!(entry.state, State::Fail | State::Unknown))
        .collect();
    failed.sort_by_key(|entry| (entry.finished_at, entry.job_id.clone()));
    failed
}

/// Where the whole job log can be read: the commands the explanation points to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WholeLog<'a> {
    /// From the Request Manager this command talks to: `spindle log`.
    Server,
    /// From the database `spindle run` stored it in, once a server serves it.
    Stored {
        specs: &'a std::path::Path,
        database: &'a str,
        /// The config file whose job programs the run had: the server needs them too.
        config: Option<&'a std::path::Path>,
    },
}

impl WholeLog<'_> {
    /// The command(s) that print the log of `request_id` (of one job, or all).
    fn command(self, request_id: &str, job_id: Option<&str>) -> String {
        let job = job_id.map(|id| format!(" --job {id}")).unwrap_or_default();
        match self {
            WholeLog::Server => format!("spindle log {request_id}{job}"),
            WholeLog::Stored {
                specs,
                database,
                config,
            } => format!(
                "spindle server {}--specs {} --database {}, then spindle log {request_id}{job}",
                config
                    .map(|config| format!("--config {} ", config.display()))
                    .unwrap_or_default(),
                specs.display(),
                store::redacted(database)
            ),
        }
    }
}

/// The explanation of a failed request, one line per item, ending with a newline; empty
/// when no job failed (a request can fail before any job ran).
///
/// With the request's chain, each job is named with its expansion element (`[host=web-37]`),
/// which tells the iterations of a fan-out apart.
pub(crate) fn explain(
    request_id: &str,
    job_log: &[JobLog],
    chain: Option<&proto::JobChain>,
    whole: WholeLog<'_>,
) -> String {
    let failed = failed_jobs(job_log);
    let mut text = String::new();
    for entry in failed.iter().take(JOBS_SHOWN) {
        let each = chain
            .and_then(|chain| chain.jobs.get(&entry.job_id))
            .map(|job| crate::client::spinc::each_text(&job.each))
            .filter(|each| !each.is_empty())
            .map(|each| format!(" [{each}]"))
            .unwrap_or_default();
        let error = if entry.error.is_empty() {
            "no error message".to_owned()
        } else {
            entry.error.trim_end().to_owned()
        };
        text.push_str(&format!(
            "job `{}`{each} ({}, id {}) failed on try {} with exit {}: {error}\n",
            entry.name, entry.job_type, entry.job_id, entry.r#try, entry.exit
        ));
        let lines: Vec<&str> = entry.stderr.trim_end().lines().collect();
        if !lines.is_empty() {
            let from = lines.len().saturating_sub(STDERR_LINES);
            let what = if from > 0 {
                format!("last {STDERR_LINES} lines of stderr")
            } else {
                "stderr".to_owned()
            };
            text.push_str(&format!("  {what}:\n"));
            for line in &lines[from..] {
                text.push_str(&format!("  | {line}\n"));
            }
        }
        text.push_str(&format!(
            "  the whole log: {}\n",
            whole.command(request_id, Some(&entry.job_id))
        ));
    }
    if failed.len() > JOBS_SHOWN {
        text.push_str(&format!(
            "and {} more failed jobs: {}\n",
            failed.len() - JOBS_SHOWN,
            whole.command(request_id, None)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use proto::{JobLog, State};

    fn entry(job_id: &str, try_no: u32, state: State, stderr: &str) -> JobLog {
        JobLog {
            request_id: "r1".to_owned(),
            job_id: job_id.to_owned(),
            r#try: try_no,
            name: format!("job-{job_id}"),
            job_type: "shell-command".to_owned(),
            finished_at: i64::from(try_no),
            state,
            exit: if state == State::Complete { 0 } else { 3 },
            error: if state == State::Complete {
                String::new()
            } else {
                "exit status 3".to_owned()
            },
            stderr: stderr.to_owned(),
            ..JobLog::default()
        }
    }

    /// Issue #12: a failure names the jobs whose last try failed, with the end of stderr;
    /// a job that failed and then succeeded is not among them.
    #[test]
    fn a_failure_names_its_jobs_with_the_end_of_their_stderr() {
        let log = [
            entry("aaaa", 1, State::Fail, "flaky"),
            entry("aaaa", 2, State::Complete, ""),
            entry("bbbb", 1, State::Fail, "1\n2\n3\n4\n5\n6\n7\n"),
        ];
        insta::assert_snapshot!(super::explain("r1", &log, None, super::WholeLog::Server), @r"
        job `job-bbbb` (shell-command, id bbbb) failed on try 1 with exit 3: exit status 3
          last 5 lines of stderr:
          | 3
          | 4
          | 5
          | 6
          | 7
          the whole log: spindle log r1 --job bbbb
        ");
        assert_eq!(
            super::explain("r1", &log[..2], None, super::WholeLog::Server),
            ""
        );
        // Issue #36: with the chain, the job is named with its expansion element.
        let mut chain = proto::JobChain::default();
        chain.jobs.insert(
            "bbbb".to_owned(),
            proto::Job {
                each: [("host".to_owned(), serde_json::json!("web-37"))]
                    .into_iter()
                    .collect(),
                ..proto::Job::default()
            },
        );
        assert!(
            super::explain("r1", &log, Some(&chain), super::WholeLog::Server)
                .starts_with("job `job-bbbb` [host=web-37] (shell-command, id bbbb) failed"),
        );
        // `spindle run` has no server: its hint starts one on the run's database.
        let stored = super::WholeLog::Stored {
            specs: std::path::Path::new("specs"),
            database: "postgres://ann:secret@db/spindle",
            config: None,
        };
        assert!(
            super::explain("r1", &log, None, stored).contains(
                "the whole log: spindle server --specs specs --database postgres://ann:****@db/spindle, then spindle log r1 --job bbbb\n"
            ),
            "the password is not shown"
        );
        // With the run's config (its job programs), the server gets it too (issue #47).
        let configured = super::WholeLog::Stored {
            specs: std::path::Path::new("specs"),
            database: "sqlite://s.db",
            config: Some(std::path::Path::new("jobs.yaml")),
        };
        assert!(
            super::explain("r1", &log, None, configured).contains(
                "the whole log: spindle server --config jobs.yaml --specs specs --database sqlite://s.db, then"
            )
        );
    }
}

//! Acting on a request: approve or reject, retry, rerun, pause and resume, stop.

use super::*;

/// `approve`/`reject <id> [job] [--comment TEXT]`.
#[derive(Debug, clap::Args)]
pub(crate) struct AnswerArgs {
    /// The request
    id: String,
    /// The approval job: its id or name (default: the one that waits)
    job: Option<String>,
    /// Kept with the answer, and shown in the job's log entry
    #[arg(long)]
    comment: Option<String>,
}

pub(crate) async fn answer(
    args: &ClientArgs,
    answer: &AnswerArgs,
    approved: bool,
) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client
        .answer(
            &answer.id,
            answer.job.as_deref(),
            answer.comment.as_deref(),
            approved,
        )
        .await
    {
        Ok(()) => {
            out!(
                "OK, {} {}{}",
                if approved { "approved" } else { "rejected" },
                answer.id,
                answer
                    .job
                    .as_deref()
                    .map(|job| format!(" ({job})"))
                    .unwrap_or_default()
            );
            Ok(Exit::Success)
        }
        Err(err) => Ok(fail_or_usage(&err)),
    }
}

/// `retry <id> [--from JOB]`: the same request runs again.
/// What `retry` runs again besides the jobs that did not complete.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct RetryArgs {
    /// Run this job (an id, or the name of one job) and every job after it again too
    /// (a COMPLETE request can be retried from a job)
    #[arg(long, conflicts_with = "all")]
    pub(crate) from: Option<String>,
    /// Run the failed elements of the request's `each:` nodes again, the completed ones
    /// staying completed (a COMPLETE request's too)
    #[arg(long, conflicts_with_all = ["all", "elements"])]
    pub(crate) failed_elements: bool,
    /// Run these elements (by name, separated by commas, as `spindle elements` lists
    /// them) again, completed or not
    #[arg(long, conflicts_with = "all")]
    pub(crate) elements: Option<String>,
}

pub(crate) async fn retry(args: &ClientArgs, id: &str, part: &RetryArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.retry(id, part).await {
        Ok(()) => {
            match (&part.from, part.failed_elements, &part.elements) {
                (Some(job), ..) => out!("OK, retrying {id} from {job}"),
                (None, true, _) => out!("OK, retrying {id}: its failed elements run again"),
                (None, false, Some(names)) => out!("OK, retrying {id}: elements {names} run again"),
                (None, false, None) => {
                    out!("OK, retrying {id}: its failed, stopped and unrun jobs run again")
                }
            }
            eprintln_line(&format!("\n  spindle watch {id}\n"))?;
            Ok(Exit::Success)
        }
        Err(err) => Ok(fail_or_usage(&err)),
    }
}

/// `rerun <id>`: a new request of the same type with the args the first was given.
pub(crate) async fn rerun(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let first = match client.request(id).await {
        Ok(request) => request,
        Err(err) => return Ok(fail(&err)),
    };
    let given = first
        .args
        .iter()
        .filter(|arg| arg.given && arg.arg_type != RequestArgType::Static)
        .map(|arg| (arg.name.clone(), arg.value.clone()))
        .collect();
    let create_request = CreateRequest {
        request_type: first.request_type.clone(),
        args: given,
        user: crate::client::api::caller(),
        priority: None,
        idempotency_key: Some(crate::client::api::idempotency_key()),
    };
    let request = match client.create(&create_request).await {
        Ok(request) => request,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output() == Output::Json {
        print_json(&request)?;
    } else {
        out!(
            "OK, started {} request {} (a rerun of {id})",
            first.request_type,
            request.id
        );
        eprintln_line(&format!("\n  spindle status {}\n", request.id))?;
    }
    Ok(Exit::Success)
}

/// `pause <id>` (`paused`) and `resume <id>`.
pub(crate) async fn pause(args: &ClientArgs, id: &str, paused: bool) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.pause(id, paused).await {
        Ok(()) if paused => {
            out!(
                "OK, paused {id}: running jobs finish, nothing new starts until `spindle resume {id}`"
            );
            Ok(Exit::Success)
        }
        Ok(()) => {
            out!("OK, resumed {id}");
            Ok(Exit::Success)
        }
        Err(err) => Ok(fail(&err)),
    }
}

pub(crate) async fn stop(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.stop(id).await {
        Ok(()) => {
            out!("OK, stopped {id}");
            Ok(Exit::Success)
        }
        Err(err) => Ok(fail(&err)),
    }
}

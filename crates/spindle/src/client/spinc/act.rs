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
pub(crate) async fn retry(args: &ClientArgs, id: &str, from: Option<&str>) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.retry(id, from).await {
        Ok(()) => {
            match from {
                Some(job) => out!("OK, retrying {id} from {job}"),
                None => out!("OK, retrying {id}: its failed, stopped and unrun jobs run again"),
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

//! Reading requests: status, info, ps, running, find, and the schedules.

use super::*;

pub(crate) async fn status(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let request = match client.request(id).await {
        Ok(request) => request,
        Err(err) => return Ok(fail(&err)),
    };
    if args.output() == Output::Json {
        print_json(&Request {
            job_chain: None,
            ..request
        })?;
        return Ok(Exit::Success);
    }
    let run = match (request.started_at, request.finished_at) {
        (None, _) => "not started".to_owned(),
        (Some(started), None) => runtime(Utc::now() - started),
        (Some(started), Some(finished)) => runtime(finished - started),
    };
    // Every arg the caller gave (optional ones too), not the defaults.
    let required: Vec<String> = request
        .args
        .iter()
        .filter(|a| a.arg_type == RequestArgType::Required || a.given)
        .map(|a| arg_pair(&a.name, &a.value))
        .collect();
    out!(
        "   state: {}\nprogress: {}\n runtime: {run}\n request: {}\n  caller: {}\n    args: {}",
        request_state(&request),
        progress(&request),
        request.request_type,
        request.user,
        required.join(" ")
    );
    // Why a PENDING or SUSPENDED request waits (a runner that refused the credentials,
    // job types no runner has).
    if matches!(request.state, State::Pending | State::Suspended) && !request.error.is_empty() {
        out!("\n  {}", request.error);
    }
    // What runs now, with each job's status line: a waiting approval says so.
    if request.state == State::Running
        && let Ok(running) = client.running(Some(&request.id)).await
        && !running.jobs.is_empty()
    {
        out!(" running: {}", super::running_line(&running.jobs));
    }
    print_elements(&request)?;
    print_failure(&client, &request).await?;
    Ok(Exit::Success)
}

/// Each `each:` node's elements, with the failed ones named (issue #50).
fn print_elements(request: &Request) -> anyhow::Result<()> {
    for (at, summary) in request.elements.iter().enumerate() {
        let label = if at == 0 { "elements" } else { "" };
        out!("{label:>8}: {}", summary.line());
    }
    Ok(())
}

/// For a failed request, which jobs failed and why (issue #12), after what was printed.
async fn print_failure(client: &Client, request: &Request) -> anyhow::Result<()> {
    if request.state != State::Fail {
        return Ok(());
    }
    if !request.error.is_empty() {
        out!("\n  reason: {}", request.error);
    }
    if let Ok(job_log) = client.job_log(&request.id).await {
        let chain = client.job_chain(&request.id).await.ok();
        let whole = crate::client::explain::WholeLog::Server;
        let text = crate::client::explain::explain(&request.id, &job_log, chain.as_ref(), whole);
        if !text.is_empty() {
            out!("\n{}", text.trim_end());
        }
    }
    Ok(())
}

pub(crate) async fn info(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    // The JSON is everything, the chain included, as Spin Cycle's was.
    let read = if args.output() == Output::Json {
        client.request_with_chain(id).await
    } else {
        client.request(id).await
    };
    let request = text_of!(args, read);
    let ago = |t: Option<DateTime<Utc>>| {
        t.map_or_else(String::new, |t| {
            format!("{} ({} ago)", time(Some(t)), runtime(Utc::now() - t))
        })
    };
    let args_text: Vec<String> = request
        .args
        .iter()
        .filter(|a| a.arg_type != RequestArgType::Static)
        .map(|a| arg_pair(&a.name, &a.value))
        .collect();
    let (complete, all) = super::job_counts(&request);
    out!(
        "      id: {}\n request: {}\n  caller: {}\n created: {}\n started: {}\nfinished: {}\n   state: {}\n    host: {}\n    jobs: {} ({} complete)\n    args: {}",
        request.id,
        request.request_type,
        request.user,
        ago(Some(request.created_at)),
        ago(request.started_at),
        ago(request.finished_at),
        request_state(&request),
        request.jr_url,
        all,
        complete,
        args_text.join(" ")
    );
    // Why a PENDING or SUSPENDED request waits, as `status` says.
    if matches!(request.state, State::Pending | State::Suspended) && !request.error.is_empty() {
        out!("   waits: {}", request.error);
    }
    if !request.spec_version.is_empty() {
        out!(
            "   specs: {} (spindle's GET /api/v1/requests/{}/spec has their text)",
            request.spec_version,
            request.id
        );
    }
    // Spindle's audit trail; Spin Cycle's Request Manager has none (404): nothing shown.
    if let Ok(trail) = client.audit(&request.id).await
        && !trail.is_empty()
    {
        out!("   audit:");
        for event in trail {
            let user = if event.user.is_empty() {
                "(unnamed)"
            } else {
                event.user.as_str()
            };
            let from = if event.address.is_empty() {
                String::new()
            } else {
                format!(" from {}", event.address)
            };
            out!(
                "          {} {} by {user}{from}",
                time(Some(event.at)),
                event.action
            );
        }
    }
    print_failure(&client, &request).await?;
    Ok(Exit::Success)
}

/// `ps [id]`: running jobs with their live status line.
pub(crate) async fn ps(args: &ClientArgs, id: Option<&str>) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let status = text_of!(args, client.running(id).await);
    if status.jobs.is_empty() {
        return Ok(Exit::Success);
    }
    // The EACH column (an expansion's element, such as host=db2) only when a job has one,
    // as wide as its widest value: the value tells iterations apart, so it is never cut.
    let each_width = status
        .jobs
        .iter()
        .map(|job| each_text(&job.each).chars().count())
        .max()
        .unwrap_or(0);
    let each_column = |text: &str| {
        if each_width > 0 {
            format!(" {text:<width$}", width = each_width.max(4))
        } else {
            String::new()
        }
    };
    out!(
        "{:<20} {:<20} {:>4}  {:<9} {:<8} {:>3} {:<5} {:<22}{} STATUS",
        "REQUEST",
        "ID",
        "PRG",
        "USER",
        "JOB TIME",
        "TRY",
        "JOBID",
        "JOB",
        each_column("EACH")
    );
    let now = Utc::now();
    for job in &status.jobs {
        let (request_type, id, prg, user) = match status.requests.get(&job.request_id) {
            Some(request) => (
                squeeze(&request.request_type, 20),
                request.id.clone(),
                progress(request),
                squeeze(&request.user, 9),
            ),
            None => (
                "unknown".to_owned(),
                String::new(),
                "0".to_owned(),
                String::new(),
            ),
        };
        let started = DateTime::from_timestamp_nanos(job.started_at);
        out!(
            "{:<20} {:<20} {:>4}  {:<9} {:<8} {:>3} {:<5} {:<22}{} {}",
            request_type,
            id,
            prg,
            user,
            runtime(now - started),
            job.r#try,
            job.job_id,
            squeeze(super::running_name(job), 22),
            each_column(&each_text(&job.each)),
            job.status
        );
    }
    // Under the jobs, each request's expansions with failed elements (issue #50).
    for (id, request) in &status.requests {
        for summary in request.elements.iter().filter(|s| s.failed > 0) {
            out!("{id}  {}", summary.line());
        }
    }
    Ok(Exit::Success)
}

/// `running <id>`: exit 0 while PENDING, RUNNING or SUSPENDED, else 1; prints nothing.
pub(crate) async fn running(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    match client.request(id).await {
        Ok(request)
            if matches!(
                request.state,
                State::Pending | State::Running | State::Suspended
            ) =>
        {
            Ok(Exit::Success)
        }
        Ok(_) => Ok(Exit::Failure),
        Err(err) => Ok(fail(&err)),
    }
}

/// After a PENDING request's row in `find`: what it waits for, to the first comma
/// (`  waiting for lock cluster-ops[db-7]`; `status` has the whole reason).
fn waits(request: &Request) -> String {
    if request.state != State::Pending || request.error.is_empty() {
        return String::new();
    }
    let short = request.error.split(", ").next().unwrap_or_default();
    format!("  {short}")
}

/// `schedules`: each schedule with its next and last runs.
pub(crate) async fn schedules(args: &ClientArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let schedules = text_of!(args, client.schedules().await);
    if schedules.is_empty() {
        super::eprintln_line("no schedules (a spec's `schedules:` adds them)")?;
        return Ok(Exit::Success);
    }
    out!(
        "{:<20} {:<16} {:<14} {:<16} {:<20} LAST",
        "NAME",
        "CRON",
        "TIMEZONE",
        "REQUEST",
        "NEXT"
    );
    for schedule in &schedules {
        let last = match &schedule.last {
            None => "never".to_owned(),
            Some(run) if !run.request_id.is_empty() => {
                format!("{} {}", time(Some(run.due_at)), run.request_id)
            }
            Some(run) if !run.skipped.is_empty() => {
                format!("{} skipped: {}", time(Some(run.due_at)), run.skipped)
            }
            Some(run) => format!("{} starting", time(Some(run.due_at))),
        };
        out!(
            "{:<20} {:<16} {:<14} {:<16} {:<20} {last}",
            squeeze(&schedule.name, 20),
            squeeze(&schedule.cron, 16),
            squeeze(&schedule.timezone, 14),
            squeeze(&schedule.request, 16),
            schedule
                .next
                .map(|next| time(Some(next)))
                .unwrap_or_else(|| "never".to_owned())
        );
    }
    Ok(Exit::Success)
}

/// A `since=`/`until=` value: a time (`YYYY-MM-DD HH:MM:SS UTC` or RFC 3339), a date
/// (its start, UTC), or how long before `now` (a Go duration, or whole days: `2d`).
pub(super) fn filter_time(value: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if let Ok(time) =
        chrono::NaiveDateTime::parse_from_str(value.trim_end_matches(" UTC"), "%Y-%m-%d %H:%M:%S")
    {
        return Some(time.and_utc());
    }
    if let Ok(time) = DateTime::parse_from_rfc3339(value) {
        return Some(time.with_timezone(&Utc));
    }
    if let Ok(date) = chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Some(date.and_hms_opt(0, 0, 0)?.and_utc());
    }
    let ago = match value.strip_suffix('d') {
        Some(days) => chrono::Duration::days(days.parse().ok()?),
        None => chrono::Duration::from_std(proto::duration::parse(value).ok()?).ok()?,
    };
    now.checked_sub_signed(ago)
}

/// Reads `find` filters (`type=`, `states=`, `user=`, `args=`, `since=`, `until=`,
/// `limit=`, `offset=`); `limit` is `default_limit` unless given (0: no limit).
pub(super) fn find_filter(words: &[String], default_limit: u64) -> anyhow::Result<RequestFilter> {
    let mut filter = RequestFilter {
        limit: default_limit,
        ..RequestFilter::default()
    };
    let mut seen = std::collections::HashSet::new();
    for word in words {
        let Some((name, value)) = word.split_once('=') else {
            anyhow::bail!(
                "invalid filter {word:?}; expected filter=value (type, states, user, args, since, until, limit, offset)"
            );
        };
        if !seen.insert(name.to_owned()) {
            anyhow::bail!("filter '{name}' given more than once");
        }
        let time = |value: &str| -> anyhow::Result<DateTime<Utc>> {
            filter_time(value, Utc::now()).ok_or_else(|| {
                anyhow::anyhow!(
                    "invalid time {value:?}; expected a time ('YYYY-MM-DD HH:MM:SS UTC', RFC 3339), a date (YYYY-MM-DD, its start in UTC) or how long ago (1h, 30m, 2d)"
                )
            })
        };
        match name {
            "type" => filter.request_type = Some(value.to_owned()),
            "user" => filter.user = Some(value.to_owned()),
            "states" | "state" => {
                for state in value.split(',') {
                    let state = state.trim().to_ascii_uppercase();
                    filter.states.push(
                        state
                            .parse()
                            .map_err(|err| anyhow::anyhow!("invalid state: {err}"))?,
                    );
                }
            }
            "args" | "arg" => {
                for pair in value.split(',') {
                    let Some((key, arg_value)) = pair.split_once('=') else {
                        anyhow::bail!(
                            "invalid request arg {pair:?}; expected args=key1=value1,key2=value2"
                        );
                    };
                    filter.args.insert(key.to_owned(), arg_value.to_owned());
                }
            }
            "since" => filter.since = Some(time(value)?),
            "until" => filter.until = Some(time(value)?),
            "limit" => {
                filter.limit = value.parse().map_err(|_| {
                    anyhow::anyhow!("invalid limit {value:?}; expected a number >= 0")
                })?
            }
            "offset" => {
                filter.offset = value.parse().map_err(|_| {
                    anyhow::anyhow!("invalid offset {value:?}; expected a number >= 0")
                })?
            }
            other => anyhow::bail!(
                "unknown filter '{other}'; expected one of type, states, user, args, since, until, limit, offset"
            ),
        }
    }
    Ok(filter)
}

pub(crate) async fn find(args: &ClientArgs, words: &[String]) -> anyhow::Result<Exit> {
    let filter = find_filter(words, 10)?;
    let client = args.client()?;
    // One more than shown, to know whether more match.
    let mut asked = filter.clone();
    if filter.limit > 0 {
        asked.limit = filter.limit.saturating_add(1);
    }
    let mut requests = match client.find(&asked).await {
        Ok(requests) => requests,
        Err(err) => return Ok(fail(&err)),
    };
    let more = filter.limit > 0 && requests.len() as u64 > filter.limit;
    if more {
        requests.truncate(usize::try_from(filter.limit).unwrap_or(usize::MAX));
    }
    if args.output() == Output::Json {
        print_json(&requests)?;
        return Ok(Exit::Success);
    }
    if requests.is_empty() {
        super::eprintln_line("no requests match")?;
        return Ok(Exit::Success);
    }
    out!(
        "{} {:<23} {:<23} {:<23} JOBS",
        super::request_columns(None),
        "CREATED",
        "STARTED",
        "FINISHED"
    );
    for request in &requests {
        let (complete, all) = super::job_counts(request);
        out!(
            "{} {:<23} {:<23} {:<23} {complete} / {all}{}",
            super::request_columns(Some((
                &request.id,
                &request.request_type,
                &request.user,
                request.state
            ))),
            time(Some(request.created_at)),
            time(request.started_at),
            time(request.finished_at),
            waits(request)
        );
    }
    if more {
        super::eprintln_line(&format!(
            "more requests match: the next with offset={}, all with limit=0",
            filter.offset + filter.limit
        ))?;
    }
    Ok(Exit::Success)
}

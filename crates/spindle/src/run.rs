//! `spindle run`: the one-command way to run a request — embedded store, Request Manager
//! and Job Runner in this process, a live progress bar on stderr, Ctrl-C stops the
//! request cleanly.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use job::Registry;
use proto::{CreateRequest, State};

use crate::args::parse_request_args;
use crate::client::spinc::Output;
use crate::exit::Exit;
use crate::exit::eprintln_failure;
use crate::service::lint::load_specs;
use crate::service::local::local;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RunArgs {
    /// Directory (or file) of request specs
    #[arg(long, env = "SPINDLE_SPECS", default_value = "specs")]
    specs: PathBuf,
    /// Database: sqlite://PATH, postgres://USER@HOST:PORT/DATABASE or
    /// mysql://USER:PASSWORD@HOST:PORT/DATABASE
    #[arg(long, env = "SPINDLE_DATABASE", default_value = "sqlite://spindle.db")]
    database: String,
    /// A config file (the servers' own) whose job programs (`jobs:`) serve job types
    /// besides this binary's; its other settings are the servers'
    #[arg(long, env = "SPINDLE_CONFIG")]
    config: Option<PathBuf>,
    /// The request type to run
    request: String,
    /// Request args as name=value; a value that is a JSON list or object is passed as that
    /// value; name=@FILE reads it from a file (one value a line, or a JSON list; @- for
    /// standard input, @@ for a value that begins with @)
    args: Vec<String>,
    /// What to print at the end: the request id and final state, or (json) the final
    /// request and its job log [default: human]
    #[arg(long, value_enum)]
    pub(crate) output: Option<Output>,
}

/// How many running jobs the progress line names.
const RUNNING_SHOWN: usize = 5;

/// The progress line's running jobs: the oldest few, then how many more run.
fn running_summary(shown: &[proto::JobStatus], running: usize) -> String {
    let line = crate::client::spinc::running_line(shown);
    match running.saturating_sub(shown.len()) {
        0 => line,
        more => format!("{line} and {more} more"),
    }
}

/// `output`: the request id and final state, or (JSON) the final request and its job log.
pub(crate) async fn run(
    args: &RunArgs,
    registry: Registry,
    output: Output,
) -> anyhow::Result<Exit> {
    let request_args = parse_request_args(&args.args)?;
    let registry = crate::service::programs::with_config(registry, args.config.as_deref())?;
    // The specs are read and linted on a blocking thread while the store opens (and a new
    // database is migrated): on two cores the two overlap.
    let loading = tokio::task::spawn_blocking({
        let (path, registry) = (args.specs.clone(), registry.clone());
        move || load_specs(&path, Some(&registry))
    });
    let (loaded, opened) = tokio::join!(loading, store::open(&args.database));
    let Some(specs) = loaded?? else {
        eprintln_failure(&format!(
            "the specs in {} have errors; fix them first",
            args.specs.display()
        ));
        // As `lint`, `server` and `rm` end on the same specs.
        return Ok(Exit::Failure);
    };
    let local = local(
        specs,
        registry,
        crate::service::local::LocalSettings {
            store: opened?,
            base_url: "in-process://spindle-run",
            host: crate::service::manager_host("spindle-run"),
            interval: Duration::from_secs(1),
            suspended_ttl: Duration::from_secs(3600),
            lease: Duration::from_secs(10),
            telemetry: telemetry::Telemetry::default(),
            // In-process, by whoever runs the command: no HTTP to guard.
            auth: None,
            retention: None,
            // One request, from its own caller.
            max_backlog: None,
        },
    )
    .await?;
    // The runner in this process holds a lease like any other, so that a server on the
    // same database resumes this request if this process is killed.
    crate::service::reap_dead_local_runners(&local.manager, &local.runner.instance()).await;
    let stop_lease = tokio_util::sync::CancellationToken::new();
    let lease = tokio::spawn(jr::lease::hold(
        local.runner.clone(),
        Arc::new(crate::service::local::ManagerRegistry(
            local.manager.clone(),
        )),
        crate::service::lease_settings(Duration::from_secs(10)),
        stop_lease.clone(),
    ));
    local.runner.registered().await;
    let user = crate::client::api::caller();
    let create_request = CreateRequest {
        request_type: args.request.clone(),
        args: request_args,
        user: user.clone(),
        priority: None,
        idempotency_key: None,
    };
    let request = match local.manager.create(create_request, &user, "").await {
        Ok(request) => request,
        Err(rm::Error::BadRequest(message)) => {
            eprintln_failure(&message);
            return Ok(Exit::Usage);
        }
        Err(err) => return Err(err.into()),
    };
    let final_request = follow(&local, &request).await?;
    stop_lease.cancel();
    let _ = lease.await;
    print_end(&local, &final_request, output, args).await?;
    Ok(match final_request.state {
        State::Complete => Exit::Success,
        State::Stopped => Exit::Interrupted,
        _ => Exit::Failure,
    })
}

/// Shows the request's progress on a bar until it ends (Ctrl-C stops it); its end.
async fn follow(
    local: &crate::service::local::Local,
    request: &proto::Request,
) -> anyhow::Result<proto::Request> {
    let (_, all) = crate::client::spinc::job_counts(request);
    let bar = ProgressBar::new(all);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} jobs  {wide_msg}",
        )
        .expect("the template is valid"),
    );
    bar.println(format!("request {} ({})", request.id, request.request_type));
    let mut interrupted = false;
    // The own jobs complete are counted from the job log: once a second, for a bar shown.
    let mut counted = std::time::Instant::now();
    let final_request = loop {
        let mut current = local.manager.get(&request.id, false).await?;
        if current.state.is_finished() {
            local.manager.count_own_finished(&mut current).await?;
            break current;
        }
        if !bar.is_hidden() && counted.elapsed() >= Duration::from_secs(1) {
            counted = std::time::Instant::now();
            local.manager.count_own_finished(&mut current).await?;
            bar.set_position(crate::client::spinc::job_counts(&current).0);
        }
        // The line shows a few of the running jobs: describing every one of a large
        // fan-out's at each tick would cost more than running them.
        let (running, n_running) = local
            .runner
            .running_first(&request.id, RUNNING_SHOWN)
            .await
            .unwrap_or_default();
        bar.set_message(running_summary(&running, n_running));
        // Woken when the chain ends (its final state stored by then), else every 100 ms
        // for the progress bar. No chain here: it ended just now (read again soon) or
        // has not begun.
        let chain = local.runner.chain(&request.id);
        let ended = async {
            match &chain {
                Some(chain) => {
                    chain.wait().await;
                }
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = ended => {}
            _ = tokio::signal::ctrl_c(), if !interrupted => {
                interrupted = true;
                bar.println("stopping the request (Ctrl-C again waits for it)");
                if let Err(err) = local.manager.stop(&proto::RequestId::new(request.id.clone())).await {
                    bar.println(format!("stop: {err}"));
                }
            }
        }
    };
    // Cleared, so that no status line is left behind on a terminal.
    bar.finish_and_clear();
    Ok(final_request)
}

/// What `spindle run` prints at the end: the request id and final state (and why it
/// failed), or (JSON) the final request and its job log.
async fn print_end(
    local: &crate::service::local::Local,
    final_request: &proto::Request,
    output: Output,
    args: &RunArgs,
) -> anyhow::Result<()> {
    let mut stdout = anstream::stdout().lock();
    match output {
        Output::Human => {
            writeln!(stdout, "{} {}", final_request.id, final_request.state)?;
            // The data line first, whole, before the messages on stderr.
            stdout.flush()?;
            if final_request.state == State::Fail {
                let job_log = local.manager.job_log(&final_request.id).await?;
                let whole = crate::client::explain::WholeLog::Stored {
                    specs: &args.specs,
                    database: &args.database,
                    config: args.config.as_deref(),
                };
                let chain = local.manager.job_chain(&final_request.id).await.ok();
                let explained = crate::client::explain::explain(
                    &final_request.id,
                    &job_log,
                    chain.as_ref(),
                    whole,
                );
                crate::client::spinc::eprint_block(&explained)?;
            }
            let took = match (final_request.started_at, final_request.finished_at) {
                (Some(started), Some(finished)) => (finished - started)
                    .to_std()
                    .map_or_else(|_| "0s".to_owned(), proto::duration::format),
                _ => "0s".to_owned(),
            };
            let (complete, all) = crate::client::spinc::job_counts(final_request);
            crate::client::spinc::eprint_block(&format!(
                "{}: {complete} of {all} {} complete in {took}\n",
                final_request.state,
                if all == 1 { "job" } else { "jobs" }
            ))?;
        }
        Output::Json => {
            let request = local.manager.get(&final_request.id, true).await?;
            let job_log = local.manager.job_log(&final_request.id).await?;
            let document = serde_json::json!({"request": request, "jobLog": job_log});
            serde_json::to_writer_pretty(&mut stdout, &document)?;
            writeln!(stdout)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::running_summary;

    fn job(name: &str, status: &str) -> proto::JobStatus {
        proto::JobStatus {
            name: name.to_owned(),
            status: status.to_owned(),
            ..proto::JobStatus::default()
        }
    }

    #[test]
    fn the_progress_line_names_a_few_running_jobs_and_counts_the_rest() {
        let shown = [job("a", ""), job("b", "copying")];
        assert_eq!(running_summary(&shown, 2), "a, b: copying");
        assert_eq!(
            running_summary(&shown, 100_002),
            "a, b: copying and 100000 more"
        );
        assert_eq!(running_summary(&[], 0), "");
    }
}

//! `stop|retry|pause|resume --all FILTER...`: one action on every request `find`'s
//! filters find. A dry run by default (it lists what it would touch, and which of them
//! the caller may not act on); `--yes` acts, each request authorized and audited by the
//! Request Manager as if asked alone.

use proto::{BulkAction, BulkOutcome, BulkReport};

use super::*;

/// Which requests a stop, retry, pause or resume acts on: one by id, or every one that
/// filters find.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Target {
    /// The request
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    id: Option<String>,
    /// Every request these filters find, with find's words (type=deploy states=RUNNING
    /// user=ann args=host=db1 since=1h limit=N): a dry run that lists them, unless --yes
    #[arg(long, num_args = 1.., value_name = "FILTER")]
    all: Option<Vec<String>>,
    /// With --all: act on them, not only list them
    #[arg(long)]
    yes: bool,
}

impl Target {
    /// The one request named, if it is not `--all`.
    pub(crate) fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
}

/// `ACTION ID` (`--from JOB` for a retry), or `ACTION --all FILTER... [--yes]`.
pub(crate) async fn act(
    args: &ClientArgs,
    action: BulkAction,
    target: &Target,
    retry: &super::RetryArgs,
) -> anyhow::Result<Exit> {
    let Some(id) = target.id() else {
        return bulk(args, action, target).await;
    };
    if target.yes {
        crate::exit::eprintln_failure(&format!(
            "--yes goes with --all (a {} of every request filters find); one request is acted on without it: spindle {} {id}",
            action.name(),
            action.name()
        ));
        return Ok(Exit::Usage);
    }
    match action {
        BulkAction::Stop => super::stop(args, id).await,
        BulkAction::Pause => super::pause(args, id, true).await,
        BulkAction::Resume => super::pause(args, id, false).await,
        BulkAction::Retry => super::retry(args, id, retry).await,
    }
}

async fn bulk(args: &ClientArgs, action: BulkAction, target: &Target) -> anyhow::Result<Exit> {
    let words = target.all.as_deref().unwrap_or_default();
    let filter = super::show::find_filter(words, 0)?;
    let client = args.client()?;
    let report = match client.bulk(action, &filter, !target.yes).await {
        Ok(report) => report,
        Err(err) => return Ok(fail_or_usage(&err)),
    };
    if args.output() == Output::Json {
        print_json(&report)?;
    } else {
        print_report(&report, words)?;
    }
    let refused = report.count(BulkOutcome::Refused);
    Ok(if refused > 0 && !report.dry_run {
        Exit::Failure
    } else {
        Exit::Success
    })
}

fn print_report(report: &BulkReport, words: &[String]) -> anyhow::Result<()> {
    let verb = report.action.name();
    let total = report.requests.len();
    if total == 0 {
        eprintln_line("no requests match")?;
        return Ok(());
    }
    let plural = |n: usize| if n == 1 { "request" } else { "requests" };
    out!("{} OUTCOME", request_columns(None));
    for item in &report.requests {
        let outcome = match item.outcome {
            BulkOutcome::Would => format!("would {verb}"),
            BulkOutcome::Done => done(report.action).to_owned(),
            BulkOutcome::Refused => format!("refused: {}", item.message),
        };
        let columns = request_columns(Some((&item.id, &item.request_type, &item.user, item.state)));
        out!("{columns} {outcome}");
    }
    let refused = report.count(BulkOutcome::Refused);
    if report.dry_run {
        let would = report.count(BulkOutcome::Would);
        eprintln_line(&format!(
            "\na dry run: nothing changed. {would} {} to {verb}{}; to act:\n\n  spindle {verb} --all {} --yes\n",
            plural(would),
            if refused > 0 {
                format!(", {refused} you may not")
            } else {
                String::new()
            },
            words.join(" ")
        ))?;
    } else {
        let done_count = report.count(BulkOutcome::Done);
        eprintln_line(&format!(
            "\n{} {done_count} of {total} {}{}",
            done(report.action),
            plural(total),
            if refused > 0 {
                format!("; {refused} refused (above, with why)")
            } else {
                String::new()
            }
        ))?;
    }
    Ok(())
}

/// The action, done.
fn done(action: BulkAction) -> &'static str {
    match action {
        BulkAction::Stop => "stopped",
        BulkAction::Retry => "retried",
        BulkAction::Pause => "paused",
        BulkAction::Resume => "resumed",
    }
}

//! `spindle import spincycle`: copies a Spin Cycle database's requests, archives, job log
//! and suspended chains into Spindle's store (any backend), in batches of requests, each
//! batch one transaction of the store's ([`store::History::import_requests`]). A request
//! stored already is skipped whole, so a second run copies nothing twice and a run
//! killed halfway is finished by the next. Reading the next batch overlaps writing this
//! one.

mod spincycle;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use proto::State;

use crate::exit::{Exit, eprintln_failure};
use spincycle::{Batch, Policy, Source, TABLES};

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SpincycleArgs {
    /// Spin Cycle's database: mysql://USER:PASSWORD@HOST:PORT/DATABASE, or Spin Cycle's
    /// DSN (SPINCYCLE_MYSQL_DSN) USER:PASSWORD@tcp(HOST:PORT)/DATABASE. Read, but for the
    /// claims of the suspended chains it copies (see --read-only)
    #[arg(long)]
    from: String,
    /// Only read Spin Cycle's database: do not claim the suspended chains the import
    /// copies. A Spin Cycle Request Manager started again would then resume them too
    /// (they would run in both systems): keep every one stopped for good
    #[arg(long)]
    read_only: bool,
    /// Spindle's database: sqlite://PATH, postgres://USER@HOST:PORT/DATABASE or
    /// mysql://USER:PASSWORD@HOST:PORT/DATABASE
    #[arg(long, env = "SPINDLE_DATABASE", default_value = "sqlite://spindle.db")]
    to: String,
    /// Import PENDING and RUNNING requests too, as FAIL (with an error that says so);
    /// without it they are left out, so that a Spin Cycle still running them can finish
    /// first (import again then: what is stored is skipped)
    #[arg(long)]
    include_running: bool,
    /// Requests per batch (one transaction each)
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=5000))]
    batch: u32,
}

/// What was copied, table by table.
#[derive(Debug, Default)]
struct Counts {
    in_source: [u64; 4],
    copied: [u64; 4],
    already: [u64; 4],
    left: [u64; 4],
    states: BTreeMap<State, u64>,
    bad: u64,
    refused: u64,
    /// Requests Spindle owns (imported before) that Spin Cycle ran or runs since.
    conflicts: u64,
}

impl Counts {
    /// Adds what became of `batch`, of which the store took the requests `stored`.
    fn add(&mut self, batch: &Batch, stored: &HashSet<String>) {
        for import in &batch.imports {
            let which = if stored.contains(&import.request.id) {
                *self.states.entry(import.request.state).or_default() += 1;
                &mut self.copied
            } else {
                &mut self.already
            };
            which[0] += 1;
            which[1] += 1;
            which[2] += import.job_logs.len() as u64;
            which[3] += u64::from(import.suspended.is_some());
        }
        let out = (batch.bad.len() + batch.refused.len()) as u64;
        self.left[0] += out;
        self.left[1] += out;
        self.left[2] += batch.left[2];
        self.left[3] += batch.left[3];
        self.bad += batch.bad.len() as u64;
        self.refused += batch.refused.len() as u64;
    }
}

/// Runs `spindle import spincycle`.
pub(crate) async fn spincycle(args: &SpincycleArgs) -> anyhow::Result<Exit> {
    if same_database(&args.from, &args.to) {
        eprintln_failure(&format!(
            "--from and --to name one database ({}); Spindle's tables go in a database of their own",
            store::redacted(&args.to)
        ));
        return Ok(Exit::Usage);
    }
    let source = Source::connect(&args.from, !args.read_only).await?;
    let claims = source.clone();
    if args.read_only {
        eprintln_failure(
            "warning: --read-only: the SUSPENDED requests copied are not claimed in Spin Cycle's database; a Spin Cycle Request Manager started again would resume them too (they would run in both systems): keep every one stopped for good",
        );
    }
    let store = store::open(&args.to)
        .await
        .map_err(|err| anyhow::anyhow!("--to {}: {err}", store::redacted(&args.to)))?;
    let mut counts = Counts {
        in_source: source.counts().await?,
        ..Counts::default()
    };
    let bar = progress_bar(counts.in_source[0]);
    let policy = Policy {
        include_running: args.include_running,
        claim: !args.read_only,
        now: chrono::Utc::now(),
    };
    let began = Instant::now();
    // The reader runs a batch ahead of the writer.
    let (send, mut batches) = tokio::sync::mpsc::channel::<Batch>(2);
    let limit = args.batch;
    let reader = tokio::spawn(async move {
        let mut after = Vec::new();
        while let Some((last, batch)) = source.batch(&after, limit, policy).await? {
            after = last;
            if send.send(batch).await.is_err() {
                break;
            }
        }
        source.close().await;
        anyhow::Ok(())
    });
    let mut write_error = None;
    while let Some(batch) = batches.recv().await {
        tell(&bar, &batch);
        match write(&*store, &batch).await {
            Ok(stored) => {
                counts.add(&batch, &stored);
                // The claims of chains not copied go back to Spin Cycle.
                let bad: Vec<String> = batch.bad.iter().map(|b| b.request_id.clone()).collect();
                if let Err(err) = claims.release(&bad).await {
                    say(&bar, format!("warning: {err}"));
                }
                for conflict in conflicts(&*store, &batch, &stored).await {
                    say(&bar, format!("conflict: {conflict}"));
                    counts.conflicts += 1;
                }
            }
            Err(err) => {
                write_error = Some(err);
                break;
            }
        }
        bar.inc(batch.read[0]);
        bar.set_message(format!("{} job log rows copied", counts.copied[2]));
    }
    drop(batches);
    let read = reader.await;
    bar.finish_and_clear();
    if let Some(err) = write_error {
        return Err(anyhow::Error::new(err).context(format!(
            "writing to {} failed; what was written stays, and importing again finishes (the suspended chains of the batch stay claimed for Spindle until then)",
            store::redacted(&args.to)
        )));
    }
    read.map_err(|err| anyhow::anyhow!("the reader of Spin Cycle's database failed: {err}"))??;
    report(&counts, began.elapsed());
    if counts.conflicts > 0 {
        eprintln_failure(&format!(
            "{} request(s) that Spindle owns were run by Spin Cycle after they were imported (see `conflict:` above): they may have run in both systems; check their work, and stop the one that should not run",
            counts.conflicts
        ));
        return Ok(Exit::Failure);
    }
    if counts.bad + counts.refused > 0 {
        eprintln_failure(&format!(
            "{} request(s) were not imported ({} that could not be read, {} PENDING or RUNNING); see above",
            counts.bad + counts.refused,
            counts.bad,
            counts.refused
        ));
        return Ok(Exit::Failure);
    }
    Ok(Exit::Success)
}

/// Says what of a batch is not copied as it was: rows that cannot be read, requests
/// imported otherwise, requests left out.
fn tell(bar: &ProgressBar, batch: &Batch) {
    for bad in &batch.bad {
        say(
            bar,
            format!(
                "warning: request {}: {}: {}; skipped",
                bad.request_id, bad.table, bad.problem
            ),
        );
    }
    for note in &batch.notes {
        say(bar, format!("note: {note}"));
    }
    for refused in &batch.refused {
        say(
            bar,
            format!("left out: request {} {}", refused.request_id, refused.why),
        );
    }
}

/// What Spin Cycle did with requests Spindle owns (imported before): one that it runs
/// now (left out as RUNNING), and one whose job log in Spin Cycle has tries Spindle's copy
/// lacks (Spin Cycle resumed it after the import). Each is one line.
async fn conflicts(
    store: &dyn store::Store,
    batch: &Batch,
    stored: &HashSet<String>,
) -> Vec<String> {
    let mut found = Vec::new();
    for refused in &batch.refused {
        if let Ok(owned) = store.get_request(&refused.request_id, false).await {
            found.push(format!(
                "request {} is {} in Spin Cycle, but Spindle owns it (imported before; {} in Spindle): it runs in both systems",
                refused.request_id, refused.state, owned.state
            ));
        }
    }
    for import in batch
        .imports
        .iter()
        .filter(|i| !stored.contains(&i.request.id))
    {
        let id = &import.request.id;
        let Ok(ours) = store.job_log(id).await else {
            continue;
        };
        let known: HashSet<(&str, u32, i64)> = ours
            .iter()
            .map(|e| (e.job_id.as_str(), e.r#try, e.started_at))
            .collect();
        let new: Vec<&proto::JobLog> = import
            .job_logs
            .iter()
            .filter(|e| !known.contains(&(e.job_id.as_str(), e.r#try, e.started_at)))
            .collect();
        if let Some(first) = new.first() {
            found.push(format!(
                "request {id}: Spin Cycle ran it after it was imported ({} job log entries Spindle's copy lacks, such as job {} ({}) try {} {}; {} in Spin Cycle now)",
                new.len(),
                first.name,
                first.job_id,
                first.r#try,
                first.state,
                import.request.state
            ));
        }
    }
    found
}

/// Stores a batch, trying again (up to 5 times, a second apart) while the store is
/// unavailable. Returns the ids stored now.
async fn write(store: &dyn store::Store, batch: &Batch) -> Result<HashSet<String>, store::Error> {
    let mut attempt = 0;
    loop {
        match store.import_requests(&batch.imports).await {
            Ok(stored) => return Ok(stored.into_iter().collect()),
            Err(err) if err.is_transient() && attempt < 5 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// A line on stderr, above the progress bar (indicatif's `println` says nothing when
/// stderr is not a terminal).
#[allow(
    clippy::print_stderr,
    reason = "what the import could not copy is its report"
)]
fn say(bar: &ProgressBar, line: String) {
    bar.suspend(|| eprintln!("{line}"));
}

fn progress_bar(requests: u64) -> ProgressBar {
    let bar = ProgressBar::new(requests);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} importing [{bar:30}] {pos}/{len} requests, {msg} ({elapsed})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Whether two database URLs name one database (what a user would type twice).
fn same_database(from: &str, to: &str) -> bool {
    let norm = |url: &str| {
        let url = spincycle::mysql_url(url).unwrap_or_else(|_| url.to_owned());
        url.replacen("mariadb://", "mysql://", 1)
            .trim_end_matches('/')
            .to_owned()
    };
    norm(from) == norm(to)
}

#[allow(clippy::print_stdout, reason = "the import's summary is its output")]
fn report(counts: &Counts, took: Duration) {
    println!(
        "{:<22} {:>12} {:>12} {:>14} {:>10}",
        "table", "in Spin Cycle", "copied", "already there", "left out"
    );
    for (at, table) in TABLES.iter().enumerate() {
        println!(
            "{:<22} {:>12} {:>12} {:>14} {:>10}",
            table, counts.in_source[at], counts.copied[at], counts.already[at], counts.left[at]
        );
    }
    let states: Vec<String> = counts
        .states
        .iter()
        .map(|(state, n)| format!("{state} {n}"))
        .collect();
    println!(
        "copied requests by state: {}",
        if states.is_empty() {
            "none".to_owned()
        } else {
            states.join(", ")
        }
    );
    let secs = took.as_secs_f64().max(0.001);
    println!(
        "took {:.1} s ({:.0} job log rows/s)",
        took.as_secs_f64(),
        counts.copied[2] as f64 / secs
    );
    if counts.copied[0] == 0 && counts.already[0] > 0 {
        println!("nothing new: every request read was imported before");
    }
}

//! `log`: a request's job log, and `--follow`, which prints output as it comes.

use super::*;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogArgs {
    /// The request id
    id: String,
    /// Only the tries of this job: its id, or its name (every job of that name, such as
    /// each expansion of a node)
    #[arg(long)]
    job: Option<String>,
    /// Keep printing, until the request ends: the output of running jobs as they print
    /// it, and each try's entry when it ends
    #[arg(long, short = 'f')]
    follow: bool,
    /// Also the entries of the noop jobs the grapher adds around sequences and
    /// expansions (`*_begin`, `*_end`); JSON output always has them
    #[arg(long)]
    all: bool,
}

/// `streamed`: the try's output was printed live already, so it is not printed again.
/// `names`: each job's name with its expansion element (`drain [host=web-37]`).
fn print_entry(
    entry: &proto::JobLog,
    streamed: bool,
    names: &std::collections::HashMap<String, String>,
) -> anyhow::Result<()> {
    let at = |nanos: i64| {
        if nanos == 0 {
            "N/A".to_owned()
        } else {
            DateTime::from_timestamp_nanos(nanos)
                .format("%Y-%m-%d %H:%M:%S%.3f UTC")
                .to_string()
        }
    };
    let (stdout, stderr) = if streamed {
        ("(shown above)", "(shown above)")
    } else {
        (entry.stdout.trim_end(), entry.stderr.trim_end())
    };
    out!(
        "job id:   {}\njob name: {}\njob type: {}\nstate:    {}\nexit:     {}\nerror:    {}\ntry:      {}\nruntime:  {:.6}s\nstarted:  {}\nfinished: {}\nstdout:   {}\nstderr:   {}\n--",
        entry.job_id,
        names.get(&entry.job_id).unwrap_or(&entry.name),
        entry.job_type,
        entry.state,
        entry.exit,
        entry.error,
        entry.r#try,
        (entry.finished_at - entry.started_at) as f64 / 1e9,
        at(entry.started_at),
        at(entry.finished_at),
        stdout,
        stderr
    );
    Ok(())
}

/// What `log --follow` has printed so far.
#[derive(Default)]
struct Followed {
    /// (job, try) of the entries printed.
    entries: std::collections::HashSet<(String, u32)>,
    /// The output cursor.
    after: i64,
    /// Per (job, try, stream), the offset just past what was printed.
    ends: std::collections::HashMap<(String, u32, proto::Stream), u64>,
    /// The stream printed last (a header is printed when it changes).
    current: Option<(String, u32, proto::Stream)>,
}

impl Followed {
    /// Prints a live output chunk: a header when it is from another try or stream than
    /// the last one, a marker when bytes before it were cut.
    fn print_chunk(
        &mut self,
        chunk: &proto::OutputChunk,
        names: &std::collections::HashMap<String, String>,
        json: bool,
    ) -> anyhow::Result<()> {
        let key = (chunk.job_id.clone(), chunk.r#try, chunk.stream);
        let end = self.ends.entry(key.clone()).or_default();
        if chunk.end() <= *end {
            return Ok(());
        }
        let cut = chunk.offset.saturating_sub(*end);
        *end = chunk.end();
        if json {
            out!("{}", serde_json::to_string(chunk)?);
            return Ok(());
        }
        let mut text = String::new();
        if self.current.as_ref() != Some(&key) {
            if self.current.is_some() {
                text.push('\n');
            }
            let name = names.get(&chunk.job_id).map_or("?", String::as_str);
            text.push_str(&format!(
                "==> {name} (job {}) try {} {} <==\n",
                chunk.job_id, chunk.r#try, chunk.stream
            ));
            self.current = Some(key);
        }
        if cut > 0 {
            text.push_str(&format!("[spindle: {cut} bytes cut]\n"));
        }
        text.push_str(&chunk.data);
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()?;
        Ok(())
    }

    fn streamed(&self, entry: &proto::JobLog) -> bool {
        [proto::Stream::Stdout, proto::Stream::Stderr]
            .into_iter()
            .any(|stream| {
                self.ends
                    .contains_key(&(entry.job_id.clone(), entry.r#try, stream))
            })
    }
}

/// `log <id>`: every try, oldest first; with `--follow`, also the output of running
/// tries as it is produced, until the request ends.
// Long because `--follow` is one loop over the state it keeps (the entries and output
// printed, what each job printed last) between polls; without it, one read and print.
pub(crate) async fn log(args: &ClientArgs, log: &LogArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let json = args.output() == Output::Json;
    // The chain names each job with its expansion element; JSON entries are as stored.
    let chain = if log.job.is_some() || log.follow || !json {
        match client.job_chain(&log.id).await {
            Ok(chain) => Some(chain),
            Err(err) => return Ok(fail(&err)),
        }
    } else {
        None
    };
    let names: std::collections::HashMap<String, String> = chain
        .iter()
        .flat_map(|chain| chain.jobs.values())
        .map(|job| (job.id.clone(), job_title(&job.name, &job.each)))
        .collect();
    // `--job`: the ids of the jobs it names, by id or by name.
    let jobs: Option<std::collections::HashSet<String>> = match (&log.job, &chain) {
        (Some(wanted), Some(chain)) => {
            let ids: std::collections::HashSet<String> = chain
                .jobs
                .values()
                .filter(|job| &job.id == wanted || &job.name == wanted)
                .map(|job| job.id.clone())
                .collect();
            if ids.is_empty() {
                let mut names: Vec<&str> = chain.jobs.values().map(|j| j.name.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                crate::exit::eprintln_failure(&format!(
                    "request {} has no job with id or name `{wanted}`; expected a job id or one of its job names: {}",
                    log.id,
                    names.join(", ")
                ));
                return Ok(Exit::NotFound);
            }
            Some(ids)
        }
        _ => None,
    };
    let wanted = |job_id: &str| jobs.as_ref().is_none_or(|ids| ids.contains(job_id));
    // The grapher's wrapper jobs say nothing a person reads a log for.
    let shown = |entry: &proto::JobLog| {
        wanted(&entry.job_id)
            && (log.all || json || !graph::names::is_wrapper(&entry.name, &entry.job_type))
    };
    if !log.follow {
        let mut entries = match client.job_log(&log.id).await {
            Ok(entries) => entries,
            Err(err) => return Ok(fail(&err)),
        };
        entries.retain(|e| shown(e));
        entries.sort_by_key(|e| (e.finished_at, e.job_id.clone(), e.r#try));
        if json {
            print_json(&entries)?;
        } else {
            for entry in &entries {
                print_entry(entry, false, &names)?;
            }
        }
        return Ok(Exit::Success);
    }
    let mut followed = Followed::default();
    // Output is polled every 250 ms; the job log (every entry with its output) only every
    // fourth time, and once more at the end.
    let mut poll = 0u64;
    loop {
        poll += 1;
        // The output first: its page says the request's state, and once that is final
        // an empty page means there is no more output.
        let mut finished;
        loop {
            let page = match client.output(&log.id, followed.after).await {
                Ok(page) => page,
                Err(err) => return Ok(fail(&err)),
            };
            finished = page.state.is_finished();
            followed.after = page.next;
            for chunk in page.chunks.iter().filter(|chunk| wanted(&chunk.job_id)) {
                followed.print_chunk(chunk, &names, json)?;
            }
            if page.chunks.len() < proto::OutputQuery::MAX_LIMIT as usize {
                break;
            }
        }
        if !finished && poll % 4 != 1 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        }
        let mut entries = match client.job_log(&log.id).await {
            Ok(entries) => entries,
            Err(err) => return Ok(fail(&err)),
        };
        entries.retain(|e| shown(e));
        entries.sort_by_key(|e| (e.finished_at, e.job_id.clone(), e.r#try));
        for entry in entries {
            if followed.entries.insert((entry.job_id.clone(), entry.r#try)) {
                if followed.current.take().is_some() {
                    out!("");
                }
                if json {
                    out!("{}", serde_json::to_string(&entry)?);
                } else {
                    print_entry(&entry, followed.streamed(&entry), &names)?;
                }
            }
        }
        if finished {
            return Ok(Exit::Success);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

//! Reading a Spin Cycle 2.x database (storage.md §1: `requests`, `request_archives`,
//! `job_log`, `suspended_job_chains`) in batches of requests, in the order of their ids,
//! and turning each request's rows into a [`store::ImportedRequest`].
//!
//! Only reads: the session is read-only. Spin Cycle's ids and names are binary columns
//! (read as bytes, then as UTF-8); its times are `TIMESTAMP(6)` (read as Unix
//! microseconds, in UTC) but for the job log's, which are Unix nanoseconds as Spindle's.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use proto::{CreateRequest, JobChain, JobLog, Request, RequestArg, State, SuspendedJobChain};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{Executor as _, Row as _};
use store::ImportedRequest;

/// A row that could not be read: reported with its request, and skipped (with the rest
/// of its request).
#[derive(Debug, Clone)]
pub(crate) struct BadRow {
    pub(crate) request_id: String,
    pub(crate) table: &'static str,
    pub(crate) problem: String,
}

/// A request the import leaves out on purpose.
#[derive(Debug, Clone)]
pub(crate) struct Refused {
    pub(crate) request_id: String,
    pub(crate) state: State,
}

/// What one batch of Spin Cycle's requests became.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) imports: Vec<ImportedRequest>,
    pub(crate) bad: Vec<BadRow>,
    pub(crate) refused: Vec<Refused>,
    /// Rows of each table read for the batch's requests: requests, archives, job log,
    /// suspended chains.
    pub(crate) read: [u64; 4],
    /// Job log rows and suspended chains of the batch's bad and refused requests, and
    /// suspended chains of requests that were not SUSPENDED: not copied.
    pub(crate) left: [u64; 4],
    /// Warnings about requests imported otherwise than as they were.
    pub(crate) notes: Vec<String>,
}

/// How the import treats what Spin Cycle may still be running.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// PENDING and RUNNING requests are imported as FAIL (else left out).
    pub(crate) include_running: bool,
    /// The import's time: the end of what it fails, and the start of a suspended chain's
    /// time to live.
    pub(crate) now: DateTime<Utc>,
}

/// A Spin Cycle database, open for reading.
pub(crate) struct Source {
    pool: MySqlPool,
}

const REQUESTS: &str = "SELECT request_id, type, CAST(state AS SIGNED) AS state, `user`, \
     CAST(UNIX_TIMESTAMP(created_at) * 1000000 AS SIGNED) AS created_us, \
     CAST(UNIX_TIMESTAMP(started_at) * 1000000 AS SIGNED) AS started_us, \
     CAST(UNIX_TIMESTAMP(finished_at) * 1000000 AS SIGNED) AS finished_us, \
     CAST(total_jobs AS SIGNED) AS total_jobs, CAST(finished_jobs AS SIGNED) AS finished_jobs \
     FROM requests WHERE request_id > ? ORDER BY request_id LIMIT ?";

impl Source {
    /// Connects to `url` (`mysql://USER:PASSWORD@HOST:PORT/DATABASE`), read-only, UTC.
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Source> {
        let options: MySqlConnectOptions = url.parse().map_err(|err| {
            anyhow::anyhow!(
                "--from {}: {err}; expected mysql://USER:PASSWORD@HOST:PORT/DATABASE",
                store::redacted(url)
            )
        })?;
        let pool = MySqlPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute("SET SESSION time_zone = '+00:00'").await?;
                    conn.execute("SET SESSION TRANSACTION READ ONLY").await?;
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .map_err(|err| {
                anyhow::anyhow!(
                    "--from {}: connecting to Spin Cycle's database failed: {err}",
                    store::redacted(url)
                )
            })?;
        Ok(Source { pool })
    }

    /// Rows in each of Spin Cycle's four tables.
    pub(crate) async fn counts(&self) -> anyhow::Result<[u64; 4]> {
        let mut counts = [0; 4];
        for (at, table) in TABLES.iter().enumerate() {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT COUNT(*) AS n FROM {table}"
            )))
            .fetch_one(&self.pool)
            .await
            .map_err(|err| {
                anyhow::anyhow!(
                    "reading Spin Cycle's table {table} failed: {err} (is this a Spin Cycle 2.x database?)"
                )
            })?;
            counts[at] = u64::try_from(row.try_get::<i64, _>("n")?).unwrap_or(0);
        }
        Ok(counts)
    }

    /// The next `limit` requests after `after` (a request id's bytes; empty for the
    /// first), with their archives, job log and suspended chains, read and turned into
    /// imports. Returns the last id read (`None` when there are no more).
    pub(crate) async fn batch(
        &self,
        after: &[u8],
        limit: u32,
        policy: Policy,
    ) -> anyhow::Result<Option<(Vec<u8>, Batch)>> {
        let requests = sqlx::query(REQUESTS)
            .bind(after)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(|err| anyhow::anyhow!("reading Spin Cycle's requests failed: {err}"))?;
        let Some(last) = requests.last() else {
            return Ok(None);
        };
        let last: Vec<u8> = last.try_get("request_id")?;
        let ids: Vec<Vec<u8>> = requests
            .iter()
            .map(|row| row.try_get("request_id"))
            .collect::<Result<_, _>>()?;
        let archives = self
            .rows(
                "SELECT request_id, create_request, args, job_chain FROM request_archives",
                "",
                &ids,
            )
            .await?;
        let logs = self
            .rows(
                "SELECT request_id, job_id, name, CAST(try AS SIGNED) AS try, type, \
                 CAST(state AS SIGNED) AS state, CAST(started_at AS SIGNED) AS started_at, \
                 CAST(finished_at AS SIGNED) AS finished_at, error, `exit`, stdout, stderr \
                 FROM job_log",
                " ORDER BY request_id, job_id, try",
                &ids,
            )
            .await?;
        let suspended = self
            .rows(
                "SELECT request_id, suspended_job_chain FROM suspended_job_chains",
                "",
                &ids,
            )
            .await?;
        let mut batch = Batch {
            read: [
                requests.len() as u64,
                archives.len() as u64,
                logs.len() as u64,
                suspended.len() as u64,
            ],
            ..Batch::default()
        };
        let mut archives = by_request(archives)?;
        let mut logs = by_request(logs)?;
        let mut suspended = by_request(suspended)?;
        for row in &requests {
            let id: Vec<u8> = row.try_get("request_id")?;
            let rows = Rows {
                archive: archives.remove(&id).unwrap_or_default(),
                logs: logs.remove(&id).unwrap_or_default(),
                suspended: suspended.remove(&id).unwrap_or_default(),
            };
            let (log_rows, chains) = (rows.logs.len() as u64, rows.suspended.len() as u64);
            match request(row, rows, policy) {
                Ok(Read::Import(import, note)) => {
                    if import.suspended.is_none() {
                        batch.left[3] += chains;
                    }
                    batch.notes.extend(note);
                    batch.imports.push(*import);
                }
                Ok(Read::Refused(refused)) => {
                    batch.left[2] += log_rows;
                    batch.left[3] += chains;
                    batch.refused.push(refused);
                }
                Err(bad) => {
                    batch.left[2] += log_rows;
                    batch.left[3] += chains;
                    batch.bad.push(bad);
                }
            }
        }
        Ok(Some((last, batch)))
    }

    /// `select`'s rows of the requests `ids`, then `order`.
    async fn rows(
        &self,
        select: &str,
        order: &str,
        ids: &[Vec<u8>],
    ) -> anyhow::Result<Vec<MySqlRow>> {
        let marks = vec!["?"; ids.len()].join(", ");
        let sql = format!("{select} WHERE request_id IN ({marks}){order}");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in ids {
            query = query.bind(id.as_slice());
        }
        query.fetch_all(&self.pool).await.map_err(|err| {
            anyhow::anyhow!("reading Spin Cycle's database failed: {err} ({select})")
        })
    }

    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }
}

/// Spin Cycle's tables, in the order of the counts.
pub(crate) const TABLES: [&str; 4] = [
    "requests",
    "request_archives",
    "job_log",
    "suspended_job_chains",
];

fn by_request(rows: Vec<MySqlRow>) -> anyhow::Result<HashMap<Vec<u8>, Vec<MySqlRow>>> {
    let mut by: HashMap<Vec<u8>, Vec<MySqlRow>> = HashMap::new();
    for row in rows {
        let id: Vec<u8> = row.try_get("request_id")?;
        by.entry(id).or_default().push(row);
    }
    Ok(by)
}

/// A request's rows in the other tables.
struct Rows {
    archive: Vec<MySqlRow>,
    logs: Vec<MySqlRow>,
    suspended: Vec<MySqlRow>,
}

enum Read {
    Import(Box<ImportedRequest>, Option<String>),
    Refused(Refused),
}

/// Text of a binary column: UTF-8, without the zero bytes that pad a `BINARY(n)`.
fn text(bytes: &[u8], column: &str) -> Result<String, String> {
    let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |at| at + 1);
    String::from_utf8(bytes[..end].to_vec())
        .map_err(|err| format!("{column} is not UTF-8 text: {err}"))
}

fn column<T>(row: &MySqlRow, name: &str) -> Result<T, String>
where
    T: for<'r> sqlx::Decode<'r, sqlx::MySql> + sqlx::Type<sqlx::MySql>,
{
    row.try_get(name)
        .map_err(|err| format!("column {name} cannot be read: {err}"))
}

fn micros(value: Option<i64>) -> Option<DateTime<Utc>> {
    value.and_then(DateTime::from_timestamp_micros)
}

fn state(value: i64, column: &str) -> Result<State, String> {
    u8::try_from(value)
        .ok()
        .and_then(|v| State::from_value(v).ok())
        .ok_or_else(|| format!("{column} {value} is not a state; expected a number from 0 to 7"))
}

/// One request's rows as an import, a refusal, or the first bad row.
fn request(row: &MySqlRow, rows: Rows, policy: Policy) -> Result<Read, BadRow> {
    let id = text(
        &column::<Vec<u8>>(row, "request_id").unwrap_or_default(),
        "request_id",
    )
    .unwrap_or_else(|_| {
        String::from_utf8_lossy(&column::<Vec<u8>>(row, "request_id").unwrap_or_default())
            .into_owned()
    });
    let bad = |table: &'static str| {
        let id = id.clone();
        move |problem: String| BadRow {
            request_id: id.clone(),
            table,
            problem,
        }
    };
    let mut request = request_row(row).map_err(bad("requests"))?;
    let state = request.state;
    if matches!(state, State::Pending | State::Running) && !policy.include_running {
        return Ok(Read::Refused(Refused {
            request_id: id,
            state,
        }));
    }
    let [archive] = <[MySqlRow; 1]>::try_from(rows.archive).map_err(|_| {
        bad("request_archives")(
            "no archive (request_archives row): its job chain is not known".to_owned(),
        )
    })?;
    let (create_request, args, chain) = archive_row(&archive).map_err(bad("request_archives"))?;
    request.args = args;
    // Its own jobs, as Spindle counts them for people (Spin Cycle's total has wrappers).
    request.own_jobs = chain.own_jobs();
    request.job_chain = Some(chain);
    let job_logs = rows
        .logs
        .iter()
        .map(|row| log_row(row, &id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad("job_log"))?;
    let mut note = None;
    let mut suspended = None;
    match state {
        State::Pending | State::Running => {
            request.error = format!(
                "imported from Spin Cycle while it was {state}: how it ended there is not known"
            );
            request.state = State::Fail;
            request.finished_at = Some(policy.now);
            note = Some(format!(
                "request {id} was {state} in Spin Cycle: imported as FAIL"
            ));
        }
        State::Suspended => match rows.suspended.first() {
            Some(row) => {
                let chain = suspended_row(row, &id).map_err(bad("suspended_job_chains"))?;
                suspended = Some((chain, policy.now));
            }
            None => {
                request.error =
                    "SUSPENDED in Spin Cycle without a suspended job chain: it cannot be resumed"
                        .to_owned();
                request.state = State::Fail;
                request.finished_at = Some(policy.now);
                note = Some(format!(
                    "request {id} was SUSPENDED in Spin Cycle without a suspended job chain: imported as FAIL"
                ));
            }
        },
        State::Complete | State::Fail | State::Stopped => {}
        State::Unknown | State::Reserved => {
            return Err(bad("requests")(format!(
                "state {} ({state}) is not a state a request ends or waits in",
                state.value()
            )));
        }
    }
    Ok(Read::Import(
        Box::new(ImportedRequest {
            request,
            create_request,
            job_logs,
            suspended,
        }),
        note,
    ))
}

fn request_row(row: &MySqlRow) -> Result<Request, String> {
    let id = text(&column::<Vec<u8>>(row, "request_id")?, "request_id")?;
    if id.is_empty() {
        return Err("request_id is empty".to_owned());
    }
    let count = |name: &str| -> Result<u64, String> {
        let value: i64 = column(row, name)?;
        u64::try_from(value).map_err(|_| format!("{name} {value} is negative"))
    };
    Ok(Request {
        id,
        request_type: text(&column::<Vec<u8>>(row, "type")?, "type")?,
        state: state(column(row, "state")?, "state")?,
        user: column::<Option<String>>(row, "user")?.unwrap_or_default(),
        args: Vec::new(),
        created_at: micros(column(row, "created_us")?).ok_or("created_at is not a time")?,
        started_at: micros(column(row, "started_us")?),
        finished_at: micros(column(row, "finished_us")?),
        job_chain: None,
        total_jobs: count("total_jobs")?,
        finished_jobs: count("finished_jobs")?,
        own_jobs: 0,
        own_finished_jobs: 0,
        jr_url: String::new(),
        error: String::new(),
        paused: false,
        spec_version: String::new(),
    })
}

fn json<T: serde::de::DeserializeOwned>(row: &MySqlRow, name: &str) -> Result<T, String> {
    let bytes: Vec<u8> = column(row, name)?;
    serde_json::from_slice(&bytes).map_err(|err| format!("{name} is not the JSON expected: {err}"))
}

fn archive_row(row: &MySqlRow) -> Result<(CreateRequest, Vec<RequestArg>, JobChain), String> {
    let create_request: CreateRequest = json(row, "create_request")?;
    let args: Option<Vec<RequestArg>> = json(row, "args")?;
    let chain: JobChain = json(row, "job_chain")?;
    Ok((create_request, args.unwrap_or_default(), chain))
}

fn log_row(row: &MySqlRow, request_id: &str) -> Result<JobLog, String> {
    let job_id = text(&column::<Vec<u8>>(row, "job_id")?, "job_id")?;
    let within = |problem: String| format!("job {job_id}: {problem}");
    let output = |name: &str| -> Result<String, String> {
        Ok(column::<Option<Vec<u8>>>(row, name)?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default())
    };
    let r#try: i64 = column(row, "try").map_err(within)?;
    Ok(JobLog {
        request_id: request_id.to_owned(),
        job_id: job_id.clone(),
        r#try: u32::try_from(r#try).map_err(|_| within(format!("try {try} is negative")))?,
        name: text(&column::<Vec<u8>>(row, "name").map_err(within)?, "name").map_err(within)?,
        job_type: text(&column::<Vec<u8>>(row, "type").map_err(within)?, "type").map_err(within)?,
        started_at: column(row, "started_at").map_err(within)?,
        finished_at: column(row, "finished_at").map_err(within)?,
        state: state(column(row, "state").map_err(within)?, "state").map_err(within)?,
        exit: column::<Option<i64>>(row, "exit")
            .map_err(within)?
            .unwrap_or(0),
        error: column::<Option<String>>(row, "error")
            .map_err(within)?
            .unwrap_or_default(),
        stdout: output("stdout").map_err(within)?,
        stderr: output("stderr").map_err(within)?,
    })
}

fn suspended_row(row: &MySqlRow, request_id: &str) -> Result<SuspendedJobChain, String> {
    let chain: SuspendedJobChain = json(row, "suspended_job_chain")?;
    if chain.request_id != request_id {
        return Err(format!(
            "suspended_job_chain is of request {:?}, not of this one",
            chain.request_id
        ));
    }
    Ok(chain)
}

//! Reading a Spin Cycle 2.x database (storage.md §1: `requests`, `request_archives`,
//! `job_log`, `suspended_job_chains`) in batches of requests, in the order of their ids,
//! and turning each request's rows into a [`store::ImportedRequest`].
//!
//! Only reads, but for one column: to take over the SUSPENDED requests it copies, the
//! import claims their suspended chains in Spin Cycle's own way (`rm_host`, storage.md §5)
//! under [`CLAIM`], with an `updated_at` Spin Cycle's cleanup never finds stale, so that no
//! Spin Cycle Request Manager resumes them (or expires them); a chain it did not copy is
//! given back. `--read-only` leaves that out. Spin Cycle's ids and names are binary columns
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
    /// Why, after "left out: request ID ".
    pub(crate) why: String,
}

/// The `rm_host` under which the import holds the suspended chains it copied: Spin Cycle's
/// Request Managers resume and expire only unclaimed chains (`rm_host IS NULL`).
pub(crate) const CLAIM: &str = "spindle-import";

/// The `updated_at` of a claim of the import's: Spin Cycle releases claims not updated
/// for 5 minutes (abandoned); this is past any it will see (MySQL's last `TIMESTAMP`
/// second is in 2038-01-19).
const CLAIMED_UNTIL: &str = "2038-01-19 00:00:00";

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
    /// Suspended chains are claimed in Spin Cycle's database before they are read (else
    /// Spin Cycle's database is only read).
    pub(crate) claim: bool,
    /// The import's time: the end of what it fails, and the start of a suspended chain's
    /// time to live.
    pub(crate) now: DateTime<Utc>,
}

/// A Spin Cycle database, open for reading (and, for the claims, for writing).
#[derive(Clone)]
pub(crate) struct Source {
    pool: MySqlPool,
    /// A read-write session for the claims, when the import makes them.
    claims: Option<MySqlPool>,
}

const REQUESTS: &str = "SELECT request_id, type, CAST(state AS SIGNED) AS state, `user`, \
     CAST(UNIX_TIMESTAMP(created_at) * 1000000 AS SIGNED) AS created_us, \
     CAST(UNIX_TIMESTAMP(started_at) * 1000000 AS SIGNED) AS started_us, \
     CAST(UNIX_TIMESTAMP(finished_at) * 1000000 AS SIGNED) AS finished_us, \
     CAST(total_jobs AS SIGNED) AS total_jobs, CAST(finished_jobs AS SIGNED) AS finished_jobs \
     FROM requests WHERE request_id > ? ORDER BY request_id LIMIT ?";

impl Source {
    /// Connects to `url` (`mysql://USER:PASSWORD@HOST:PORT/DATABASE`, or Spin Cycle's own
    /// `SPINCYCLE_MYSQL_DSN` form, `USER:PASSWORD@tcp(HOST:PORT)/DATABASE`), read-only, UTC;
    /// with `claim`, a second session may write the claims.
    pub(crate) async fn connect(url: &str, claim: bool) -> anyhow::Result<Source> {
        let url = mysql_url(url)?;
        let url = url.as_str();
        let options: MySqlConnectOptions = url.parse().map_err(|err| {
            anyhow::anyhow!(
                "--from {}: {err}; expected mysql://USER:PASSWORD@HOST:PORT/DATABASE (or Spin Cycle's DSN, USER:PASSWORD@tcp(HOST:PORT)/DATABASE)",
                store::redacted(url)
            )
        })?;
        let connected = |err: sqlx::Error| {
            anyhow::anyhow!(
                "--from {}: connecting to Spin Cycle's database failed: {err}",
                store::redacted(url)
            )
        };
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
            .connect_with(options.clone())
            .await
            .map_err(connected)?;
        let claims = if claim {
            Some(
                MySqlPoolOptions::new()
                    .max_connections(1)
                    .acquire_timeout(std::time::Duration::from_secs(10))
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("SET SESSION time_zone = '+00:00'").await?;
                            Ok(())
                        })
                    })
                    .connect_with(options)
                    .await
                    .map_err(connected)?,
            )
        } else {
            None
        };
        let source = Source { pool, claims };
        source.check_schema(url).await?;
        Ok(source)
    }

    /// Refuses a database that is not Spin Cycle's (saying which table or column is
    /// missing) before anything is read.
    async fn check_schema(&self, url: &str) -> anyhow::Result<()> {
        for (table, columns) in COLUMNS {
            let probe = format!("SELECT {} FROM {table} LIMIT 0", columns.join(", "));
            if let Err(err) = sqlx::query(sqlx::AssertSqlSafe(probe))
                .execute(&self.pool)
                .await
            {
                anyhow::bail!(
                    "--from {}: not a Spin Cycle 2.x database: {err} (its table {table} must have the columns {}, as Spin Cycle's request_manager_schema.sql makes them)",
                    store::redacted(url),
                    columns.join(", ")
                );
            }
        }
        Ok(())
    }

    /// Claims the unclaimed suspended chains of the requests `ids` under [`CLAIM`].
    async fn claim(&self, ids: &[Vec<u8>]) -> anyhow::Result<()> {
        let Some(claims) = &self.claims else {
            return Ok(());
        };
        let marks = vec!["?"; ids.len()].join(", ");
        let sql = format!(
            "UPDATE suspended_job_chains SET rm_host = ?, updated_at = ? WHERE rm_host IS NULL AND request_id IN ({marks})"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(CLAIM)
            .bind(CLAIMED_UNTIL);
        for id in ids {
            query = query.bind(id.as_slice());
        }
        query.execute(claims).await.map_err(|err| {
            anyhow::anyhow!(
                "claiming Spin Cycle's suspended chains failed: {err}; the import claims each SUSPENDED request's chain (rm_host = '{CLAIM}') so that Spin Cycle does not resume it too: grant UPDATE on suspended_job_chains, or stop every Spin Cycle Request Manager for good and import with --read-only"
            )
        })?;
        Ok(())
    }

    /// Gives back the import's claims of the chains of `ids` (requests it did not copy):
    /// Spin Cycle resumes them as before.
    pub(crate) async fn release(&self, ids: &[String]) -> anyhow::Result<()> {
        let Some(claims) = &self.claims else {
            return Ok(());
        };
        if ids.is_empty() {
            return Ok(());
        }
        let marks = vec!["?"; ids.len()].join(", ");
        let sql = format!(
            "UPDATE suspended_job_chains SET rm_host = NULL, updated_at = CURRENT_TIMESTAMP(6) WHERE rm_host = ? AND request_id IN ({marks})"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(CLAIM);
        for id in ids {
            query = query.bind(id.as_bytes());
        }
        query.execute(claims).await.map_err(|err| {
            anyhow::anyhow!("giving back claims of Spin Cycle's suspended chains failed: {err}")
        })?;
        Ok(())
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
        // Its suspended chains are claimed before they are read: from then on no Spin
        // Cycle Request Manager resumes them.
        let suspended_ids: Vec<Vec<u8>> = requests
            .iter()
            .filter(|row| {
                row.try_get::<i64, _>("state")
                    .is_ok_and(|state| state == i64::from(State::Suspended.value()))
            })
            .map(|row| row.try_get("request_id"))
            .collect::<Result<_, _>>()?;
        if !suspended_ids.is_empty() {
            self.claim(&suspended_ids).await?;
        }
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
                "SELECT request_id, suspended_job_chain, rm_host FROM suspended_job_chains",
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
        if let Some(claims) = &self.claims {
            claims.close().await;
        }
    }
}

/// The columns the import reads, by table.
const COLUMNS: [(&str, &[&str]); 4] = [
    (
        "requests",
        &[
            "request_id",
            "type",
            "state",
            "`user`",
            "created_at",
            "started_at",
            "finished_at",
            "total_jobs",
            "finished_jobs",
        ],
    ),
    (
        "request_archives",
        &["request_id", "create_request", "args", "job_chain"],
    ),
    (
        "job_log",
        &[
            "request_id",
            "job_id",
            "name",
            "try",
            "type",
            "state",
            "started_at",
            "finished_at",
            "error",
            "`exit`",
            "stdout",
            "stderr",
        ],
    ),
    (
        "suspended_job_chains",
        &["request_id", "suspended_job_chain", "rm_host", "updated_at"],
    ),
];

/// `--from` as a `mysql://` URL: given as one, as it is; given in Spin Cycle's
/// `SPINCYCLE_MYSQL_DSN` form (Go's `USER:PASSWORD@tcp(HOST:PORT)/DATABASE?PARAMS`),
/// turned into one (the password percent-encoded).
pub(crate) fn mysql_url(from: &str) -> anyhow::Result<String> {
    if from.contains("://") {
        return Ok(from.to_owned());
    }
    let expected = "expected mysql://USER:PASSWORD@HOST:PORT/DATABASE or Spin Cycle's DSN USER:PASSWORD@tcp(HOST:PORT)/DATABASE";
    let Some((credentials, rest)) = from.rsplit_once("@tcp(") else {
        anyhow::bail!(
            "--from {}: not a URL nor a DSN of the tcp form; {expected}",
            store::redacted(from)
        );
    };
    let Some((address, rest)) = rest.split_once(")/") else {
        anyhow::bail!("--from: the DSN's address has no `)/DATABASE` after it; {expected}");
    };
    let (database, _params) = rest.split_once('?').unwrap_or((rest, ""));
    if database.is_empty() || address.is_empty() {
        anyhow::bail!("--from: the DSN names no database or address; {expected}");
    }
    let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                other => format!("%{other:02X}"),
            })
            .collect()
    };
    let login = if password.is_empty() {
        encode(user)
    } else {
        format!("{}:{}", encode(user), encode(password))
    };
    Ok(format!("mysql://{login}@{address}/{database}"))
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
            why: format!("is {state} in Spin Cycle (--include-running imports it as FAIL)"),
            request_id: id,
            state,
        }));
    }
    if state == State::Suspended
        && policy.claim
        && let Some(why) = resumed_by_spin_cycle(&rows.suspended)
    {
        return Ok(Read::Refused(Refused {
            request_id: id,
            state,
            why: format!("{why}; import again once it has ended there"),
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

/// Why a SUSPENDED request's chain is not the import's to take: claimed by a Spin Cycle
/// Request Manager (resuming it now), or gone (resumed since its row was read). Spin
/// Cycle runs it then; a later import takes it once it has ended.
fn resumed_by_spin_cycle(suspended: &[MySqlRow]) -> Option<String> {
    let holder = suspended
        .first()
        .map(|row| column::<Option<String>>(row, "rm_host").unwrap_or_default());
    match holder {
        None => Some("was resumed by Spin Cycle while the import read it".to_owned()),
        Some(Some(host)) if host != CLAIM => Some(format!(
            "is being resumed by Spin Cycle (its suspended chain is claimed by {host})"
        )),
        Some(_) => None,
    }
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
        elements: Vec::new(),
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

#[cfg(test)]
mod tests {
    /// Issue #47: `--from` takes the team's `SPINCYCLE_MYSQL_DSN` as pasted.
    #[test]
    fn spin_cycles_dsn_is_a_mysql_url() {
        assert_eq!(
            super::mysql_url("root:@tcp(127.0.0.1:3306)/nc_spincycle").unwrap(),
            "mysql://root@127.0.0.1:3306/nc_spincycle"
        );
        assert_eq!(
            super::mysql_url("sc:p@ss w/rd@tcp(db:3306)/spincycle?parseTime=true").unwrap(),
            "mysql://sc:p%40ss%20w%2Frd@db:3306/spincycle"
        );
        let url = "mysql://root@127.0.0.1:3306/x";
        assert_eq!(super::mysql_url(url).unwrap(), url);
        for bad in [
            "root@127.0.0.1/x",
            "root:@tcp(127.0.0.1:3306)",
            "root:@tcp()/x",
        ] {
            let err = super::mysql_url(bad).unwrap_err().to_string();
            assert!(err.contains("expected mysql://"), "{bad}: {err}");
        }
    }
}

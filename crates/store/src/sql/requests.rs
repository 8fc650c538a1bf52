//! The `requests` table (with `request_args` and `request_archives`): creating requests,
//! reading one or a search, and counts.

use std::sync::Arc;

use super::*;

/// The columns every new `requests` row starts with: `request_id, type, state, user_name,
/// created_at`.
pub(super) fn request_row_head(request: &Request) -> Vec<statement::Param<'_>> {
    vec![
        request.id.as_str().into(),
        request.request_type.as_str().into(),
        state_value(request.state).into(),
        request.user.as_str().into(),
        micros(request.created_at).into(),
    ]
}

/// A request's row of `request_archives`: its id, and as JSON the request it was created
/// by, its args and its job chain (the text given with it, or made here).
type ArchiveRow<'a> = (&'a str, String, String, ChainText);

/// A new chain's JSON: made here, or given with it (shared with its maker).
enum ChainText {
    Made(String),
    Given(Arc<str>),
}

impl ChainText {
    fn as_str(&self) -> &str {
        match self {
            ChainText::Made(text) => text,
            ChainText::Given(text) => text,
        }
    }

    /// Bound as it is: neither is copied.
    fn into_param(self) -> statement::Param<'static> {
        match self {
            ChainText::Made(text) => text.into(),
            ChainText::Given(text) => statement::Param::Shared(text),
        }
    }
}

/// A new request to store: its chain's JSON when it was made already
/// ([`NewRequest::chain_json`](crate::NewRequest::chain_json)).
pub(super) type Archived<'a> = (&'a Request, &'a CreateRequest, Option<&'a Arc<str>>);

/// The rows of `request_archives` of new requests (each with its chain).
fn archive_rows<'a>(requests: &[Archived<'a>]) -> Result<Vec<ArchiveRow<'a>>, Error> {
    requests
        .iter()
        .map(|(request, create_request, chain_json)| {
            let chain = match (chain_json, &request.job_chain) {
                (Some(json), _) => ChainText::Given(Arc::clone(json)),
                (None, Some(chain)) => ChainText::Made(to_json("job chain", chain)?),
                (None, None) => {
                    return Err(Error::Invalid(
                        "a new request needs its job chain".to_owned(),
                    ));
                }
            };
            Ok((
                request.id.as_str(),
                to_json("create request", create_request)?,
                to_json("request args", &request.args)?,
                chain,
            ))
        })
        .collect()
}

/// The rows of `request_args` of new requests: id, name and the value as find compares it.
fn arg_rows<'a>(requests: &[Archived<'a>]) -> Vec<(&'a str, &'a str, String)> {
    requests
        .iter()
        .flat_map(|(request, _, _)| {
            request
                .args
                .iter()
                .map(|arg| (request.id.as_str(), arg.name.as_str(), arg_text(&arg.value)))
        })
        .collect()
}

/// The columns of a request that find answers.
const FOUND: &str = "request_id, type, state, user_name, created_at, started_at, finished_at, total_jobs, own_jobs, finished_jobs, jr_url, error, paused, spec_version";

impl<DB: Backend> SqlStore<DB> {
    /// Why a conditional update of `request_id` matched no row.
    pub(super) async fn state_error(&self, request_id: &str, expected: State) -> Error {
        let row = Statement::new("SELECT state FROM requests WHERE request_id = $1")
            .bind(request_id)
            .fetch_optional(&self.readers)
            .await;
        let actual = match row {
            Ok(None) => return Error::not_found("request", request_id),
            Ok(Some(row)) => row
                .read::<i16>("state")
                .map_err(Error::from)
                .and_then(state_of),
            Err(err) => return err.into(),
        };
        match actual {
            Ok(actual) => Error::State {
                request_id: request_id.to_owned(),
                actual,
                expected,
            },
            Err(err) => err,
        }
    }

    /// Why a report with `fence` about `request_id` matched no row: not from the owner
    /// ([`Error::Fenced`]), or the request was not in the state expected.
    pub(super) async fn refusal(
        &self,
        request_id: &str,
        fence: Option<&Fence>,
        expected: State,
    ) -> Error {
        if let Some(fence) = fence {
            match self.owner(request_id).await {
                Ok(owner) if !owner.accepts(fence) => return owner.refusal(request_id, fence),
                Ok(_) => {}
                Err(err) => return err,
            }
        }
        self.state_error(request_id, expected).await
    }

    /// Inserts new requests (each with its chain, and that chain's JSON when it was made
    /// already) in multi-row statements: the rows of `requests`, `request_archives`,
    /// `request_args` and `request_audit`.
    pub(super) async fn create_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        creates: &[(Archived<'_>, Option<&AuditEvent>)],
    ) -> Result<(), Error> {
        for chunk in creates.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut insert = Statement::build(
                "INSERT INTO requests (request_id, type, state, user_name, created_at, total_jobs, own_jobs, finished_jobs, epoch, spec_version) VALUES ",
            );
            insert.push_rows(chunk, |((request, _, _), _)| {
                let mut row = request_row_head(request);
                row.extend([
                    count(request.total_jobs).into(),
                    count(request.own_jobs).into(),
                    0_i64.into(),
                    1_i64.into(),
                    Some(request.spec_version.as_str())
                        .filter(|version| !version.is_empty())
                        .into(),
                ]);
                row
            });
            insert.execute(&mut *tx).await?;
        }
        let archived: Vec<Archived<'_>> = creates.iter().map(|(new, _)| *new).collect();
        Self::archive_in(tx, &archived).await?;
        let events: Vec<(&str, &AuditEvent)> = creates
            .iter()
            .filter_map(|((request, _, _), event)| event.map(|event| (request.id.as_str(), event)))
            .collect();
        for chunk in events.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let mut insert = Statement::build(
                "INSERT INTO request_audit (request_id, at, action, user_name, address) VALUES ",
            );
            insert.push_rows(chunk, |(id, event)| {
                vec![
                    (*id).into(),
                    micros(event.at).into(),
                    event.action.as_str().into(),
                    event.user.as_str().into(),
                    event.address.as_str().into(),
                ]
            });
            insert.execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// The rows of `request_archives` and `request_args` of new requests (each with its
    /// chain).
    pub(super) async fn archive_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        requests: &[Archived<'_>],
    ) -> Result<(), Error> {
        let mut archives = archive_rows(requests)?;
        // The JSON moved into the statement, not copied (a chain's is megabytes).
        while !archives.is_empty() {
            let chunk: Vec<_> = archives
                .drain(..REQUEST_ROWS_PER_STATEMENT.min(archives.len()))
                .collect();
            let mut insert = Statement::build(
                "INSERT INTO request_archives (request_id, create_request, args, job_chain) VALUES ",
            );
            insert.push_rows(chunk, |(id, create, args, chain)| {
                vec![id.into(), create.into(), args.into(), chain.into_param()]
            });
            insert.execute(&mut *tx).await?;
        }
        let args = arg_rows(requests);
        for chunk in args.chunks(LOG_ROWS_PER_STATEMENT) {
            let mut insert =
                Statement::build("INSERT INTO request_args (request_id, name, value) VALUES ");
            insert.push_rows(chunk, |(id, name, value)| {
                vec![(*id).into(), (*name).into(), value.as_str().into()]
            });
            insert.execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// [`Self::archive_in`] of requests stored in bulk ([`InsertRows::by_copy`]): none of
    /// them can be stored yet.
    pub(super) async fn archive_new_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        requests: &[Archived<'_>],
    ) -> Result<(), Error> {
        let archives = archive_rows(requests)?;
        InsertRows::new(
            "request_archives",
            "request_id, create_request, args, job_chain",
        )
        .column(Values::Text(archives.iter().map(|row| row.0).collect()))
        .column(Values::Text(
            archives.iter().map(|row| row.1.as_str()).collect(),
        ))
        .column(Values::Text(
            archives.iter().map(|row| row.2.as_str()).collect(),
        ))
        .column(Values::Text(
            archives.iter().map(|row| row.3.as_str()).collect(),
        ))
        .rows_per_statement(REQUEST_ROWS_PER_STATEMENT)
        .by_copy()
        .execute(&mut *tx)
        .await?;
        let args = arg_rows(requests);
        InsertRows::new("request_args", "request_id, name, value")
            .column(Values::Text(args.iter().map(|row| row.0).collect()))
            .column(Values::Text(args.iter().map(|row| row.1).collect()))
            .column(Values::Text(
                args.iter().map(|row| row.2.as_str()).collect(),
            ))
            .by_copy()
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// `select` (a query of `requests`) for the requests `ids` (one statement's worth:
    /// callers chunk by [`REQUEST_ROWS_PER_STATEMENT`]), then `after` (such as a lock).
    pub(super) fn requests_in<'a>(
        select: &str,
        ids: impl Iterator<Item = &'a str>,
        after: &str,
    ) -> Statement<'a> {
        let mut query = Statement::build(select);
        query
            .push(" WHERE request_id IN (")
            .push_list(ids)
            .push(")")
            .push(after);
        query
    }

    /// The rows of each of `selects` (reads of thousands of requests, a few hundred a
    /// statement), [`READS_AT_ONCE`] of them at a time, in their order.
    pub(super) async fn fetch_at_once<'a>(
        &self,
        selects: impl Iterator<Item = Statement<'a>>,
    ) -> Result<Vec<Vec<DB::Row>>, Error> {
        // In groups (a stream's `buffered` here trips the compiler's proof that the
        // store's futures are `Send`).
        let mut selects: Vec<Statement<'a>> = selects.collect();
        let mut rows = Vec::with_capacity(selects.len());
        while !selects.is_empty() {
            let group: Vec<_> = selects
                .drain(..READS_AT_ONCE.min(selects.len()))
                .map(|select| select.fetch_all(&self.readers))
                .collect();
            rows.extend(futures_util::future::try_join_all(group).await?);
        }
        Ok(rows)
    }

    pub(super) fn request_from_row(row: &DB::Row) -> Result<Request, Error> {
        let time = |name: &str| -> Result<Option<DateTime<Utc>>, Error> {
            Ok(row.read::<Option<i64>>(name)?.map(from_micros))
        };
        Ok(Request {
            id: row.read("request_id")?,
            request_type: row.read("type")?,
            state: state_of(row.read("state")?)?,
            user: row.read("user_name")?,
            args: Vec::new(),
            created_at: time("created_at")?.unwrap_or_default(),
            started_at: time("started_at")?,
            finished_at: time("finished_at")?,
            job_chain: None,
            total_jobs: u64::try_from(row.read::<i64>("total_jobs")?).unwrap_or(0),
            finished_jobs: u64::try_from(row.read::<i64>("finished_jobs")?).unwrap_or(0),
            own_jobs: u64::try_from(row.read::<i64>("own_jobs")?).unwrap_or(0),
            // Counted from the job log when asked for (`Store::own_finished_jobs`).
            own_finished_jobs: 0,
            jr_url: row.read::<Option<String>>("jr_url")?.unwrap_or_default(),
            error: row.read("error")?,
            paused: row.read::<i32>("paused")? != 0,
            spec_version: row
                .read::<Option<String>>("spec_version")?
                .unwrap_or_default(),
            // Read from the chain and the job log when one request is asked for
            // (`rm::Manager::summarize_elements`).
            elements: Vec::new(),
        })
    }

    /// Sets each job of `chain` to its latest logged state and try.
    pub(super) async fn live_states(&self, chain: &mut JobChain) -> Result<(), Error> {
        for latest in self.latest_states(chain.request_id.as_str()).await? {
            if let Some(job) = chain.jobs.get_mut(&latest.job_id) {
                job.tries = latest.tries;
                job.state = latest.state;
            }
        }
        Ok(())
    }

    /// Each logged job's highest try and its state.
    pub(super) async fn latest_states(&self, request_id: &str) -> Result<Vec<JobState>, Error> {
        let sql = "SELECT job_id, try, state, name, type FROM job_log WHERE request_id = $1";
        let rows = self.rows_of_request(sql, request_id).await?;
        Self::latest_of(rows)
    }

    pub(crate) async fn job_states_among(
        &self,
        request_ids: &[String],
    ) -> Result<HashMap<String, Vec<JobState>>, Error> {
        let mut rows_of: HashMap<String, Vec<DB::Row>> = HashMap::new();
        let selects = request_ids.chunks(REQUEST_ROWS_PER_STATEMENT).map(|chunk| {
            Self::requests_in(
                "SELECT request_id, job_id, try, state, name, type FROM job_log",
                chunk.iter().map(String::as_str),
                "",
            )
        });
        for rows in self.fetch_at_once(selects).await? {
            for row in rows {
                rows_of
                    .entry(row.read("request_id")?)
                    .or_default()
                    .push(row);
            }
        }
        rows_of
            .into_iter()
            .map(|(request_id, rows)| Ok((request_id, Self::latest_of(rows)?)))
            .collect()
    }

    /// Each job's latest try and its state, from its job log rows.
    pub(super) fn latest_of(rows: Vec<DB::Row>) -> Result<Vec<JobState>, Error> {
        let mut latest: HashMap<String, JobState> = HashMap::with_capacity(rows.len());
        for row in rows {
            let job_id: String = row.read("job_id")?;
            let tries = u32::try_from(row.read::<i32>("try")?).unwrap_or(0);
            let state = state_of(row.read("state")?)?;
            match latest.get_mut(&job_id) {
                Some(known) if known.tries > tries => {}
                Some(known) => {
                    known.tries = tries;
                    known.state = state;
                }
                None => {
                    let name: String = row.read("name")?;
                    let job_type: String = row.read("type")?;
                    latest.insert(
                        job_id.clone(),
                        JobState {
                            job_id,
                            tries,
                            state,
                            wrapper: proto::is_wrapper(&name, &job_type),
                        },
                    );
                }
            }
        }
        Ok(latest.into_values().collect())
    }

    pub(super) async fn archived_chain(&self, request_id: &str) -> Result<JobChain, Error> {
        from_json("stored job chain", &self.job_chain_json(request_id).await?)
    }

    pub(crate) async fn job_chain_json(&self, request_id: &str) -> Result<String, Error> {
        let row = Statement::new("SELECT job_chain FROM request_archives WHERE request_id = $1")
            .bind(request_id)
            .fetch_optional(&self.readers)
            .await?
            .ok_or_else(|| Error::not_found("job chain of request", request_id))?;
        Ok(row.read("job_chain")?)
    }

    pub(crate) async fn create_request(
        &self,
        request: &Request,
        create_request: &CreateRequest,
        created: Option<&AuditEvent>,
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        Self::create_in(&mut tx, &[((request, create_request, None), created)]).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn get_request(
        &self,
        request_id: &str,
        with_chain: bool,
    ) -> Result<Request, Error> {
        let row = Statement::new(
            "SELECT r.request_id, r.type, r.state, r.user_name, r.created_at, r.started_at, r.finished_at, \
             r.total_jobs, r.own_jobs, r.finished_jobs, r.jr_url, r.error, r.paused, r.spec_version, a.args \
             FROM requests r LEFT JOIN request_archives a ON a.request_id = r.request_id \
             WHERE r.request_id = $1",
        )
        .bind(request_id)
        .fetch_optional(&self.readers)
        .await?
        .ok_or_else(|| Error::not_found("request", request_id))?;
        let mut request = Self::request_from_row(&row)?;
        if let Some(args) = row
            .read::<Option<String>>("args")?
            .filter(|a| !a.is_empty())
        {
            request.args = from_json("stored request args", &args)?;
        }
        if with_chain {
            request.job_chain = Some(self.job_chain(request_id).await?);
        }
        Ok(request)
    }

    pub(crate) async fn ended_among(&self, request_ids: &[String]) -> Result<Vec<String>, Error> {
        let mut ended = Vec::new();
        for chunk in request_ids.chunks(REQUEST_ROWS_PER_STATEMENT) {
            let select = Self::requests_in(
                "SELECT request_id, state FROM requests",
                chunk.iter().map(String::as_str),
                "",
            );
            for row in select.fetch_all(&self.readers).await? {
                if state_of(row.read("state")?)?.is_finished() {
                    ended.push(row.read("request_id")?);
                }
            }
        }
        Ok(ended)
    }

    pub(crate) async fn requests_among(
        &self,
        request_ids: &[String],
    ) -> Result<Vec<Request>, Error> {
        let selects = request_ids.chunks(REQUEST_ROWS_PER_STATEMENT).map(|chunk| {
            Self::requests_in(
                "SELECT request_id, type, state, user_name, created_at, started_at, finished_at, total_jobs, own_jobs, finished_jobs, jr_url, error, paused, spec_version \
                 FROM requests",
                chunk.iter().map(String::as_str),
                "",
            )
        });
        let mut requests = Vec::with_capacity(request_ids.len());
        for rows in self.fetch_at_once(selects).await? {
            for row in rows {
                requests.push(Self::request_from_row(&row)?);
            }
        }
        Ok(requests)
    }

    pub(crate) async fn job_chain(&self, request_id: &str) -> Result<JobChain, Error> {
        let mut chain = self.archived_chain(request_id).await?;
        self.live_states(&mut chain).await?;
        Ok(chain)
    }

    pub(crate) async fn find_requests(
        &self,
        filter: &RequestFilter,
    ) -> Result<Vec<Request>, Error> {
        let mut query = match filter.since {
            // PostgreSQL's month partitions: a Merge Append in `created_at` order reads
            // every older month whole for rows finished after `since` (each partition's
            // scan looks for its first such row; 195 ms at a million requests): the
            // requests created since then are read so, those created before and
            // finished after it (few: those running at `since`) by the index on
            // `finished_at`, which finds none in an older month at once. MySQL's
            // partitions are merged row by row in index order and filtered after, so
            // the one scan stops after its page there (a union read MariaDB's table
            // whole for the second part: 161 ms at a million).
            Some(since) if DB::MONTH_PARTITIONS == MonthPartitions::Postgres => {
                let mut query = Statement::build(format!(
                    "SELECT {FOUND} FROM ((SELECT {FOUND} FROM requests WHERE created_at >= "
                ));
                query.push_param(micros(since));
                Self::push_finished_since(&mut query, since);
                Self::push_find_conditions(&mut query, filter);
                query.push(" ORDER BY created_at DESC, request_id ASC");
                if filter.limit > 0 {
                    let page = filter.limit.saturating_add(filter.offset);
                    query.push(" LIMIT ").push_param(count(page));
                }
                query.push(&format!(
                    ") UNION ALL (SELECT {FOUND} FROM requests WHERE created_at < "
                ));
                query
                    .push_param(micros(since))
                    .push(" AND (finished_at > ")
                    .push_param(micros(since))
                    .push(" OR finished_at IS NULL)");
                Self::push_find_conditions(&mut query, filter);
                query.push(")) page");
                query
            }
            since => {
                let mut query =
                    Statement::build(format!("SELECT {FOUND} FROM requests WHERE 1 = 1"));
                if let Some(since) = since {
                    Self::push_finished_since(&mut query, since);
                }
                Self::push_find_conditions(&mut query, filter);
                query
            }
        };
        query.push(" ORDER BY created_at DESC, request_id ASC");
        if filter.limit > 0 {
            query.push(" LIMIT ").push_param(count(filter.limit));
            query.push(" OFFSET ").push_param(count(filter.offset));
        }
        let rows = query.fetch_all(&self.readers).await?;
        rows.iter().map(Self::request_from_row).collect()
    }

    /// Not finished before `since`: written so that no index on `finished_at` serves
    /// it in one table (an OR of two index ranges, then every match sorted: 137 ms on a
    /// million requests for two months of them), and the page is read in `created_at`
    /// order from `until` down, stopping after its rows.
    fn push_finished_since(query: &mut Statement<'_>, since: DateTime<Utc>) {
        query
            .push(" AND COALESCE(finished_at, ")
            .push_param(i64::MAX)
            .push(") > ")
            .push_param(micros(since));
    }

    /// The conditions of `filter` but `since` (and its page), each ` AND …`.
    fn push_find_conditions<'q>(query: &mut Statement<'q>, filter: &'q RequestFilter) {
        if let Some(request_type) = &filter.request_type {
            query.push(" AND type = ").push_param(request_type.as_str());
        }
        if let Some(user) = &filter.user {
            query.push(" AND user_name = ").push_param(user.as_str());
        }
        if !filter.states.is_empty() {
            query
                .push(" AND state IN (")
                .push_list(filter.states.iter().map(|state| state_value(*state)))
                .push(")");
        }
        // `IN` lets the database start from the index on arg values and sort the few
        // matches, instead of probing the args of every request by age.
        for (name, value) in &filter.args {
            query
                .push(" AND request_id IN (SELECT request_id FROM request_args WHERE name = ")
                .push_param(name.as_str())
                .push(" AND ");
            DB::push_value_match(query, value.clone());
            query.push(")");
        }
        if let Some(until) = filter.until {
            query.push(" AND created_at < ").push_param(micros(until));
        }
        // After a page's last request (keyset paging): the range on `created_at` lets
        // the database start in its index where that page ended, skipping nothing.
        if let Some(after) = &filter.after {
            let at = micros(after.created_at);
            query
                .push(" AND created_at <= ")
                .push_param(at)
                .push(" AND (created_at < ")
                .push_param(at)
                .push(" OR request_id > ")
                .push_param(after.request_id.as_str())
                .push(")");
        }
    }

    pub(crate) async fn running_jr_urls(&self) -> Result<Vec<String>, Error> {
        let rows = Statement::new(
            "SELECT DISTINCT jr_url FROM requests WHERE state = $1 AND jr_url IS NOT NULL ORDER BY jr_url",
        )
        .bind(state_value(State::Running))
        .fetch_all(&self.readers)
        .await?;
        rows.iter().map(|row| Ok(row.read("jr_url")?)).collect()
    }

    pub(crate) async fn count_requests(
        &self,
        states: &[State],
        at_most: Option<u64>,
    ) -> Result<Vec<(State, u64)>, Error> {
        let mut counts = Vec::with_capacity(states.len());
        for &state in states {
            let count = match at_most {
                None => Statement::new("SELECT COUNT(*) AS n FROM requests WHERE state = $1")
                    .bind(state_value(state)),
                // The index read stops one past the bound.
                Some(at_most) => Statement::new(
                    "SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM requests WHERE state = $1 LIMIT $2) capped",
                )
                .bind(state_value(state))
                .bind(count(at_most.saturating_add(1))),
            };
            let row = count.fetch_one(&self.readers).await?;
            let n: i64 = row.read("n")?;
            if n > 0 {
                counts.push((state, u64::try_from(n).unwrap_or(0)));
            }
        }
        Ok(counts)
    }

    pub(crate) async fn ping(&self) -> Result<(), Error> {
        Statement::new("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

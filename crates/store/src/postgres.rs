//! The shared store: PostgreSQL, for several Request Managers and Job Runners.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::Postgres;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgQueryResult};

use crate::Error;
use crate::sql::{Backend, BoxFuture, InsertRows, SqlStore, Statement, Values};

/// Spindle's PostgreSQL migrations, without sqlx's lock (see [`migrate`]).
pub(crate) fn migrator() -> sqlx::migrate::Migrator {
    crate::migrations::spindle(sqlx::migrate!("migrations/postgres"))
}

/// Brings the schema up to date in one transaction that holds a transaction's advisory
/// lock, so that two Request Managers starting at once migrate one after the other.
/// sqlx's own lock is a session's (`pg_advisory_lock`, then `pg_advisory_unlock`):
/// through PgBouncer's transaction pooling the two may reach different server
/// connections, and the lock would stay held by one of them.
async fn migrate(pool: &sqlx::PgPool) -> Result<(), Error> {
    // Outside the transaction: on a new schema the table is not there, and a failed
    // statement would end the transaction.
    let applied: Vec<i64> = sqlx::query_scalar(crate::migrations::APPLIED)
        .fetch_all(pool)
        .await
        .unwrap_or_default();
    crate::migrations::note_unknown(&applied, &migrator());
    let mut tx = pool.begin().await.map_err(Error::from)?;
    // "spindle-migrate" in a number.
    sqlx::query("SELECT pg_advisory_xact_lock(7309483712540262)")
        .execute(&mut *tx)
        .await
        .map_err(Error::from)?;
    migrator().run(&mut *tx).await.map_err(Error::Migrate)?;
    tx.commit().await.map_err(Error::from)?;
    Ok(())
}

/// Spindle's store in a PostgreSQL database.
pub type PostgresStore = SqlStore<Postgres>;

impl Backend for Postgres {
    const UPDATE_RETURNING: bool = true;

    /// Held until the transaction ends; another Request Manager's retention round on
    /// the same schema skips its turn instead of waiting (the key: a number, and the
    /// schema's name hashed, so that Spindles in other schemas of one database, or
    /// tests, go on). A transaction's lock, so that it works through PgBouncer's
    /// transaction pooling.
    const RETENTION_LOCK_SQL: Option<&'static str> = Some(
        "SELECT 1 AS got WHERE pg_try_advisory_xact_lock(1268791544, hashtext(current_schema()))",
    );

    const MONTH_PARTITIONS: crate::sql::MonthPartitions = crate::sql::MonthPartitions::Postgres;

    /// `Seq Scan on t` reads table `t` whole (a partition of it, `t_m202612` or
    /// `t_default`, is named as `t`), unless its statistics say it is empty (cost
    /// 0.00..0.00: a month partition not yet begun, where nothing is faster).
    fn plan_line(row: &sqlx::postgres::PgRow) -> Result<(String, Option<String>), sqlx::Error> {
        use crate::sql::Columns as _;
        let line: String = row.read("QUERY PLAN")?;
        let whole = line
            .split_once("Seq Scan on ")
            .filter(|(_, rest)| !rest.contains("(cost=0.00..0.00 "))
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(|table| crate::sql::partitioned_table(table).to_owned());
        Ok((line, whole))
    }

    /// A B-tree entry holds at most about 2.7 KB, and arg values (a list of hosts) are
    /// often longer, so the index is on the MD5 of the value (migration 0002): the hash
    /// finds the candidates through the index, the value itself decides.
    fn push_value_match(query: &mut Statement<'_>, text: String) {
        let value = query.param(text);
        query.push(&format!("md5(value) = md5({value}) AND value = {value}"));
    }

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    /// One statement whatever the count of rows: each column bound as an array and the
    /// rows made by `UNNEST` (a statement of 12,000 params per 1,000 rows took three times
    /// the time, most of it binding and planning them). Rows known new
    /// ([`InsertRows::by_copy`]) go by `COPY`, in pieces of [`COPY_PIECE`] bytes.
    fn insert_rows<'e, 'q: 'e>(
        conn: &'e mut sqlx::PgConnection,
        rows: InsertRows<'q>,
    ) -> BoxFuture<'e, Result<u64, sqlx::Error>> {
        if rows.by_copy {
            let copied = rows.copy_data(COPY_PIECE);
            return Box::pin(async move {
                let (statement, pieces) = copied.map_err(|err| sqlx::Error::Encode(err.into()))?;
                let mut copy = conn.copy_in_raw(&statement).await?;
                for piece in pieces {
                    if let Err(err) = copy.send(piece).await {
                        // The server is told the copy failed, so that the connection is
                        // usable again; the error is the send's.
                        let _ = copy.abort(err.to_string()).await;
                        return Err(err);
                    }
                }
                copy.finish().await
            });
        }
        let sql = rows.unnest_sql::<Postgres>(|column| match column {
            Values::Text(_) => "text[]",
            Values::Small(_) => "int2[]",
            Values::Int(_) => "int4[]",
            Values::Big(_) | Values::MaybeBig(_) => "int8[]",
        });
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for column in rows.values {
            query = match column {
                Values::Text(values) => query.bind(values),
                Values::Small(values) => query.bind(values),
                Values::Int(values) => query.bind(values),
                Values::Big(values) => query.bind(values),
                Values::MaybeBig(values) => query.bind(values),
            };
        }
        Box::pin(async move { Ok(query.execute(conn).await?.rows_affected()) })
    }

    crate::sql::runs_statements!();
}

/// Bytes of `COPY` data a message carries, about.
const COPY_PIECE: usize = 1 << 20;

/// How long a call waits for a connection once the store is open.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

impl SqlStore<Postgres> {
    /// Connects to `url` and brings the schema up to date. With `schema`, every table lives
    /// in that schema (it must exist), so that several Spindles — or tests — share one
    /// database.
    pub async fn connect(url: &str, schema: Option<&str>) -> Result<PostgresStore, Error> {
        PostgresStore::connect_with_timeout(url, schema, Duration::from_secs(10)).await
    }

    /// [`PostgresStore::connect`], giving up (with [`Error::Unavailable`]) when no
    /// connection could be made within `timeout`.
    pub async fn connect_with_timeout(
        url: &str,
        schema: Option<&str>,
        timeout: Duration,
    ) -> Result<PostgresStore, Error> {
        let settings = crate::sql::pool_settings(url)?;
        let mut options = PgConnectOptions::from_str(&settings.url)
            .map_err(|err| Error::Config(format!("invalid PostgreSQL URL: {err}")))?;
        if let Some(schema) = schema {
            options = options.options([("search_path", schema)]);
        }
        // At start, the server may still be coming up: wait for it up to `timeout`. Later
        // a call waits at most ACQUIRE_TIMEOUT for a connection, so that a database that
        // is down makes callers hear "unavailable" (HTTP 503) soon rather than hang.
        let pool = crate::sql::connect_within(timeout, || {
            PgPoolOptions::new()
                .max_connections(settings.max_connections)
                .acquire_timeout(ACQUIRE_TIMEOUT.min(timeout))
                .connect_with(options.clone())
        })
        .await?;
        migrate(&pool).await?;
        let store = PostgresStore {
            readers: pool.clone(),
            pool,
            call_timeout: settings.call_timeout,
            months: Default::default(),
        };
        // This month's partitions and the next two's (migration 0105); the background
        // rounds try again, and meanwhile new requests go to the default partitions.
        if let Err(err) = store.prepare_partitions(chrono::Utc::now()).await {
            tracing::warn!(error = %err, "the request tables' month partitions could not be made");
        }
        Ok(store)
    }
}

//! The shared store on MySQL (8.0+) or MariaDB (10.6+), for teams that run MySQL already
//! (Spin Cycle's own database). Connections read committed data (as PostgreSQL's do), in
//! utf8mb4 with a binary collation, quote identifiers with `"` as the SQL standard (and
//! the other two) do (`ANSI_QUOTES`: `"exit"` is a column and a MariaDB keyword), and wait
//! at most [`LOCK_WAIT`] for a row lock.
//!
//! Versions: `FOR UPDATE SKIP LOCKED` (claims of suspended chains, the retention's lock
//! row) needs MySQL 8.0.1 or MariaDB 10.6; expression defaults (`DEFAULT ('')` on TEXT
//! columns) MySQL 8.0.13 or MariaDB 10.2. Neither has `UPDATE … RETURNING`, so an update
//! that answers rows locks and reads them in its transaction.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlQueryResult};
use sqlx::{Executor as _, MySql};

use crate::Error;
use crate::sql::{Backend, Rendered, SqlStore, Statement, ValuesUpdate, positional};

/// Spindle's MySQL migrations, without sqlx's lock (see [`migrate`]).
pub(crate) fn migrator() -> sqlx::migrate::Migrator {
    crate::migrations::spindle(sqlx::migrate!("migrations/mysql"))
}

/// Spindle's store in a MySQL or MariaDB database.
pub type MysqlStore = SqlStore<MySql>;

/// How long a statement waits for a row lock before the database answers with an error
/// that [`Error::is_transient`] (InnoDB's default is 50 s).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How long a call waits for a connection once the store is open.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

impl Backend for MySql {
    const UPDATE_RETURNING: bool = false;

    /// The lock row of migration 0001: held until the transaction ends; another Request
    /// Manager's retention round skips it (no row) instead of waiting.
    const RETENTION_LOCK_SQL: Option<&'static str> =
        Some("SELECT 1 AS got FROM spindle_locks WHERE name = 'retention' FOR UPDATE SKIP LOCKED");

    const MONTH_PARTITIONS: crate::sql::MonthPartitions = crate::sql::MonthPartitions::Mysql;

    /// A row per table read, its access type `ALL` a read of the whole table (`index`
    /// walks an index in its order; `ref`, `range`, `eq_ref`, `const` seek in one).
    fn plan_line(row: &sqlx::mysql::MySqlRow) -> Result<(String, Option<String>), sqlx::Error> {
        use crate::sql::Columns as _;
        let table = row.read::<Option<String>>("table")?.unwrap_or_default();
        let access = row.read::<Option<String>>("type")?.unwrap_or_default();
        let key = row.read::<Option<String>>("key")?.unwrap_or_default();
        let extra = row.read::<Option<String>>("Extra")?.unwrap_or_default();
        let line = format!("{table}: {access} key={key} {extra}")
            .trim_end()
            .to_owned();
        Ok((line, (access == "ALL").then_some(table)))
    }

    /// MySQL's placeholders are `?`, taken in order.
    fn render(sql: &str) -> Option<Rendered> {
        Some(positional(sql))
    }

    /// `INSERT IGNORE` skips a row whose key exists (and counts it as not affected).
    fn skip_duplicates(insert: &str, _key: &str) -> String {
        insert.replacen("INSERT INTO", "INSERT IGNORE INTO", 1)
    }

    /// A derived table: the first row names the columns.
    fn values_table(rows: &[Vec<String>]) -> String {
        let rows: Vec<String> = rows
            .iter()
            .enumerate()
            .map(|(n, row)| {
                let columns: Vec<String> = row
                    .iter()
                    .enumerate()
                    .map(|(column, value)| {
                        if n == 0 {
                            format!("{value} AS column{}", column + 1)
                        } else {
                            value.clone()
                        }
                    })
                    .collect();
                format!("SELECT {}", columns.join(", "))
            })
            .collect();
        format!("({})", rows.join(" UNION ALL "))
    }

    /// A multi-table UPDATE joined to the rows of values.
    fn update_from_values(update: &ValuesUpdate<'_>) -> String {
        format!(
            "UPDATE {} JOIN {} AS v ON {} SET {} WHERE {}",
            update.table,
            Self::values_table(&update.rows),
            update.join,
            update.set,
            update.filter
        )
    }

    /// The index is on the MD5 of the value (a stored column: arg values are often longer
    /// than an index entry); the hash finds the candidates, the value decides.
    fn push_value_match(query: &mut Statement<'_>, text: String) {
        let value = query.param(text);
        query.push(&format!(
            "value_hash = UNHEX(MD5({value})) AND value = {value}"
        ));
    }

    fn rows_affected(result: &MySqlQueryResult) -> u64 {
        // sqlx asks for found rows: an UPDATE counts the rows it matched, as PostgreSQL.
        result.rows_affected()
    }

    crate::sql::runs_statements!();
}

/// Brings the schema up to date, one process at a time. MySQL runs DDL outside
/// transactions, so a migration whose process was killed halfway stays marked as not
/// successful (sqlx then refuses to go on); Spindle's MySQL migrations can run again
/// from the start, so such a mark is removed and the migration run again, under a lock
/// of Spindle's own that a killed process releases with its connection.
async fn migrate(pool: &sqlx::MySqlPool) -> Result<(), Error> {
    let mut conn = pool.acquire().await?;
    // A long wait rather than "forever" (-1), which MariaDB does not take (it answers
    // NULL at once; sqlx's own migration lock asks for that, hence this one).
    let locked: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK('spindle_migrations', 600)")
        .fetch_one(&mut *conn)
        .await?;
    if locked != Some(1) {
        return Err(Error::Config(
            "another process has been migrating the schema for 10 minutes; is one stuck?"
                .to_owned(),
        ));
    }
    let migrated = async {
        let tracked: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name = '_sqlx_migrations'",
        )
        .fetch_one(&mut *conn)
        .await?;
        if tracked > 0 {
            let interrupted = sqlx::query("DELETE FROM _sqlx_migrations WHERE success = FALSE")
                .execute(&mut *conn)
                .await?;
            if interrupted.rows_affected() > 0 {
                tracing::warn!("running again a schema migration that was interrupted");
            }
            let applied: Vec<i64> = sqlx::query_scalar(crate::migrations::APPLIED)
                .fetch_all(&mut *conn)
                .await?;
            crate::migrations::note_unknown(&applied, &migrator());
        }
        migrator().run(&mut *conn).await.map_err(Error::Migrate)
    }
    .await;
    let released = sqlx::query("SELECT RELEASE_LOCK('spindle_migrations')")
        .execute(&mut *conn)
        .await;
    migrated?;
    released?;
    Ok(())
}

impl SqlStore<MySql> {
    /// Connects to `url` (`mysql://USER:PASSWORD@HOST:PORT/DATABASE`; the database must
    /// exist) and brings the schema up to date.
    pub async fn connect(url: &str) -> Result<MysqlStore, Error> {
        MysqlStore::connect_with_timeout(url, Duration::from_secs(10)).await
    }

    /// [`MysqlStore::connect`], giving up (with [`Error::Unavailable`]) when no
    /// connection could be made within `timeout`.
    pub async fn connect_with_timeout(url: &str, timeout: Duration) -> Result<MysqlStore, Error> {
        let settings = crate::sql::pool_settings(url)?;
        let url = settings.url.as_str();
        let options = MySqlConnectOptions::from_str(url)
            .map_err(|err| Error::Config(format!("invalid MySQL URL: {err}")))?
            .charset("utf8mb4")
            .collation("utf8mb4_bin");
        if options.get_database().is_none_or(str::is_empty) {
            return Err(Error::Config(format!(
                "MySQL URL {:?} names no database; expected mysql://USER:PASSWORD@HOST:PORT/DATABASE",
                crate::redacted(url)
            )));
        }
        // As PostgreSQL's: wait for a server coming up at start; later a call waits at
        // most ACQUIRE_TIMEOUT for a connection, so that a database that is down makes
        // callers hear "unavailable" (HTTP 503) soon rather than hang.
        let pool = crate::sql::connect_within(timeout, || {
            MySqlPoolOptions::new()
                .max_connections(settings.max_connections)
                .acquire_timeout(ACQUIRE_TIMEOUT.min(timeout))
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                            .await?;
                        conn.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
                            .await?;
                        conn.execute(sqlx::AssertSqlSafe(format!(
                            "SET SESSION innodb_lock_wait_timeout = {}",
                            LOCK_WAIT.as_secs()
                        )))
                        .await?;
                        Ok(())
                    })
                })
                .connect_with(options.clone())
        })
        .await?;
        migrate(&pool).await?;
        let store = MysqlStore {
            readers: pool.clone(),
            pool,
            call_timeout: settings.call_timeout,
            months: Default::default(),
        };
        // This month's partitions and the next two's (migration 0106); the background
        // rounds try again, and meanwhile new requests go to `_default`.
        if let Err(err) = store.prepare_partitions(chrono::Utc::now()).await {
            tracing::warn!(error = %err, "the request tables' month partitions could not be made");
        }
        Ok(store)
    }
}

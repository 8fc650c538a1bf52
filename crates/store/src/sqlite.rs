//! The embedded store: one SQLite file, WAL journal with full synchronous commits (a
//! committed transaction survives a crash of the process or the machine), foreign keys
//! on, a busy timeout, and an application id that marks the file as Spindle's.

use std::path::Path;
use std::str::FromStr as _;
use std::time::Duration;

use sqlx::Sqlite;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};

use crate::Error;
use crate::sql::{Backend, Rendered, SqlStore, Statement, positional};

/// Marks a database file as Spindle's (`PRAGMA application_id`, "SPND").
const APPLICATION_ID: i64 = 0x5350_4E44;
const SET_APPLICATION_ID: &str = "PRAGMA application_id = 1397771844";

/// Read-only connections besides the writer (each is a thread of sqlx's driver).
const READERS: u32 = 2;

/// Spindle's SQLite migrations.
pub(crate) fn migrator() -> sqlx::migrate::Migrator {
    crate::migrations::spindle(sqlx::migrate!("migrations/sqlite"))
}

/// Spindle's store in an SQLite file.
pub type SqliteStore = SqlStore<Sqlite>;

/// SQLite runs one writer at a time (and Spindle one write connection), so there are
/// no rows to lock and no lock to take for retention.
impl Backend for Sqlite {
    const UPDATE_RETURNING: bool = true;

    const LOCK_ROWS: &'static str = "";

    const LOCK_ROWS_SKIP_LOCKED: &'static str = "";

    const RETENTION_LOCK_SQL: Option<&'static str> = None;

    /// Anonymous `?` placeholders, taken in order: sqlx binds a numbered one (`$N`) by
    /// asking SQLite its name, which SQLite finds by a scan of the statement's names, so
    /// that binding a multi-row INSERT of n params took time in n² (a 1,000-row job log
    /// INSERT, 12,000 params: 0.15 s, nearly all of `spindle import` into SQLite).
    fn render(sql: &str) -> Option<Rendered> {
        Some(positional(sql))
    }

    /// The index on (name, value) holds values of any length (long keys go to overflow
    /// pages), so the value is compared as it is.
    fn push_value_match(query: &mut Statement<'_>, text: String) {
        query.push("value = ").push_param(text);
    }

    const EXPLAIN: &'static str = "EXPLAIN QUERY PLAN ";

    /// `SCAN t` reads table `t` whole; `SCAN t USING INDEX i` walks an index in its
    /// order, `SEARCH t USING …` seeks in one.
    fn plan_line(row: &sqlx::sqlite::SqliteRow) -> Result<(String, Option<String>), sqlx::Error> {
        use crate::sql::Columns as _;
        let detail: String = row.read("detail")?;
        let whole = detail
            .strip_prefix("SCAN ")
            .filter(|rest| !rest.contains(" USING "))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        Ok((detail, whole))
    }

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    crate::sql::runs_statements!();
}

impl SqlStore<Sqlite> {
    /// Opens (creating if missing) the database at `path` and brings its schema up to
    /// date. A file that is not SQLite, or an SQLite database of another application, is
    /// refused with a message naming the file.
    pub async fn open(path: &Path) -> Result<SqliteStore, Error> {
        SqliteStore::open_with_busy_timeout(path, Duration::from_secs(5)).await
    }

    /// [`SqliteStore::open`], waiting at most `busy_timeout` for a lock held by another
    /// process before answering [`Error::Unavailable`].
    pub async fn open_with_busy_timeout(
        path: &Path,
        busy_timeout: Duration,
    ) -> Result<SqliteStore, Error> {
        let refused = |reason: String| Error::Refused {
            path: path.display().to_string(),
            reason,
        };
        // One process at a time checks and migrates the file (an advisory lock on it,
        // apart from SQLite's own locks): two that start on a new file at once would
        // both migrate it, or one would see the other's tables before they are marked.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|err| refused(err.to_string()))?;
        let locked = tokio::task::spawn_blocking(move || file.lock().map(|()| file))
            .await
            .map_err(|err| refused(format!("locking it failed: {err}")))?;
        file = locked.map_err(|err| refused(format!("it cannot be locked: {err}")))?;
        let mut header = [0u8; 16];
        let n = std::io::Read::read(&mut file, &mut header).unwrap_or(0);
        if n > 0 && (n < 16 || &header != b"SQLite format 3\0") {
            return Err(refused("it is not an SQLite database".to_owned()));
        }
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|err| Error::Config(err.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(busy_timeout);
        // One connection: SQLite has one writer at a time anyway, and a single connection
        // never meets a busy database inside a transaction.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await
            .map_err(|err| match Error::from(err) {
                err @ (Error::Database(_) | Error::Decode(_)) => {
                    refused(err.database_text().unwrap_or_default())
                }
                other => other,
            })?;
        let application_id: i64 = sqlx::query_scalar("PRAGMA application_id")
            .fetch_one(&pool)
            .await?;
        let n_tables: i64 =
            sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table'")
                .fetch_one(&pool)
                .await
                .map_err(|err| match Error::from(err) {
                    err @ Error::Database(_) => refused(err.database_text().unwrap_or_default()),
                    other => other,
                })?;
        if n_tables > 0 && application_id != APPLICATION_ID {
            return Err(refused(format!(
                "it holds tables of another application (application id {application_id}); expected a Spindle database or a new file"
            )));
        }
        let migrator = migrator();
        if n_tables > 0 {
            let applied: Vec<i64> = sqlx::query_scalar(crate::migrations::APPLIED)
                .fetch_all(&pool)
                .await
                .unwrap_or_default();
            crate::migrations::note_unknown(&applied, &migrator);
        }
        migrator
            .run(&pool)
            .await
            .map_err(|err| refused(format!("its schema cannot be brought up to date: {err}")))?;
        sqlx::query(SET_APPLICATION_ID).execute(&pool).await?;
        // Readers open once the schema is there; WAL lets them read the last commit
        // while the writer writes. Opened on demand, kept a while.
        let readers = SqlitePoolOptions::new()
            .max_connections(READERS)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.read_only(true).create_if_missing(false))
            .await?;
        drop(file);
        // An embedded file answers or fails on its own (busy_timeout bounds a wait for
        // the writer's lock): no call deadline.
        Ok(SqliteStore {
            pool,
            readers,
            call_timeout: None,
            months: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{Error, SqliteStore, Store};

    #[test]
    fn the_pragma_sets_the_application_id() {
        assert!(super::SET_APPLICATION_ID.ends_with(&format!(" {}", super::APPLICATION_ID)));
    }

    #[tokio::test]
    async fn a_file_that_is_not_sqlite_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.db");
        std::fs::write(&path, "these are my notes, not a database").unwrap();
        let err = SqliteStore::open(&path).await.unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(
            err.to_string().contains("notes.db")
                && err.to_string().contains("not an SQLite database"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "these are my notes, not a database",
            "left as it was"
        );
    }

    #[tokio::test]
    async fn another_applications_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        sqlx::query("CREATE TABLE customers (id INTEGER)")
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        let err = SqliteStore::open(&path).await.unwrap_err();
        assert!(
            err.to_string().contains("other.db") && err.to_string().contains("another application"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn migrations_run_once_and_reopening_keeps_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spindle.db");
        let store = SqliteStore::open(&path).await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(n, super::migrator().iter().count() as i64);
        assert_eq!(n, 22);
        let (request, create) = crate::tests::sample_request("r1");
        store.create_request(&request, &create, None).await.unwrap();
        // No clean shutdown: the connection is leaked as a crashing process would leave it.
        std::mem::forget(store);
        let store = SqliteStore::open(&path).await.unwrap();
        assert_eq!(
            store.get_request("r1", true).await.unwrap().job_chain,
            request.job_chain
        );
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(n, 22);
    }

    /// A claim of a suspended chain (the oldest unclaimed, ties by id) is one seek in
    /// `suspended_unclaimed` or `suspended_by_claim`: no scan and no sort of every
    /// suspended chain, which made resuming N chains after a restart cost N² (migrations
    /// 0101 and 0103, issue #51).
    #[tokio::test]
    async fn a_claim_of_a_suspended_chain_seeks_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("spindle.db"))
            .await
            .unwrap();
        let explain = format!("EXPLAIN QUERY PLAN {}", crate::sql::CLAIM);
        let plan: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(explain))
            .fetch_all(&store.pool)
            .await
            .unwrap()
            .iter()
            .map(|row| sqlx::Row::get::<String, _>(row, "detail"))
            .collect();
        let plan = plan.join("; ");
        assert!(
            (plan.contains("USING INDEX suspended_unclaimed")
                || plan.contains("USING INDEX suspended_by_claim"))
                && !plan.contains("TEMP B-TREE"),
            "{plan}"
        );
    }

    /// Another process (here: another connection) holding the write lock of `path`
    /// until it rolls back.
    async fn locked(path: &std::path::Path) -> sqlx::SqliteConnection {
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
        let mut other = <sqlx::SqliteConnection as sqlx::Connection>::connect_with(&options)
            .await
            .unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut other)
            .await
            .unwrap();
        other
    }

    #[tokio::test]
    async fn a_locked_database_is_a_retryable_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spindle.db");
        let store = SqliteStore::open_with_busy_timeout(&path, Duration::from_millis(100))
            .await
            .unwrap();
        let mut other = locked(&path).await;
        let (request, create) = crate::tests::sample_request("r1");
        let err = store
            .create_request(&request, &create, None)
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err}");
        assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
        sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        store.create_request(&request, &create, None).await.unwrap();
    }

    /// A group commit that meets a locked database gives every write in it a transient
    /// error (so each caller answers 503 and its sender tries again) and stores nothing;
    /// once the lock is gone the same writes go through.
    #[tokio::test]
    async fn a_locked_database_fails_a_whole_batch_as_transient() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spindle.db");
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(
            SqliteStore::open_with_busy_timeout(&path, Duration::from_millis(100))
                .await
                .unwrap(),
        );
        let batcher = crate::Batcher::spawn(store.clone(), crate::BatchOptions::default());
        let mut other = locked(&path).await;
        let new = |id: &str| {
            let (request, create_request) = crate::tests::sample_request(id);
            crate::NewRequest {
                request,
                create_request,
                created: None,
                locks: Vec::new(),
                priority: 0,
                locked: None,
                delivery: None,
                duplicate_of: None,
                secrets: Vec::new(),
                chain_json: None,
            }
        };
        let (a, b) = tokio::join!(
            batcher.create_request(new("r1")),
            batcher.create_request(new("r2"))
        );
        for res in [a, b] {
            let err = res.unwrap_err();
            // The batch's own error, not each write tried again alone (which would wait
            // out the busy timeout once per write).
            assert!(
                matches!(err, Error::Batch(_)) && err.is_transient(),
                "{err:?}"
            );
        }
        sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        assert!(matches!(
            store.get_request("r1", false).await,
            Err(Error::NotFound { .. })
        ));
        batcher.create_request(new("r1")).await.unwrap();
        assert_eq!(store.get_request("r1", false).await.unwrap().id, "r1");
    }
}

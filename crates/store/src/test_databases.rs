//! The databases the store's tests run on: the PostgreSQL and MySQL servers (a schema or
//! a database per test, skipped with a line saying so unless `SPINDLE_TEST_POSTGRES` or
//! `SPINDLE_TEST_MYSQL` is `required`), unique names, and direct SQL for states the
//! `Store` API cannot produce.

use crate::sql::Statement;

pub(crate) fn postgres_url() -> String {
    std::env::var("SPINDLE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A database server the tests may run on.
struct Server {
    /// Its name in the line that says its tests were skipped.
    name: &'static str,
    /// `SPINDLE_TEST_{var}=required` makes a missing server a failure;
    /// `SPINDLE_TEST_{var}_URL` names another server.
    var: &'static str,
    /// The default server's port on 127.0.0.1.
    port: u16,
}

/// Whether `server`'s tests run: when its URL is set or the default server answers.
/// `SPINDLE_TEST_{var}=required` (CI) makes a missing server a failure; otherwise the
/// tests skip, and one line says so.
fn available(server: &Server) -> bool {
    let Server { name, var, port } = server;
    let required = std::env::var(format!("SPINDLE_TEST_{var}")).is_ok_and(|v| v == "required");
    if std::env::var_os(format!("SPINDLE_TEST_{var}_URL")).is_some() || required {
        return true;
    }
    let answers = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], *port)),
        std::time::Duration::from_secs(2),
    )
    .is_ok();
    if !answers {
        // Straight to stderr: the test harness captures `eprintln!`.
        let line = format!(
            "store: {name} tests skipped: no server at 127.0.0.1:{port} (set SPINDLE_TEST_{var}_URL, or SPINDLE_TEST_{var}=required to fail instead)\n"
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
    answers
}

/// Whether the PostgreSQL tests run ([`available`]).
pub(crate) fn postgres_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        available(&Server {
            name: "PostgreSQL",
            var: "POSTGRES",
            port: 5432,
        })
    })
}

/// A store in a new schema of the test database, or `None` when the PostgreSQL tests
/// are skipped.
pub(crate) async fn postgres_store() -> Option<(crate::PostgresStore, String)> {
    if !postgres_available() {
        return None;
    }
    let schema = format!("spindle_test_{}", unique_suffix());
    let admin = sqlx::PgPool::connect(&postgres_url())
        .await
        .expect("the test PostgreSQL server answers");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\"")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let store = crate::PostgresStore::connect(&postgres_url(), Some(&schema))
        .await
        .unwrap();
    Some((store, schema))
}

pub(crate) async fn drop_schema(schema: &str) {
    if let Ok(admin) = sqlx::PgPool::connect(&postgres_url()).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA \"{schema}\" CASCADE"
        )))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

pub(crate) fn mysql_url() -> String {
    std::env::var("SPINDLE_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// Whether the MySQL tests run ([`available`]).
pub(crate) fn mysql_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        available(&Server {
            name: "MySQL",
            var: "MYSQL",
            port: 3306,
        })
    })
}

/// `url` (of the test server) naming `database` instead of its own.
pub(crate) fn mysql_url_of(database: &str) -> String {
    let url = mysql_url();
    let (server, _) = url.rsplit_once('/').expect("a MySQL URL names a database");
    format!("{server}/{database}")
}

/// A store in a new database of the test server, or `None` when the MySQL tests are
/// skipped.
pub(crate) async fn mysql_store() -> Option<(crate::MysqlStore, String)> {
    if !mysql_available() {
        return None;
    }
    let database = format!("spindle_test_{}", unique_suffix());
    let admin = sqlx::MySqlPool::connect(&mysql_url())
        .await
        .expect("the test MySQL server answers");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{database}`")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let store = crate::MysqlStore::connect(&mysql_url_of(&database))
        .await
        .unwrap();
    Some((store, database))
}

pub(crate) async fn drop_mysql_database(database: &str) {
    if let Ok(admin) = sqlx::MySqlPool::connect(&mysql_url()).await {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS `{database}`"
        )))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

/// Unique per process and call: pid, time and a counter.
pub(crate) fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}_{}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Direct SQL on a test's database, for states the Store API cannot produce.
#[derive(Clone)]
pub(crate) enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
    Mysql(sqlx::MySqlPool),
}

/// A transaction of the test's own, holding what it wrote until it commits.
pub(crate) enum HeldTransaction {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
    Mysql(sqlx::Transaction<'static, sqlx::MySql>),
}

impl HeldTransaction {
    pub(crate) async fn commit(self) {
        match self {
            HeldTransaction::Sqlite(tx) => tx.commit().await.unwrap(),
            HeldTransaction::Postgres(tx) => tx.commit().await.unwrap(),
            HeldTransaction::Mysql(tx) => tx.commit().await.unwrap(),
        }
    }
}

impl Raw {
    /// Hands `request_id` to the runner `instance` at the next epoch, as a recovery or a
    /// hand-over does, in a transaction that holds the request's row until committed.
    pub(crate) async fn hand_over_held(&self, request_id: &str, instance: &str) -> HeldTransaction {
        // The test's own constant values, written into the statement.
        let update = format!(
            "UPDATE requests SET jr_instance = '{instance}', epoch = epoch + 1 WHERE request_id = '{request_id}'"
        );
        match self {
            Raw::Sqlite(pool) => {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query(sqlx::AssertSqlSafe(update.clone()))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                HeldTransaction::Sqlite(tx)
            }
            Raw::Postgres(pool) => {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query(sqlx::AssertSqlSafe(update.clone()))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                HeldTransaction::Postgres(tx)
            }
            Raw::Mysql(pool) => {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query(sqlx::AssertSqlSafe(update.clone()))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                HeldTransaction::Mysql(tx)
            }
        }
    }

    /// The plan of the arg value search (as `find_requests` writes it), with sequential
    /// scans discouraged so that a small table shows whether an index can serve it.
    pub(crate) async fn arg_search_plan(&self, value: &str) -> String {
        use crate::Backend as _;
        const SELECT: &str = "SELECT request_id FROM request_args WHERE name = 'hosts' AND ";
        match self {
            Raw::Sqlite(pool) => {
                let mut query = Statement::build(format!("EXPLAIN QUERY PLAN {SELECT}"));
                sqlx::Sqlite::push_value_match(&mut query, value.to_owned());
                let rows = query.query::<sqlx::Sqlite>().fetch_all(pool).await.unwrap();
                rows.iter()
                    .map(|row| sqlx::Row::get::<String, _>(row, "detail"))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
            Raw::Postgres(pool) => {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query("SET LOCAL enable_seqscan = off")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                let mut query = Statement::build(format!("EXPLAIN {SELECT}"));
                sqlx::Postgres::push_value_match(&mut query, value.to_owned());
                let rows = query
                    .query::<sqlx::Postgres>()
                    .fetch_all(&mut *tx)
                    .await
                    .unwrap();
                rows.iter()
                    .map(|row| sqlx::Row::get::<String, _>(row, 0))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
            // The keys the optimizer could use (on a small table it may scan instead).
            Raw::Mysql(pool) => {
                let mut query = Statement::build(format!("EXPLAIN {SELECT}"));
                sqlx::MySql::push_value_match(&mut query, value.to_owned());
                let rows = query.query::<sqlx::MySql>().fetch_all(pool).await.unwrap();
                rows.iter()
                    .map(|row| {
                        sqlx::Row::get::<Option<String>, _>(row, "possible_keys")
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        }
    }

    /// Fresh statistics for the planner, as a database's own maintenance keeps them.
    pub(crate) async fn analyze(&self) {
        match self {
            Raw::Sqlite(pool) => sqlx::query("ANALYZE").execute(pool).await.map(|_| ()),
            Raw::Postgres(pool) => sqlx::query("ANALYZE").execute(pool).await.map(|_| ()),
            Raw::Mysql(pool) => sqlx::query(
                "ANALYZE TABLE requests, request_args, request_archives, job_log, job_tries",
            )
            .execute(pool)
            .await
            .map(|_| ()),
        }
        .expect("ANALYZE runs");
    }

    pub(crate) async fn exec(&self, sql: &'static str) {
        match self {
            Raw::Sqlite(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
            Raw::Postgres(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
            Raw::Mysql(pool) => sqlx::query(sql).execute(pool).await.map(|_| ()),
        }
        .expect("test SQL runs");
    }
}

//! The shared store: PostgreSQL, for several Request Managers and Job Runners.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::Error;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Spindle's store in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
}

impl PostgresStore {
    /// Claims the oldest unclaimed chain; rows another Request Manager is claiming at the
    /// same moment are skipped rather than waited for.
    pub(crate) const CLAIM_SQL: &'static str = "UPDATE suspended_job_chains SET rm_host = $1, updated_at = $2 \
         WHERE request_id = (SELECT request_id FROM suspended_job_chains WHERE rm_host IS NULL \
         ORDER BY suspended_at, request_id LIMIT 1 FOR UPDATE SKIP LOCKED) AND rm_host IS NULL \
         RETURNING suspended_job_chain";

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
        let mut options = PgConnectOptions::from_str(url)
            .map_err(|err| Error::Config(format!("invalid PostgreSQL URL: {err}")))?;
        if let Some(schema) = schema {
            options = options.options([("search_path", schema)]);
        }
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(timeout)
            .connect_with(options)
            .await?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|err| Error::Database(format!("migrating the schema: {err}")))?;
        Ok(PostgresStore { pool })
    }
}

crate::backend::impl_store!(PostgresStore, sqlx::Postgres);

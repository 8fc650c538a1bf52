//! The rules of `migrations/README.md`: the backends' first series stay as they were
//! applied, and from 0100 on one number is one change on every backend.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The first number of the common series.
const COMMON_FROM: u32 = 100;

const BACKENDS: [&str; 3] = ["sqlite", "postgres", "mysql"];

/// Each backend's migrations before the common series, as databases in use applied them.
const FIRST_SERIES: [(&str, &[&str]); 3] = [
    (
        "sqlite",
        &[
            "0001_requests.sql",
            "0002_job_output.sql",
            "0003_runners.sql",
            "0004_audit.sql",
            "0005_paused.sql",
            "0006_spec_versions.sql",
            "0007_approvals.sql",
            "0008_schedule_runs.sql",
            "0009_forget_tries_at_the_end.sql",
            "0010_own_jobs.sql",
            "0011_locks.sql",
            "0012_job_locks.sql",
            "0013_trigger_deliveries.sql",
            "0014_notifications.sql",
            "0015_request_secrets.sql",
        ],
    ),
    (
        "postgres",
        &[
            "0001_requests.sql",
            "0002_request_args_by_value_hash.sql",
            "0003_job_output.sql",
            "0004_runners.sql",
            "0005_audit.sql",
            "0006_paused.sql",
            "0007_spec_versions.sql",
            "0008_approvals.sql",
            "0009_schedule_runs.sql",
            "0010_forget_tries_at_the_end.sql",
            "0011_own_jobs.sql",
            "0012_locks.sql",
            "0013_job_locks.sql",
            "0014_trigger_deliveries.sql",
            "0015_notifications.sql",
            "0016_request_secrets.sql",
        ],
    ),
    (
        "mysql",
        &[
            "0001_schema.sql",
            "0002_own_jobs.sql",
            "0003_locks.sql",
            "0004_job_locks.sql",
            "0005_trigger_deliveries.sql",
            "0006_notifications.sql",
            "0007_request_secrets.sql",
        ],
    ),
];

/// A folder's migrations by number: file name, or an error naming a file that is not
/// `NNNN_description.sql`.
fn migrations(folder: &Path) -> Result<BTreeMap<u32, String>, String> {
    let mut found = BTreeMap::new();
    let entries =
        std::fs::read_dir(folder).map_err(|err| format!("{}: {err}", folder.display()))?;
    for entry in entries {
        let name = entry.map_err(|err| err.to_string())?.file_name();
        let name = name.to_string_lossy().into_owned();
        let number = name
            .strip_suffix(".sql")
            .and_then(|stem| stem.split_once('_'))
            .and_then(|(number, _)| number.parse::<u32>().ok())
            .ok_or_else(|| format!("{}/{name} is not NNNN_description.sql", folder.display()))?;
        if let Some(other) = found.insert(number, name.clone()) {
            return Err(format!(
                "{}: {other} and {name} share a number",
                folder.display()
            ));
        }
    }
    Ok(found)
}

/// What breaks the rules in `root` (a folder of backend folders), each as a sentence.
fn broken_rules(root: &Path) -> Vec<String> {
    let mut broken = Vec::new();
    let mut common: BTreeMap<u32, BTreeSet<(String, &str)>> = BTreeMap::new();
    for (backend, first) in FIRST_SERIES {
        let found = match migrations(&root.join(backend)) {
            Ok(found) => found,
            Err(err) => {
                broken.push(err);
                continue;
            }
        };
        let before: Vec<&str> = found
            .range(..COMMON_FROM)
            .map(|(_, name)| name.as_str())
            .collect();
        if before != first {
            broken.push(format!(
                "{backend}'s migrations below {COMMON_FROM:04} changed: {before:?}, expected {first:?} (add a new one from {COMMON_FROM:04} on, in every backend)"
            ));
        }
        for (number, name) in found.range(COMMON_FROM..) {
            common
                .entry(*number)
                .or_default()
                .insert((name.clone(), backend));
        }
    }
    for (number, files) in common {
        let names: BTreeSet<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
        let backends: BTreeSet<&str> = files.iter().map(|(_, backend)| *backend).collect();
        if names.len() != 1 || backends.len() != BACKENDS.len() {
            broken.push(format!(
                "migration {number:04} is {files:?}; expected one name in each of {BACKENDS:?}"
            ));
        }
    }
    broken
}

#[test]
fn one_number_is_one_change_on_every_backend() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    assert_eq!(broken_rules(&root), Vec::<String>::new());
}

#[test]
fn a_migration_missing_on_a_backend_or_added_below_the_common_series_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for (backend, first) in FIRST_SERIES {
        std::fs::create_dir(dir.path().join(backend)).unwrap();
        for name in first {
            std::fs::write(dir.path().join(backend).join(name), "").unwrap();
        }
    }
    assert_eq!(broken_rules(dir.path()), Vec::<String>::new());
    for backend in ["sqlite", "postgres"] {
        std::fs::write(dir.path().join(backend).join("0100_runs.sql"), "").unwrap();
    }
    std::fs::write(dir.path().join("mysql/0100_run.sql"), "").unwrap();
    std::fs::write(dir.path().join("mysql/0008_late.sql"), "").unwrap();
    let broken = broken_rules(dir.path());
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(
        broken[0].contains("mysql's migrations below 0100 changed"),
        "{broken:?}"
    );
    assert!(broken[1].starts_with("migration 0100 is"), "{broken:?}");
}

/// A migration no release of this binary knows, marked applied as a newer release's
/// would be.
const NEWER: &str = "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (9999, 'a newer release', TRUE, ";

/// Issue #48, point 4: a binary opens a schema that a newer release migrated further (a
/// roll back, or an old Request Manager restarted during an upgrade) and runs on it;
/// before, it refused to start ("migration 9999 was previously applied but is missing").
#[tokio::test]
async fn sqlite_opens_a_schema_a_newer_release_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spindle.db");
    let store = crate::SqliteStore::open(&path).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("{NEWER}x'00', 0)")))
        .execute(&store.pool)
        .await
        .unwrap();
    drop(store);
    let again = crate::SqliteStore::open(&path).await.unwrap();
    let applied: Vec<i64> = sqlx::query_scalar(crate::migrations::APPLIED)
        .fetch_all(&again.pool)
        .await
        .unwrap();
    assert_eq!(
        crate::migrations::note_unknown(&applied, &crate::sqlite::migrator()),
        [9999]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_opens_a_schema_a_newer_release_migrated() {
    let Some((store, schema)) = crate::tests::postgres_store().await else {
        return;
    };
    sqlx::query(sqlx::AssertSqlSafe(format!("{NEWER}'\\x00'::bytea, 0)")))
        .execute(&store.pool)
        .await
        .unwrap();
    let again = crate::PostgresStore::connect(&crate::tests::postgres_url(), Some(&schema)).await;
    assert!(again.is_ok(), "{:?}", again.err());
    crate::tests::drop_schema(&schema).await;
}

/// Migration 0104: PostgreSQL compresses a chain's JSON by lz4 where the server has it
/// (Debian's and CI's do), and a chain stored then is so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_compresses_chains_by_lz4_where_it_has_it() {
    let Some((store, schema)) = crate::tests::postgres_store().await else {
        return;
    };
    let has_lz4: bool = sqlx::query_scalar(
        "SELECT 'lz4' = ANY (enumvals) FROM pg_settings WHERE name = 'default_toast_compression'",
    )
    .fetch_optional(&store.pool)
    .await
    .unwrap()
    .unwrap_or(false);
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, a.attcompression::text FROM pg_attribute a \
         JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND a.attname IN ('job_chain', 'suspended_job_chain') \
         AND c.relname IN ('request_archives', 'suspended_job_chains') ORDER BY 1",
    )
    .bind(&schema)
    .fetch_all(&store.pool)
    .await
    .unwrap();
    let method = if has_lz4 { "l" } else { "" };
    assert_eq!(
        columns,
        [
            ("request_archives".to_owned(), method.to_owned()),
            ("suspended_job_chains".to_owned(), method.to_owned()),
        ]
    );
    if has_lz4 {
        // A chain of 100 KB, stored compressed (over TOAST's 2 KB) and by lz4.
        sqlx::query(
            "INSERT INTO requests (request_id, type, state, created_at) VALUES ('c1', 't', 1, 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO request_archives (request_id, create_request, args, job_chain) \
             VALUES ('c1', '{}', '[]', repeat('{\"id\":\"a1b2\",\"type\":\"noop\"},', 4000))",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        let stored: Option<String> = sqlx::query_scalar(
            "SELECT pg_column_compression(job_chain) FROM request_archives WHERE request_id = 'c1'",
        )
        .fetch_one(&store.pool)
        .await
        .unwrap();
        assert_eq!(stored.as_deref(), Some("lz4"));
    }
    crate::tests::drop_schema(&schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_opens_a_schema_a_newer_release_migrated() {
    let Some((store, database)) = crate::tests::mysql_store().await else {
        return;
    };
    sqlx::query(sqlx::AssertSqlSafe(format!("{NEWER}x'00', 0)")))
        .execute(&store.pool)
        .await
        .unwrap();
    let again = crate::MysqlStore::connect(&crate::tests::mysql_url_of(&database)).await;
    assert!(again.is_ok(), "{:?}", again.err());
    crate::tests::drop_mysql_database(&database).await;
}

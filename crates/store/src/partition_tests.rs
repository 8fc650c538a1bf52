//! The month partitions of the request tables, PostgreSQL's (migration 0105: made ahead
//! and for an import's months, never for a month the default partitions hold already)
//! and MySQL's (0106: contiguous ranges, made ahead by splitting `_default`): dropped
//! whole by retention when the month is wholly past it and all its requests finished
//! before it; the rest removed row by row as before.

use super::*;
use crate::{ImportedRequest, Removed};

/// An xid made at `made` (its counter `n`), as Spindle and Spin Cycle make ids.
fn xid_at(made: DateTime<Utc>, n: u8) -> String {
    let mut raw = [0u8; 12];
    raw[..4].copy_from_slice(&u32::try_from(made.timestamp()).unwrap().to_be_bytes());
    raw[11] = n;
    xid::Id(raw).to_string()
}

fn day(year: i32, month: u32, day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(year, month, day, 12, 0, 0).unwrap()
}

/// Request `id` created at `created`, in `state` (finished an hour later unless
/// RUNNING), with two job log entries.
fn imported(id: &str, created: DateTime<Utc>, state: State) -> ImportedRequest {
    let (mut request, create_request) = request(id, "deploy", "ann", created, "db1");
    request.state = state;
    request.started_at = Some(created);
    if state != State::Running {
        request.finished_at = Some(created + chrono::Duration::hours(1));
    }
    ImportedRequest {
        request,
        create_request,
        job_logs: vec![
            log(id, "a", 1, State::Complete),
            log(id, "b", 1, State::Complete),
        ],
        suspended: None,
    }
}

/// Three requests of January 2026, finished; three of February, two finished and one
/// RUNNING: their ids and their imports.
fn winter() -> (Vec<String>, Vec<String>, Vec<ImportedRequest>) {
    let january: Vec<String> = (0..3)
        .map(|n| xid_at(day(2026, 1, 5 + u32::from(n)), n))
        .collect();
    let february: Vec<String> = (0..3)
        .map(|n| xid_at(day(2026, 2, 5 + u32::from(n)), n))
        .collect();
    let mut imports: Vec<ImportedRequest> = january
        .iter()
        .map(|id| imported(id, day(2026, 1, 6), State::Complete))
        .collect();
    imports.extend(
        february
            .iter()
            .take(2)
            .map(|id| imported(id, day(2026, 2, 6), State::Stopped)),
    );
    imports.push(imported(&february[2], day(2026, 2, 7), State::Running));
    (january, february, imports)
}

/// The partitions of `requests`, sorted.
async fn partitions(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = 'requests'::regclass ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The partition of `table` that holds request `id`.
async fn holder(pool: &sqlx::PgPool, table: &str, id: &str) -> String {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT tableoid::regclass::text FROM {table} WHERE request_id = $1 LIMIT 1"
    )))
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn postgres_retention_drops_a_month_past_it_whole() {
    let Some((store, schema)) = postgres_store().await else {
        return;
    };
    let pool = store.pool.clone();
    // Connecting made this month's and the next two's; asking again makes none.
    let ahead: Vec<String> = crate::sql::Month::and_next(Utc::now(), 2)
        .into_iter()
        .map(|month| month.suffix)
        .collect();
    let made = partitions(&pool).await;
    for suffix in &ahead {
        assert!(made.contains(&format!("requests_{suffix}")), "{made:?}");
    }
    assert_eq!(store.prepare_partitions(Utc::now()).await.unwrap(), 0);

    // A request of June 2025 stored by a create, before any partition of its month:
    // it is in the default partition, and so is a later import of that month.
    let june = xid_at(day(2025, 6, 10), 1);
    let (request, create_request) = request(&june, "deploy", "ann", day(2025, 6, 10), "db1");
    store
        .create_request(&request, &create_request, None)
        .await
        .unwrap();
    sqlx::query("UPDATE requests SET state = $1, finished_at = $2 WHERE request_id = $3")
        .bind(i16::from(State::Complete.value()))
        .bind(day(2025, 6, 10).timestamp_micros())
        .bind(&june)
        .execute(&pool)
        .await
        .unwrap();
    let june_too = xid_at(day(2025, 6, 11), 2);
    let (january, february, winter) = winter();
    let mut batch = vec![
        imported(&june_too, day(2025, 6, 11), State::Fail),
        // Not an xid: the default partition.
        imported("h-old", day(2026, 1, 3), State::Complete),
    ];
    batch.extend(winter);
    assert_eq!(store.import_requests(&batch).await.unwrap().len(), 8);
    let made = partitions(&pool).await;
    assert!(made.contains(&"requests_m202601".to_owned()), "{made:?}");
    assert!(made.contains(&"requests_m202602".to_owned()), "{made:?}");
    assert!(!made.contains(&"requests_m202506".to_owned()), "{made:?}");
    assert_eq!(
        holder(&pool, "requests", &june_too).await,
        "requests_default"
    );
    assert_eq!(holder(&pool, "requests", "h-old").await, "requests_default");
    for table in ["requests", "request_archives", "request_args", "job_log"] {
        assert_eq!(
            holder(&pool, table, &january[1]).await,
            format!("{table}_m202601")
        );
    }
    // Rows of the other tables go with their month.
    sqlx::query(
        "INSERT INTO request_audit (request_id, at, action, user_name, address) VALUES ($1, 1, 'stop', 'ann', '')",
    )
    .bind(&january[0])
    .execute(&pool)
    .await
    .unwrap();

    // March 15th: January is wholly past, dropped in one call (the limit is no matter);
    // February has a RUNNING request, kept, its finished ones removed row by row, with
    // the default partition's.
    let cutoff = day(2026, 3, 15);
    let first = store.remove_finished(cutoff, 1).await.unwrap();
    assert_eq!(
        (first.requests, first.job_log_entries, first.months),
        (3, 6, 1)
    );
    assert!(
        !partitions(&pool)
            .await
            .contains(&"requests_m202601".to_owned())
    );
    for id in &january {
        assert!(matches!(
            store.get_request(id, false).await,
            Err(Error::NotFound { .. })
        ));
    }
    let audit: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM request_audit")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(audit, 0);
    let mut rows = 0;
    loop {
        let removed = store.remove_finished(cutoff, 10).await.unwrap();
        if removed.requests == 0 {
            break;
        }
        rows += removed.requests;
    }
    assert_eq!(rows, 5, "June's two, h-old, February's two finished");
    assert!(
        partitions(&pool)
            .await
            .contains(&"requests_m202602".to_owned())
    );
    assert_eq!(
        store.get_request(&february[2], false).await.unwrap().state,
        State::Running
    );
    assert_eq!(store.job_log(&february[2]).await.unwrap().len(), 2);
    drop_schema(&schema).await;
}

/// What was stored before migration 0105 stays where it was, in the `_before`
/// partitions, readable, its keys kept; an id of no xid goes to the default ones; the
/// months from the next on are made (this one is `_before`'s); and once all of it is
/// past the retention, `_before` goes whole.
#[tokio::test]
async fn postgres_keeps_what_was_stored_before_partitions_where_it_was() {
    if !postgres_available() {
        return;
    }
    let schema = format!("spindle_test_{}", unique_suffix());
    let admin = sqlx::PgPool::connect(&postgres_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\"")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let options: sqlx::postgres::PgConnectOptions = postgres_url().parse().unwrap();
    let pool = sqlx::PgPool::connect_with(options.options([("search_path", schema.as_str())]))
        .await
        .unwrap();
    let mut early = crate::postgres::migrator();
    early.migrations = early
        .migrations
        .iter()
        .filter(|migration| migration.version < 105)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    early.run(&pool).await.unwrap();
    let old = xid_at(day(2025, 6, 10), 1);
    for (id, finished) in [(old.as_str(), 1_749_556_800_000_000_i64), ("zzz", 1)] {
        sqlx::query(
            "INSERT INTO requests (request_id, type, state, created_at, finished_at) VALUES ($1, 't', $2, 1, $3)",
        )
        .bind(id)
        .bind(i16::from(State::Complete.value()))
        .bind(finished)
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO request_archives (request_id, create_request, args, job_chain) VALUES ($1, '{}', '[]', '{}')",
        )
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO job_log (request_id, job_id, try, name, type, state, started_at, finished_at, exit, error, stdout, stderr) \
             VALUES ($1, 'a', 1, 'a', 'noop', 3, 1, 1, 0, '', 'out', '')",
        )
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    }
    let store = crate::PostgresStore::connect(&postgres_url(), Some(&schema))
        .await
        .unwrap();
    for table in ["requests", "request_archives", "job_log"] {
        assert_eq!(holder(&pool, table, &old).await, format!("{table}_before"));
        assert_eq!(
            holder(&pool, table, "zzz").await,
            format!("{table}_default")
        );
    }
    assert_eq!(store.job_log(&old).await.unwrap()[0].stdout, "out");
    // The keys hold: no archive of an unknown request.
    let orphan = sqlx::query(
        "INSERT INTO request_archives (request_id, create_request, args, job_chain) VALUES ('nope', '{}', '[]', '{}')",
    )
    .execute(&pool)
    .await;
    assert!(orphan.is_err());
    let made = partitions(&pool).await;
    let [this, next, after] = crate::sql::Month::and_next(Utc::now(), 2)
        .try_into()
        .unwrap();
    assert!(
        !made.contains(&format!("requests_{}", this.suffix)),
        "{made:?}"
    );
    assert!(
        made.contains(&format!("requests_{}", next.suffix)),
        "{made:?}"
    );
    assert!(
        made.contains(&format!("requests_{}", after.suffix)),
        "{made:?}"
    );
    // The migration's xid floor is the store's.
    let floor: String = sqlx::query_scalar("SELECT spindle_xid_floor($1)")
        .bind(day(2027, 1, 1).timestamp() - 12 * 3600)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(floor, crate::sql::Month::new(2027, 1).lo);

    // Past all of `_before` (it ends with this month): it goes whole, then zzz.
    let cutoff = this.end() + chrono::Duration::hours(1);
    let first = store.remove_finished(cutoff, 10).await.unwrap();
    assert_eq!((first.requests, first.months), (1, 1));
    assert!(
        !partitions(&pool)
            .await
            .contains(&"requests_before".to_owned())
    );
    let second = store.remove_finished(cutoff, 10).await.unwrap();
    assert_eq!((second.requests, second.months), (1, 0));
    drop(store);
    pool.close().await;
    drop_schema(&schema).await;
}

/// The names of the partitions of MySQL's `table`, in order.
async fn mysql_partitions(pool: &sqlx::MySqlPool, table: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT PARTITION_NAME FROM information_schema.PARTITIONS \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY PARTITION_ORDINAL_POSITION",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Whether MySQL's partition `partition` of `table` holds request `id`.
async fn mysql_holds(pool: &sqlx::MySqlPool, table: &str, partition: &str, id: &str) -> bool {
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {table} PARTITION ({partition}) WHERE request_id = ?"
    )))
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap();
    n > 0
}

/// A pool on MySQL's `database` with the store's session settings (its DDL quotes
/// names as ANSI does).
async fn mysql_pool(database: &str) -> sqlx::MySqlPool {
    use sqlx::Executor as _;
    sqlx::mysql::MySqlPoolOptions::new()
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
                    .await?;
                Ok(())
            })
        })
        .connect(&crate::tests::mysql_url_of(database))
        .await
        .unwrap()
}

/// Retention on MySQL drops the oldest month wholly past it (`_before` first, as the
/// range of every id below the next), with the month's rows of the other tables; a
/// month with a RUNNING request is kept and its finished ones removed row by row.
#[tokio::test]
async fn mysql_retention_drops_a_month_past_it_whole() {
    let Some((store, database)) = crate::tests::mysql_store().await else {
        return;
    };
    let pool = store.pool.clone();
    // The migration's `_before` ended where next month begins; connecting to the
    // fresh database split it (it held nothing) to make this month, and made the next
    // two; asking again makes none.
    let [this, next, after] = crate::sql::Month::and_next(Utc::now(), 2)
        .try_into()
        .unwrap();
    for table in ["requests", "request_archives", "request_args", "job_log"] {
        assert_eq!(
            mysql_partitions(&pool, table).await,
            [
                format!("{table}_before"),
                format!("{table}_{}", this.suffix),
                format!("{table}_{}", next.suffix),
                format!("{table}_{}", after.suffix),
                format!("{table}_default"),
            ]
        );
    }
    assert_eq!(store.prepare_partitions(Utc::now()).await.unwrap(), 0);
    let last_hi: String = sqlx::query_scalar(
        "SELECT PARTITION_DESCRIPTION FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME = 'requests' AND PARTITION_NAME = ?",
    )
    .bind(format!("requests_{}", after.suffix))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(last_hi, format!("'{}'", after.hi));

    // As if the tables had been partitioned in December 2025: `_before` split into
    // its part before 2026 and a month each since.
    let mut months = vec![crate::sql::Month::new(2026, 1)];
    while months.last().unwrap().hi < this.lo {
        let month = months.last().unwrap().end();
        months.push(crate::sql::Month::and_next(month, 0).remove(0));
    }
    for table in ["requests", "request_archives", "request_args", "job_log"] {
        let parts: Vec<String> = months
            .iter()
            .map(|month| {
                format!(
                    "PARTITION {table}_{} VALUES LESS THAN ('{}')",
                    month.suffix, month.hi
                )
            })
            .collect();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {table} REORGANIZE PARTITION {table}_before INTO \
             (PARTITION {table}_before VALUES LESS THAN ('{}'), {})",
            months[0].lo,
            parts.join(", ")
        )))
        .execute(&pool)
        .await
        .unwrap();
    }

    let june = xid_at(day(2025, 6, 10), 1);
    let june_too = xid_at(day(2025, 6, 11), 2);
    let (january, february, winter) = winter();
    let mut batch = vec![
        imported(&june, day(2025, 6, 10), State::Complete),
        imported(&june_too, day(2025, 6, 11), State::Fail),
        // Not an xid: wherever its bytes sort.
        imported("h-old", day(2026, 1, 3), State::Complete),
    ];
    batch.extend(winter);
    // The import's months below January were made by splitting `_before`, which
    // held nothing yet; those from January on were there.
    assert_eq!(store.import_requests(&batch).await.unwrap().len(), 9);
    for table in ["requests", "request_archives", "request_args", "job_log"] {
        let made = mysql_partitions(&pool, table).await;
        assert_eq!(
            made[..3],
            [
                format!("{table}_before"),
                format!("{table}_m202506"),
                format!("{table}_m202507")
            ]
        );
        assert!(
            mysql_holds(&pool, table, &format!("{table}_m202506"), &june).await,
            "{table}"
        );
        assert!(
            mysql_holds(&pool, table, &format!("{table}_m202601"), &january[1]).await,
            "{table}"
        );
    }
    sqlx::query(
        "INSERT INTO request_audit (request_id, at, action, user_name, address) VALUES (?, 1, 'stop', 'ann', '')",
    )
    .bind(&january[0])
    .execute(&pool)
    .await
    .unwrap();

    // March 15th: the months up to January go whole, one a call (`_before` and June
    // to January: nine, June's two and January's three requests with their job log,
    // January's audit row with them); February has a RUNNING request and is kept, its
    // finished ones removed row by row with h-old. A dropped month's job log rows are
    // InnoDB's estimate, exact once the table is analyzed.
    sqlx::query("ANALYZE TABLE job_log")
        .execute(&pool)
        .await
        .unwrap();
    let cutoff = day(2026, 3, 15);
    let mut dropped = Removed::default();
    let mut rows = 0;
    loop {
        let removed = store.remove_finished(cutoff, 1).await.unwrap();
        if removed.months == 0 {
            rows += removed.requests;
            break;
        }
        dropped.months += removed.months;
        dropped.requests += removed.requests;
        dropped.job_log_entries += removed.job_log_entries;
    }
    assert_eq!(
        (dropped.months, dropped.requests, dropped.job_log_entries),
        (9, 5, 10)
    );
    for table in ["requests", "request_archives", "request_args", "job_log"] {
        let left = mysql_partitions(&pool, table).await;
        assert_eq!(left[0], format!("{table}_m202602"), "{left:?}");
    }
    for id in january.iter().chain([&june, &june_too]) {
        assert!(matches!(
            store.get_request(id, false).await,
            Err(Error::NotFound { .. })
        ));
    }
    let audit: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM request_audit")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(audit, 0);
    loop {
        let removed = store.remove_finished(cutoff, 10).await.unwrap();
        assert_eq!(removed.months, 0);
        if removed.requests == 0 {
            break;
        }
        rows += removed.requests;
    }
    assert_eq!(rows, 3, "h-old, February's two finished");
    assert_eq!(
        mysql_partitions(&pool, "requests").await[0],
        "requests_m202602"
    );
    assert_eq!(
        store.get_request(&february[2], false).await.unwrap().state,
        State::Running
    );
    assert_eq!(store.job_log(&february[2]).await.unwrap().len(), 2);
    crate::tests::drop_mysql_database(&database).await;
}

/// What was stored before migration 0106 stays readable in the `_before` partitions,
/// the foreign keys that InnoDB cannot keep on them gone; the migration runs again
/// (one cut off halfway) changing nothing; its bound is the store's month floor.
#[tokio::test]
async fn mysql_keeps_what_was_stored_before_partitions() {
    let Some((store, database)) = crate::tests::mysql_store().await else {
        return;
    };
    drop(store);
    crate::tests::drop_mysql_database(&database).await;
    let admin = sqlx::MySqlPool::connect(&crate::tests::mysql_url_of("test"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{database}`")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let pool = mysql_pool(&database).await;
    let mut early = crate::mysql::migrator();
    let (before, from): (Vec<_>, Vec<_>) = early
        .migrations
        .iter()
        .cloned()
        .partition(|migration| migration.version < 106);
    early.migrations = before.into();
    early.run(&pool).await.unwrap();
    let old = xid_at(day(2025, 6, 10), 1);
    sqlx::query(
        "INSERT INTO requests (request_id, type, state, created_at, finished_at) VALUES (?, 't', ?, 1, 1)",
    )
    .bind(&old)
    .bind(i16::from(State::Complete.value()))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO request_archives (request_id, create_request, args, job_chain) VALUES (?, '{}', '[]', '{}')",
    )
    .bind(&old)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO job_log (request_id, job_id, try, name, type, state, started_at, finished_at, \"exit\", error, stdout, stderr) \
         VALUES (?, 'a', 1, 'a', 'noop', 3, 1, 1, 0, '', 'out', '')",
    )
    .bind(&old)
    .execute(&pool)
    .await
    .unwrap();

    let store = crate::MysqlStore::connect(&crate::tests::mysql_url_of(&database))
        .await
        .unwrap();
    for table in ["requests", "request_archives", "job_log"] {
        assert!(mysql_holds(&pool, table, &format!("{table}_before"), &old).await);
    }
    assert_eq!(store.job_log(&old).await.unwrap()[0].stdout, "out");
    let keys: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.TABLE_CONSTRAINTS \
         WHERE CONSTRAINT_SCHEMA = DATABASE() AND CONSTRAINT_TYPE = 'FOREIGN KEY'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(keys, 0);
    let [_, next, _] = crate::sql::Month::and_next(Utc::now(), 2)
        .try_into()
        .unwrap();
    let floor: String = sqlx::query_scalar(
        "SELECT PARTITION_DESCRIPTION FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME = 'job_log' AND PARTITION_NAME = 'job_log_before'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(floor, format!("'{}'", next.lo));

    // Run again, the migration changes nothing.
    let partitioned = mysql_partitions(&pool, "requests").await;
    let migration = from.iter().find(|m| m.version == 106).unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(migration.sql.as_str().to_owned()))
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(mysql_partitions(&pool, "requests").await, partitioned);
    assert_eq!(store.job_log(&old).await.unwrap().len(), 1);
    drop(store);
    pool.close().await;
    crate::tests::drop_mysql_database(&database).await;
}

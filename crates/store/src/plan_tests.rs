//! The store suite, on every backend: each read of the API's and the web UI's (a page of
//! find by every filter, the counts, a request with its chain and its log) is served by
//! an index, never by reading a table whole, as the database itself plans it on a
//! history of a few thousand requests ([`crate::plans::explained`]; the history
//! benchmark shows the same plans at millions).

use super::*;
use crate::ImportedRequest;
use crate::plans::{QueryPlan, explained};

/// Finished requests of a hundred types, five hundred users and a thousand hosts, a
/// minute apart, one in a hundred STOPPED, with ten job log entries each: each filter
/// below picks a few, so that a planner seeks them in its index rather than walking
/// the newest until it has a page.
fn history(n: usize) -> Vec<ImportedRequest> {
    (0..n)
        .map(|i| {
            let id = format!("h{i:06}");
            let created = at(0, 0) + chrono::Duration::minutes(i as i64);
            let (mut request, create_request) = request(
                &id,
                &format!("type-{}", i % 100),
                &format!("user-{}", i % 500),
                created,
                &format!("host-{}", i % 1000),
            );
            request.state = match i % 100 {
                0 => State::Stopped,
                n if n % 2 == 0 => State::Fail,
                _ => State::Complete,
            };
            request.started_at = Some(created);
            request.finished_at = Some(created + chrono::Duration::seconds(30));
            let job_logs = (0..10)
                .map(|j| log(&id, &format!("j{j}"), 1, State::Complete))
                .collect();
            ImportedRequest {
                request,
                create_request,
                job_logs,
                suspended: None,
            }
        })
        .collect()
}

pub(super) async fn every_read_of_the_api_is_served_by_an_index(store: Arc<dyn Store>, raw: Raw) {
    for batch in history(3000).chunks(500) {
        store.import_requests(batch).await.unwrap();
    }
    raw.analyze().await;
    let page = |filter: RequestFilter| RequestFilter {
        limit: 20,
        ..filter
    };
    // Each filter, and the index its plan must name.
    let filters = [
        (
            "newest",
            "requests_by_created",
            page(RequestFilter::default()),
        ),
        (
            "by type",
            "requests_by_type",
            page(RequestFilter {
                request_type: Some("type-3".into()),
                ..Default::default()
            }),
        ),
        (
            "by user",
            "requests_by_user",
            page(RequestFilter {
                user: Some("user-2".into()),
                ..Default::default()
            }),
        ),
        (
            "by state",
            "requests_by_state",
            page(RequestFilter {
                states: vec![State::Stopped],
                ..Default::default()
            }),
        ),
        (
            "by arg",
            "request_args_by_value",
            page(RequestFilter {
                args: BTreeMap::from([("host".into(), "host-42".into())]),
                ..Default::default()
            }),
        ),
        (
            "by time range",
            "requests_by_created",
            page(RequestFilter {
                // Early in the history: PostgreSQL reads the requests created before
                // `since` and running at it apart, and on a small table would rather
                // read all of them than the index if many were (at millions, in month
                // partitions, it reads the index: the history benchmark's plans).
                since: Some(at(1, 0)),
                until: Some(at(3, 0)),
                ..Default::default()
            }),
        ),
        (
            "after a cursor",
            "requests_by_created",
            page(RequestFilter {
                after: Some(proto::Cursor {
                    created_at: at(10, 0),
                    request_id: "h000600".to_owned(),
                }),
                ..Default::default()
            }),
        ),
    ];
    let mut plans: Vec<(String, QueryPlan)> = Vec::new();
    for (label, index, filter) in filters {
        let (found, explained) = explained(store.find_requests(&filter)).await;
        assert!(!found.unwrap().is_empty(), "{label} finds requests");
        assert_eq!(explained.len(), 1, "{label}: one query");
        let plan = explained[0].plan.join("\n");
        assert!(plan.contains(index), "{label} uses {index}:\n{plan}");
        plans.extend(explained.into_iter().map(|plan| (label.to_owned(), plan)));
    }
    let reads = async {
        // A state few requests are in (a third of a small table in one state is read
        // whole on PostgreSQL, rightly; the benchmark shows the plans at millions).
        store
            .count_requests(&[State::Running], Some(10_000))
            .await
            .unwrap();
        store.get_request("h001234", true).await.unwrap();
        assert_eq!(store.job_log("h001234").await.unwrap().len(), 10);
        store.job_states("h001234").await.unwrap();
        assert_eq!(store.logged_tries("h001234").await.unwrap().len(), 10);
    };
    let ((), explained) = explained(reads).await;
    assert!(explained.len() >= 6, "{explained:#?}");
    plans.extend(
        explained
            .into_iter()
            .map(|plan| ("a request".to_owned(), plan)),
    );

    for (label, plan) in &plans {
        assert!(!plan.plan.is_empty(), "{label}: {plan:#?}");
        assert!(
            plan.full_scans.is_empty(),
            "{label}: {} reads {:?} whole:\n{}",
            plan.sql,
            plan.full_scans,
            plan.plan.join("\n")
        );
    }
    // Outside `explained`, nothing is explained (nor recorded).
    assert!(crate::plans::explained(async {}).await.1.is_empty());
}

/// PostgreSQL: a claim among tens of thousands of suspended chains, their statistics
/// read, reads the unclaimed ones from the start of their partial index and stops after
/// its batch; it read the table whole and sorted it at every claim before (migration
/// 0103: a restart of 50,000 resumed 1,200 a second).
#[tokio::test]
async fn postgres_claims_the_oldest_unclaimed_from_their_index() {
    let Some((store, schema)) = postgres_store().await else {
        return;
    };
    let mut conn = store.pool.acquire().await.unwrap();
    // The chains only: their requests' rows are not what the plan is about.
    for sql in [
        "SET session_replication_role = replica",
        "INSERT INTO suspended_job_chains (request_id, suspended_job_chain, rm_host, updated_at, suspended_at, epoch) \
         SELECT 'r' || g, repeat('x', 500), NULL, 1, 1000 + g / 1000, 1 FROM generate_series(1, 30000) g",
        "ANALYZE suspended_job_chains",
    ] {
        sqlx::query(sql).execute(&mut *conn).await.unwrap();
    }
    let explain = format!(
        "EXPLAIN {} FOR UPDATE SKIP LOCKED",
        crate::sql::CLAIM.replace("$1", "64")
    );
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("suspended_unclaimed")
            && !plan.contains("Seq Scan")
            && !plan.contains("Sort"),
        "{plan}"
    );
    drop(conn);
    drop_schema(&schema).await;
}

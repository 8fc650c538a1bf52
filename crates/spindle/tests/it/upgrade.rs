//! Issue #48, point 4: a rolling upgrade from the previous release (`release/previous`)
//! to this tree on one database, on each backend, while requests run: new runners work
//! for old managers, the first new manager migrates the schema while an old one serves,
//! old runners work for new managers, an old manager restarted on the newer schema
//! starts, says so and serves, and a roll back (the new services stopped) leaves the old
//! ones running requests on it.
//!
//! The previous release's binary is built once from a git worktree of its commit into
//! `target/previous-release/` and reused. That takes minutes, so the test runs only with
//! `SPINDLE_TEST_UPGRADE` set (`required` in CI: a missing commit or build fails it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Service;
use crate::nemesis::Link;

const SPECS: &str = "sequences:
  nap:
    request: true
    args:
      optional:
        - name: ms
          desc: how long the one job sleeps, in milliseconds
          default: \"1500\"
    nodes:
      nap:
        category: job
        type: sleep
        args: [{expected: duration, given: ms}]
";

const LEASE: &str = "3s";

/// The previous release's version and `spindle` binary, built if it is not yet; `None`
/// (said on stderr) when the test is not asked for.
fn previous_release(test: &str) -> Option<(String, PathBuf)> {
    let asked = std::env::var("SPINDLE_TEST_UPGRADE").ok();
    let Some(asked) = asked.filter(|value| !value.is_empty() && value != "0") else {
        let line = format!(
            "{test}: skipped: set SPINDLE_TEST_UPGRADE=1 to build the previous release (release/previous) once and upgrade from it (minutes the first time)\n"
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return None;
    };
    let required = asked == "required";
    let skip = |why: String| {
        assert!(!required, "{test}: {why} (SPINDLE_TEST_UPGRADE=required)");
        let line = format!("{test}: skipped: {why}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        None
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let named = std::fs::read_to_string(root.join("release/previous")).unwrap();
    let (version, commit) = named
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .and_then(|line| line.split_once(' '))
        .expect("release/previous names VERSION COMMIT");
    let (version, commit) = (version.to_owned(), commit.trim().to_owned());
    let git = |args: &[&str]| Command::new("git").arg("-C").arg(&root).args(args).output();
    match git(&["cat-file", "-e", &format!("{commit}^{{commit}}")]) {
        Ok(found) if found.status.success() => {}
        Ok(_) => {
            return skip(format!(
                "commit {commit} of release {version} is not in this clone"
            ));
        }
        Err(err) => return skip(format!("git cannot be run: {err}")),
    }
    // Beside this build's own target directory, which it does not touch.
    let cache = Path::new(env!("CARGO_BIN_EXE_spindle"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("previous-release");
    std::fs::create_dir_all(&cache).unwrap();
    let binary = cache.join(format!("spindle-{version}-{commit}"));
    // One build at a time (each backend's test may ask at once, from other processes).
    let lock = std::fs::File::create(cache.join("lock")).unwrap();
    lock.lock().unwrap();
    if binary.exists() {
        return Some((version, binary));
    }
    let worktree = cache.join(format!("worktree-{commit}"));
    let _ = git(&["worktree", "remove", "--force", worktree.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&worktree);
    let _ = git(&["worktree", "prune"]);
    let added = git(&[
        "worktree",
        "add",
        "--detach",
        worktree.to_str().unwrap(),
        &commit,
    ])
    .unwrap();
    assert!(
        added.status.success(),
        "git worktree add: {}",
        String::from_utf8_lossy(&added.stderr)
    );
    let line = format!("{test}: building release {version} ({commit}) once\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    let target = cache.join("target");
    seed_dependencies(
        &cache.parent().unwrap().join("debug"),
        &target.join("debug"),
    );
    let built = Command::new(env!("CARGO"))
        .args(["build", "--locked", "-p", "spindle", "--bin", "spindle"])
        .current_dir(&worktree)
        .env("CARGO_TARGET_DIR", &target)
        // Without debug info: it builds and links faster, and is not debugged here; and
        // its dependencies are then built as this workspace's are (opt-level 1, no debug
        // info), so the seeded ones are reused.
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .output()
        .unwrap();
    let _ = git(&["worktree", "remove", "--force", worktree.to_str().unwrap()]);
    assert!(
        built.status.success(),
        "building release {version}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let partial = cache.join(format!("spindle-{commit}.partial"));
    std::fs::copy(target.join("debug/spindle"), &partial).unwrap();
    std::fs::rename(&partial, &binary).unwrap();
    Some((version, binary))
}

/// Copies the dependencies this workspace's test build compiled (`from`, its
/// `target/debug`) into the previous release's empty target directory (`to`): those of the
/// same version, features and profile are then fresh there, and the release's build
/// compiles about a third of its crates (2 min 17 s instead of 4 min 35 s on 2 cores,
/// 2026-12-06). Copies, not hard links: cargo rewrites a stale unit's files in place.
/// Only libraries, their dep-info, build scripts' outputs and fingerprints; not this
/// workspace's test binaries.
fn seed_dependencies(from: &Path, to: &Path) {
    if to.join("deps").exists() || !from.join("deps").is_dir() {
        return;
    }
    fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                copy_tree(&path, &to.join(entry.file_name()), keep)?;
            } else if keep(&path) {
                std::fs::copy(&path, to.join(entry.file_name()))?;
            }
        }
        Ok(())
    }
    let library = |path: &Path| {
        matches!(
            path.extension().and_then(|extension| extension.to_str()),
            Some("rlib" | "rmeta" | "so" | "d")
        )
    };
    let seeded = copy_tree(
        &from.join(".fingerprint"),
        &to.join(".fingerprint"),
        &|_| true,
    )
    .and_then(|()| copy_tree(&from.join("build"), &to.join("build"), &|_| true))
    .and_then(|()| copy_tree(&from.join("deps"), &to.join("deps"), &library));
    if let Err(err) = seeded {
        // Only slower: the build compiles what is missing.
        let line = format!("seeding the previous release's build from {from:?}: {err}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
}

/// A service of the previous release's binary.
fn old_service(binary: &Path, dir: &Path, args: &[&str]) -> Service {
    Service::try_start_program(binary, dir, args, &[])
        .unwrap_or_else(|err| panic!("release binary {args:?}: {err}"))
}

/// Creates a `nap` request on the Request Manager at `url`; its id.
async fn create(http: &reqwest::Client, url: &str, ms: &str) -> String {
    let response = http
        .post(format!("{url}/api/v1/requests"))
        .json(&json!({"type": "nap", "args": {"ms": ms}, "user": "ann"}))
        .send()
        .await
        .unwrap();
    crate::recovery::created_id(response).await
}

async fn request(http: &reqwest::Client, url: &str, id: &str) -> Value {
    http.get(format!("{url}/api/v1/requests/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits until request `id` is RUNNING; the Job Runner it runs on.
async fn runs_on(http: &reqwest::Client, url: &str, id: &str) -> String {
    let mut runner = String::new();
    crate::eventually(
        &format!("request {id} runs"),
        Duration::from_secs(30),
        async || {
            let found = request(http, url, id).await;
            runner = found["jrURL"].as_str().unwrap_or_default().to_owned();
            found["state"] == 2 && !runner.is_empty()
        },
    )
    .await;
    runner
}

async fn completes(http: &reqwest::Client, url: &str, id: &str) {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let last = request(http, url, id).await;
        if last["state"] == 3 {
            return;
        }
        assert!(
            std::time::Instant::now() < until && last["state"] != 4 && last["state"] != 5,
            "request {id} did not complete: {last}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The upgrade on `database`.
// Long: one scenario whose phases share the services, links and requests.
async fn upgrade(test: &str, database: &str) {
    let Some((version, old)) = previous_release(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    std::fs::write(dir.path().join("specs/nap.yaml"), SPECS).unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    // Runners reach the managers through links the test holds: each manager keeps its
    // address across restarts, and one not yet started refuses connections.
    let to_a = Link::to("127.0.0.1:9").await;
    let to_b = Link::to("127.0.0.1:9").await;
    let rm_urls = format!("{},{}", to_a.url(), to_b.url());
    let rm = crate::rm_args(database, LEASE, &[]);
    let jr = crate::jr_args(&rm_urls, LEASE, &[]);

    // 1. The previous release's manager; a new runner works for it.
    let mut old_a = old_service(&old, dir.path(), &rm);
    to_a.retarget(&old_a.url);
    let mut new_y = Service::start(dir.path(), &jr);
    let first = create(&http, &old_a.url, "300").await;
    assert_eq!(
        runs_on(&http, &old_a.url, &first).await,
        new_y.url,
        "a new runner for an old manager"
    );
    completes(&http, &old_a.url, &first).await;

    // 2. A new manager migrates the schema while the old one serves requests running.
    let long = create(&http, &old_a.url, "3000").await;
    runs_on(&http, &old_a.url, &long).await;
    let mut new_b = Service::start(dir.path(), &rm);
    to_b.retarget(&new_b.url);
    let during = create(&http, &old_a.url, "300").await;
    completes(&http, &old_a.url, &during).await;

    // 3. An old runner works for the new manager; the new runner's chains move to it.
    let old_x = old_service(
        &old,
        dir.path(),
        &crate::jr_args(&format!("{},{}", to_b.url(), to_a.url()), LEASE, &[]),
    );
    new_y.terminate();
    let on_new = create(&http, &new_b.url, "300").await;
    assert_eq!(
        runs_on(&http, &new_b.url, &on_new).await,
        old_x.url,
        "an old runner for a new manager"
    );
    completes(&http, &new_b.url, &on_new).await;
    completes(&http, &new_b.url, &long).await;

    // 4. The old manager restarted on the newer schema starts, says so, and serves.
    old_a.kill();
    let mut old_a = old_service(&old, dir.path(), &rm);
    to_a.retarget(&old_a.url);
    assert!(
        old_a
            .stderr()
            .contains("migrations this binary does not know"),
        "release {version} on the newer schema says so: {}",
        old_a.stderr()
    );
    let restarted = create(&http, &old_a.url, "300").await;
    completes(&http, &old_a.url, &restarted).await;

    // 5. Rolled back: the new manager stopped, the old ones run requests on the schema.
    new_b.terminate();
    let rolled_back = create(&http, &old_a.url, "300").await;
    assert_eq!(runs_on(&http, &old_a.url, &rolled_back).await, old_x.url);
    completes(&http, &old_a.url, &rolled_back).await;
    for id in [&first, &long, &during, &on_new, &restarted, &rolled_back] {
        assert_eq!(request(&http, &old_a.url, id).await["state"], 3, "{id}");
    }
    assert!(old_a.exited().is_none(), "{}", old_a.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_on_sqlite_runs_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("spindle.db").display());
    upgrade("a_rolling_upgrade_on_sqlite_runs_every_request", &database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_on_postgres_runs_every_request() {
    let test = "a_rolling_upgrade_on_postgres_runs_every_request";
    let Some(database) = crate::services::NewDatabase::create(test).await else {
        return;
    };
    upgrade(test, &database.url).await;
    database.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_on_mysql_runs_every_request() {
    let test = "a_rolling_upgrade_on_mysql_runs_every_request";
    let Some(server) = crate::mysql_url(test) else {
        return;
    };
    let database = crate::import::MysqlDatabase::create(&server, "upgrade").await;
    upgrade(test, &database.url).await;
    database.remove().await;
}

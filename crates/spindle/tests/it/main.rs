//! Integration tests of the `spindle` binary: each test runs the real binary.

mod architecture;
mod backpressure;
mod beyond;
mod bulk;
mod chaos;
mod client;
mod fleet;
mod graph;
mod import;
mod job_locks;
mod job_programs;
mod lint;
mod locks;
mod lost_answers;
mod nemesis;
mod notifications;
mod observability;
mod operators;
mod own_db;
mod pgbouncer;
mod recovery;
mod rollout;
mod secrets;
mod security;
mod services;
mod spincycle_peer;
mod triggers;
mod ui;
mod upgrade;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Spindle's own spec fixtures (`fixtures/specs` in the repository; its README says what
/// each is).
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/specs")
}

/// Spin Cycle's own spec fixtures, when `SPINDLE_SPINCYCLE_FIXTURES` names their folder
/// (relative to the repository, or absolute; CI sets it). Without it the test that asks is
/// skipped, and one line on stderr says so.
fn spincycle_fixtures(test: &str) -> Option<PathBuf> {
    shared_folder(
        test,
        "SPINDLE_SPINCYCLE_FIXTURES",
        "it reads Spin Cycle's spec fixtures",
        &["a-b-c.yaml"],
    )
}

/// The folder the variable `var` names (relative to the repository, or absolute), which
/// must hold `marks`; unset, the test that asks is skipped (`doing` says why it needs
/// the folder) and one line on stderr says so.
pub(crate) fn shared_folder(test: &str, var: &str, doing: &str, marks: &[&str]) -> Option<PathBuf> {
    let Some(folder) = std::env::var_os(var) else {
        // Straight to stderr: the test harness captures `eprintln!`.
        let line = format!("{test}: skipped: {doing}; set {var} to its folder to run it\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return None;
    };
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(folder);
    assert!(
        marks.iter().all(|mark| folder.join(mark).is_file()),
        "{var} names {}, which does not hold {}",
        folder.display(),
        marks.join(" and ")
    );
    Some(folder)
}

/// The binary, run in `dir`, with colours off.
fn spindle(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_spindle"));
    command
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE");
    command
}

/// Runs the command; returns stdout, stderr and the exit code.
fn run(command: &mut Command) -> (String, String, i32) {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("spindle runs");
    (
        String::from_utf8(stdout).expect("stdout is UTF-8"),
        String::from_utf8(stderr).expect("stderr is UTF-8"),
        status.code().expect("spindle exits with a code"),
    )
}

/// The PostgreSQL server of the tests that need one: see [`database_server`].
fn postgres_url(test: &str) -> Option<String> {
    database_server(
        test,
        "PostgreSQL",
        "SPINDLE_TEST_POSTGRES",
        5432,
        "postgres://postgres@127.0.0.1:5432/test",
    )
}

/// The MySQL (MariaDB) server of the tests that need one: see [`database_server`].
fn mysql_url(test: &str) -> Option<String> {
    database_server(
        test,
        "MySQL",
        "SPINDLE_TEST_MYSQL",
        3306,
        "mysql://root@127.0.0.1:3306/test",
    )
}

/// A database server of the tests: `{VAR}_URL`, else `default` (on 127.0.0.1:`port`) if
/// it answers. Without one the test that asks is skipped, and one line says so, unless
/// `VAR=required` (CI), which makes it fail.
fn database_server(test: &str, name: &str, var: &str, port: u16, default: &str) -> Option<String> {
    if let Ok(url) = std::env::var(format!("{var}_URL")) {
        return Some(url);
    }
    let required = std::env::var(var).is_ok_and(|v| v == "required");
    let answers = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    )
    .is_ok();
    if answers || required {
        return Some(default.to_owned());
    }
    let line = format!(
        "{test}: skipped: no {name} server at 127.0.0.1:{port} (set {var}_URL, or {var}=required to fail instead)\n"
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    None
}

/// `spindle COMMAND` (`server` or `rm`) on port 0 with the specs in `specs` and this
/// database, then `extra`.
pub(crate) fn service_args<'a>(
    command: &'a str,
    database: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        command,
        "--listen",
        "127.0.0.1:0",
        "--specs",
        "specs",
        "--database",
        database,
    ];
    args.extend_from_slice(extra);
    args
}

/// `spindle server` on port 0 in a new directory with `specs` as `specs.yaml` and an
/// SQLite database there; the directory and the server (killed when dropped).
pub(crate) fn sqlite_server(specs: &str) -> (tempfile::TempDir, Service) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("specs.yaml"), specs).unwrap();
    let service = Service::start(
        dir.path(),
        &[
            "server",
            "--listen",
            "127.0.0.1:0",
            "--specs",
            "specs.yaml",
            "--database",
            "sqlite://s.db",
        ],
    );
    (dir, service)
}

/// `spindle rm` on port 0 with the specs in `specs`, retrying every 200 ms, with this
/// lease, then `extra`.
pub(crate) fn rm_args<'a>(database: &'a str, lease: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = service_args("rm", database, &["--interval", "200ms", "--lease", lease]);
    args.extend_from_slice(extra);
    args
}

/// `spindle jr` on port 0 reporting to `rm_urls`, with this lease, then `extra`.
pub(crate) fn jr_args<'a>(rm_urls: &'a str, lease: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "jr",
        "--listen",
        "127.0.0.1:0",
        "--rm-url",
        rm_urls,
        "--lease",
        lease,
    ];
    args.extend_from_slice(extra);
    args
}

/// A `spindle` service process, started on the address it was given (port 0: one the
/// system picks) and known by the address it says it listens on. Killed when dropped.
pub(crate) struct Service {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    stderr: Arc<Mutex<String>>,
}

impl Service {
    /// Starts `spindle ARGS` in `dir` and waits until it listens.
    pub(crate) fn start(dir: &Path, args: &[&str]) -> Service {
        Service::try_start(dir, args).unwrap_or_else(|err| panic!("spindle {args:?}: {err}"))
    }

    /// Starts `spindle ARGS` in `dir`; the error is what it printed if it exited (or
    /// said nothing for 30 s) before listening.
    pub(crate) fn try_start(dir: &Path, args: &[&str]) -> Result<Service, String> {
        Service::try_start_env(dir, args, &[])
    }

    /// [`Service::start`] with environment variables set (`RUST_LOG` is `warn` unless
    /// `env` says otherwise).
    pub(crate) fn start_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Service {
        Service::try_start_env(dir, args, env)
            .unwrap_or_else(|err| panic!("spindle {args:?}: {err}"))
    }

    fn try_start_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Service, String> {
        Service::try_start_program(Path::new(env!("CARGO_BIN_EXE_spindle")), dir, args, env)
    }

    /// [`Service::try_start`] of another `spindle` binary (another release's).
    pub(crate) fn try_start_program(
        program: &Path,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Service, String> {
        let mut child = Command::new(program)
            .args(args)
            .current_dir(dir)
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spindle starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (url_tx, url_rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("piped");
        let captured = Arc::clone(&stderr);
        // Reads stderr to its end, so that the service never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some((_, url)) = line.split_once(" listening on ") {
                    let _ = url_tx.send(url.trim().to_owned());
                }
                // With `--log-format json` it is a log line with the URL.
                if let Ok(logged) = serde_json::from_str::<serde_json::Value>(&line)
                    && logged["message"]
                        .as_str()
                        .is_some_and(|m| m.ends_with(" listening"))
                    && let Some(url) = logged["url"].as_str()
                {
                    let _ = url_tx.send(url.to_owned());
                }
                let mut text = captured.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        match url_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => Ok(Service { child, url, stderr }),
            Err(err) => {
                let _ = child.kill();
                let status = child.wait().ok();
                Err(format!(
                    "did not listen ({err}; exit {status:?}): {}",
                    stderr.lock().unwrap()
                ))
            }
        }
    }

    /// What the service printed on stderr up to now (at least everything before its
    /// `listening on` line).
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// How the process ended, if it has.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL, then wait for the process to exit.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGHUP (a Request Manager reloads its specs).
    pub(crate) fn hangup(&self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    }

    /// SIGTERM, then wait for the process to exit.
    pub(crate) fn terminate(&mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `done` says so, checking every 20 ms; fails the test, naming `what`, past
/// `deadline`. The one way these tests wait for something.
pub(crate) async fn eventually(
    what: &str,
    deadline: Duration,
    mut done: impl AsyncFnMut() -> bool,
) {
    let until = Instant::now() + deadline;
    while !done().await {
        assert!(Instant::now() < until, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

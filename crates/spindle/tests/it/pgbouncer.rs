//! A PgBouncer of the test's own (issue #32, point 4), in front of a PostgreSQL of the
//! test's own: in a temporary directory, run as the `postgres` user when the tests run
//! as root (PgBouncer refuses root), on a free port, killed when dropped.
//!
//! Debian 12's PgBouncer is 1.18: in transaction pooling it cannot route sqlx's extended
//! protocol outside a transaction (a statement is parsed, then bound after a Sync, which
//! may reach another server connection), so Spindle runs through it in session pooling
//! (docs/deploying.md says which mode needs which version).

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::own_db::{command_as, find_program, free_port, server_user, skipped};

pub(crate) struct OwnPgbouncer {
    port: u16,
    child: Child,
    dir: tempfile::TempDir,
}

impl OwnPgbouncer {
    /// PgBouncer pooling `mode` for the database `postgres` of the server at `pg_port`,
    /// at most `pool` server connections; `None` (the test skipped) without PgBouncer.
    pub(crate) fn start(test: &str, pg_port: u16, mode: &str, pool: u32) -> Option<OwnPgbouncer> {
        let Some(program) = find_program(&["pgbouncer"]) else {
            skipped(
                test,
                "PgBouncer (Debian: pgbouncer)",
                "SPINDLE_TEST_PGBOUNCER",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let path = |name: &str| dir.path().join(name).display().to_string();
        std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").unwrap();
        let config = format!(
            "[databases]
postgres = host=127.0.0.1 port={pg_port} dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = {mode}
default_pool_size = {pool}
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
logfile = {log}
",
            users = path("users.txt"),
            log = path("pgbouncer.log"),
        );
        std::fs::write(dir.path().join("pgbouncer.ini"), config).unwrap();
        let user = server_user("postgres", dir.path());
        for file in ["users.txt", "pgbouncer.ini"] {
            if user.is_some() {
                let account = nix::unistd::User::from_name("postgres").unwrap().unwrap();
                let (uid, gid) = (account.uid.as_raw(), account.gid.as_raw());
                std::os::unix::fs::chown(dir.path().join(file), Some(uid), Some(gid)).unwrap();
            }
        }
        let child = command_as(user.as_deref(), &program)
            .arg(dir.path().join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let bouncer = OwnPgbouncer { port, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PgBouncer did not listen within 10 s: {}",
                bouncer.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(bouncer)
    }

    /// Its database `postgres`, as Spindle's `--database` takes it.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub(crate) fn log(&self) -> String {
        let log: PathBuf = self.dir.path().join("pgbouncer.log");
        std::fs::read_to_string(log).unwrap_or_default()
    }
}

impl Drop for OwnPgbouncer {
    fn drop(&mut self) {
        // runuser passes SIGTERM on to PgBouncer.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

//! `--pgbouncer`: a PgBouncer of the load generator's own in front of the PostgreSQL
//! server, for `--setup several` (issue #32, point 5). Session pooling (Debian 12's
//! PgBouncer is 1.18, which cannot route sqlx's statements in transaction pooling:
//! docs/deploying.md), trust authentication as the local server, run as `postgres` when
//! the generator runs as root (PgBouncer refuses root), killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Pgbouncer {
    pub(crate) port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

fn program() -> PathBuf {
    ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
        .expect("--pgbouncer: no pgbouncer in /usr/sbin or /usr/bin (Debian: pgbouncer)")
}

impl Pgbouncer {
    /// PgBouncer for database `name` of the server at `host:port`, at most `pool` server
    /// connections.
    pub(crate) fn start(host: &str, port: u16, name: &str, pool: usize) -> Pgbouncer {
        let dir = tempfile::tempdir().unwrap();
        let listen = super::free_port();
        let path = |file: &str| dir.path().join(file).display().to_string();
        std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").unwrap();
        std::fs::write(
            dir.path().join("pgbouncer.ini"),
            format!(
                "[databases]
{name} = host={host} port={port} dbname={name}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = session
default_pool_size = {pool}
max_db_connections = {pool}
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
logfile = {log}
",
                users = path("users.txt"),
                log = path("pgbouncer.log"),
            ),
        )
        .unwrap();
        let root = nix::unistd::Uid::effective().is_root();
        let mut command = if root {
            let account = nix::unistd::User::from_name("postgres").unwrap().expect(
                "--pgbouncer as root: PgBouncer refuses root and there is no postgres user",
            );
            for entry in [
                dir.path().to_path_buf(),
                dir.path().join("users.txt"),
                dir.path().join("pgbouncer.ini"),
            ] {
                std::os::unix::fs::chown(
                    entry,
                    Some(account.uid.as_raw()),
                    Some(account.gid.as_raw()),
                )
                .unwrap();
            }
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program());
            command
        } else {
            Command::new(program())
        };
        let child = command
            .arg(dir.path().join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PgBouncer did not listen within 10 s: {}",
                std::fs::read_to_string(dir.path().join("pgbouncer.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Pgbouncer {
            port: listen,
            child,
            _dir: dir,
        }
    }
}

impl Drop for Pgbouncer {
    fn drop(&mut self) {
        // runuser passes SIGTERM on to PgBouncer.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX)),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

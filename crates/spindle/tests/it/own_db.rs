//! Database servers of a test's own, in a temporary directory, run as a non-root user on
//! a free port and stopped when dropped: for the tests that stop the database under a
//! running Spindle (the chaos test, `/readyz`). PostgreSQL (`initdb`, `pg_ctl`) and
//! MariaDB (`mariadb-install-db`, `mariadbd`); without their programs a test says it was
//! skipped, unless `SPINDLE_TEST_POSTGRES=required` or `SPINDLE_TEST_MYSQL=required`
//! (CI), which makes that a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A server of the test's own that it can stop and start again.
pub(crate) enum OwnDatabase {
    Postgres(OwnPostgres),
    Mariadb(OwnMariadb),
}

impl OwnDatabase {
    pub(crate) fn stop(&mut self) {
        match self {
            OwnDatabase::Postgres(db) => db.stop(),
            OwnDatabase::Mariadb(db) => db.stop(),
        }
    }

    pub(crate) fn start(&mut self) {
        match self {
            OwnDatabase::Postgres(db) => db.pg_ctl_start(),
            OwnDatabase::Mariadb(db) => db.run_server(),
        }
    }
}

/// Says that `test` was skipped for want of `what`, or fails it where `required` (an
/// environment variable) is `required`.
pub(crate) fn skipped(test: &str, what: &str, required: &str) {
    assert!(
        std::env::var(required).as_deref() != Ok("required"),
        "{test}: {what} are not installed, and {required}=required"
    );
    let line = format!(
        "{test}: skipped: it starts a database server of its own and needs {what}; {required}=required makes this a failure\n"
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

/// The user to run a server as: `name` when the tests run as root (the servers refuse
/// to run as root), with `dir` made theirs; else the tests' own.
pub(crate) fn server_user(name: &str, dir: &Path) -> Option<String> {
    if !nix::unistd::Uid::effective().is_root() {
        return None;
    }
    let account = nix::unistd::User::from_name(name)
        .unwrap()
        .unwrap_or_else(|| {
            panic!("the tests run as root, and there is no {name} user to run the database as")
        });
    std::os::unix::fs::chown(dir, Some(account.uid.as_raw()), Some(account.gid.as_raw())).unwrap();
    Some(name.to_owned())
}

/// `program` run as `user` (or as the tests' own user).
pub(crate) fn command_as(user: Option<&str>, program: &Path) -> Command {
    match user {
        Some(user) => {
            let mut command = Command::new("runuser");
            command.args(["-u", user, "--"]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// A port nobody holds now; the server takes it a moment later.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A PostgreSQL server in a temporary directory, stopped when dropped.
pub(crate) struct OwnPostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    /// Run its programs as this user (the tests may run as root; PostgreSQL refuses to).
    user: Option<String>,
    _dir: tempfile::TempDir,
}

fn find_postgres_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop()
}

impl OwnPostgres {
    pub(crate) fn start(test: &str) -> Option<OwnPostgres> {
        let Some(bin) = find_postgres_bin() else {
            skipped(
                test,
                "PostgreSQL's initdb and pg_ctl (Debian: postgresql)",
                "SPINDLE_TEST_POSTGRES",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let user = server_user("postgres", dir.path());
        let port = free_port();
        let postgres = OwnPostgres {
            bin,
            data,
            port,
            user,
            _dir: dir,
        };
        let data = postgres.data.to_str().unwrap().to_owned();
        postgres.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        postgres.pg_ctl_start();
        Some(postgres)
    }

    /// One of PostgreSQL's programs, run as the server's user.
    fn command(&self, program: &str) -> Command {
        command_as(self.user.as_deref(), &self.bin.join(program))
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out = self
            .command(program)
            .args(args)
            .current_dir(self._dir.path())
            .output()
            .unwrap_or_else(|err| panic!("{program}: {err}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub(crate) fn pg_ctl_start(&self) {
        let data = self.data.to_str().unwrap();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port, data
        );
        let log = self.data.join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                data,
                "-o",
                &options,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
    }

    pub(crate) fn stop(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let data = self.data.to_str().unwrap_or_default().to_owned();
        let _ = self
            .command("pg_ctl")
            .args(["-D", &data, "-m", "immediate", "stop"])
            .output();
    }
}

/// A MariaDB server in a temporary directory (`mariadb-install-db`, then `mariadbd`
/// without grant tables: any user, no password), with a database `spindle`.
pub(crate) struct OwnMariadb {
    install_db: PathBuf,
    server: PathBuf,
    port: u16,
    user: Option<String>,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

/// The first of `names` found on the PATH or in /usr/sbin and /usr/bin.
pub(crate) fn find_program(names: &[&str]) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect())
        .unwrap_or_default();
    dirs.extend([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")]);
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|path| path.is_file())
}

impl OwnMariadb {
    pub(crate) fn start(test: &str) -> Option<OwnMariadb> {
        let (Some(install_db), Some(server)) = (
            find_program(&["mariadb-install-db", "mysql_install_db"]),
            find_program(&["mariadbd", "mysqld"]),
        ) else {
            skipped(
                test,
                "MariaDB's mariadb-install-db and mariadbd (Debian: mariadb-server)",
                "SPINDLE_TEST_MYSQL",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let user = server_user("mysql", dir.path());
        let mut mariadb = OwnMariadb {
            install_db,
            server,
            port: free_port(),
            user,
            child: None,
            dir,
        };
        let data = mariadb.data();
        let out = command_as(mariadb.user.as_deref(), &mariadb.install_db)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--skip-test-db", "--auth-root-authentication-method=normal"])
            .current_dir(mariadb.dir.path())
            .output()
            .unwrap_or_else(|err| panic!("mariadb-install-db: {err}"));
        assert!(
            out.status.success(),
            "mariadb-install-db: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        mariadb.run_server();
        let out = Command::new(find_program(&["mariadb", "mysql"]).expect("the mariadb client"))
            .args([
                "--no-defaults",
                "-h",
                "127.0.0.1",
                "-P",
                &mariadb.port.to_string(),
                "-u",
                "root",
            ])
            .args(["-e", "CREATE DATABASE spindle"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(mariadb)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Starts the server and waits until it answers.
    pub(crate) fn run_server(&mut self) {
        let data = self.data();
        let child = command_as(self.user.as_deref(), &self.server)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", data.join("mysqld.sock").display()))
            .arg(format!("--pid-file={}", data.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", data.join("error.log").display()))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-grant-tables",
                "--skip-log-bin",
                "--innodb-flush-log-at-trx-commit=2",
                "--innodb-buffer-pool-size=64M",
                "--max-connections=300",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|err| panic!("mariadbd: {err}"));
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let answers = std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok();
            if answers {
                return;
            }
            assert!(
                Instant::now() < until,
                "mariadbd did not answer within 60 s: {}",
                std::fs::read_to_string(data.join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (as a shutdown of the machine would: SIGTERM) and waits for it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The server is runuser's child: signal the server itself, by its pid file.
            let pid = std::fs::read_to_string(self.data().join("mysqld.pid"))
                .ok()
                .and_then(|text| text.trim().parse::<i32>().ok());
            if let Some(pid) = pid {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            } else {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/spindle", self.port)
    }
}

impl Drop for OwnMariadb {
    fn drop(&mut self) {
        self.stop();
    }
}

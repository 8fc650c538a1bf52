//! The commands that drive a running server, against a real `spindle server`: outputs
//! (snapshots with ids and times masked), JSON outputs, prompting through a
//! pseudo-terminal, and the exit codes of failures.

use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SPECS: &str = concat!(
    "sequences:
  greet:
    request: true
    args:
      required:
        - name: who
          desc: Who to greet
      optional:
        - name: times
          desc: How many greetings
          default: \"1\"
    nodes:
      hello:
        category: job
        type: noop
        args: [{expected: who}]
  nap:
    request: true
    args:
      optional:
        - name: ms
          desc: How long to nap
          default: \"60000\"
    nodes:
      sleep:
        category: job
        type: sleep
        args: [{expected: duration, given: ms}]
  naps:
    request: true
    args:
      optional:
        - name: hosts
          default: [db1, db2]
      static:
        - name: ms
          default: \"60000\"
    nodes:
      sleep:
        category: job
        type: sleep
        each: [hosts:host]
        args: [{expected: duration, given: ms}]
",
    include_str!("specs/talk.yaml"),
);

pub(crate) struct Server {
    /// Kills the server when the test ends.
    _service: crate::Service,
    addr: String,
    dir: tempfile::TempDir,
}

pub(crate) fn server() -> Server {
    let (dir, service) = crate::sqlite_server(SPECS);
    Server {
        addr: service.url.clone(),
        _service: service,
        dir,
    }
}

impl Server {
    /// Runs `spindle WORDS` on a pseudo-terminal (made by `script`), typing `input`;
    /// returns what the terminal showed.
    fn on_terminal(&self, words: &str, input: &str) -> String {
        let mut child = Command::new("script")
            .args([
                "-qec",
                &format!("{} {words}", env!("CARGO_BIN_EXE_spindle")),
                "/dev/null",
            ])
            .env("SPINDLE_ADDR", &self.addr)
            .env("NO_COLOR", "1")
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&output.stdout).replace('\r', "")
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_spindle"))
            .args(args)
            .env("SPINDLE_ADDR", &self.addr)
            .env("NO_COLOR", "1")
            .env("USER", "ann")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    pub(crate) fn stdout(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    pub(crate) fn start(&self, args: &[&str]) -> String {
        let mut all = vec!["start"];
        all.extend_from_slice(args);
        all.push("--yes");
        let out = self.stdout(&all);
        out.split_whitespace().last().unwrap().to_owned()
    }

    pub(crate) fn wait_state(&self, id: &str, state: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self
            .stdout(&["status", id])
            .contains(&format!("state: {state}"))
        {
            assert!(Instant::now() < deadline, "{id} never reached {state}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn list_help_start_status_info_find_log() {
    let server = server();
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"http://127\.0\.0\.1:\d+", "[ADDR]");
    settings.add_filter(r"[0-9a-v]{20}", "[ID]");
    settings.add_filter(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC", "[TIME]");
    settings.add_filter(r"\(\d+s ago\)", "([AGO])");
    settings.add_filter(r"runtime: +[0-9.]+s", "runtime: [RUNTIME]");
    settings.add_filter(r"job id: +[a-zA-Z0-9]{4}", "job id:   [JOB]");
    settings.add_filter(r"specs: [0-9a-f]{16}", "specs: [VERSION]");
    let _guard = settings.bind_to_scope();

    insta::assert_snapshot!(server.stdout(&[]), @r"
    Request Manager address: [ADDR]

    Requests:
      greet
      nap
      naps
      talk

    spindle help  <request>
    spindle start <request>
    ");
    insta::assert_snapshot!(server.stdout(&["help", "greet"]), @r"
    Request Manager address: [ADDR]

    greet request args (* required)

      * who    Who to greet
        times  How many greetings (default: 1)

    To start a greet request, run 'spindle start greet'
    ");
    let output = server.run(&["start", "greet", "who=Ann Lee", "--yes"]);
    assert!(output.status.success());
    insta::assert_snapshot!(String::from_utf8(output.stdout).unwrap(), @"OK, started greet request [ID]");
    let id = server.start(&["greet", "who=bob"]);
    server.wait_state(&id, "COMPLETE");
    insta::assert_snapshot!(server.stdout(&["status", &id]), @r"
       state: COMPLETE
    progress: 100%
     runtime: [RUNTIME]
     request: greet
      caller: ann
        args: who=bob
    ");
    insta::assert_snapshot!(server.stdout(&["info", &id]), @r"
          id: [ID]
     request: greet
      caller: ann
     created: [TIME] ([AGO])
     started: [TIME] ([AGO])
    finished: [TIME] ([AGO])
       state: COMPLETE
        host: 
        jobs: 1 (1 complete)
        args: who=bob times=1
       specs: [VERSION] (spindle's GET /api/v1/requests/[ID]/spec has their text)
       audit:
              [TIME] create by ann from 127.0.0.1
    ");
    let found = server.stdout(&["find", "type=greet", "states=complete,running,pending"]);
    let lines: Vec<&str> = found.lines().collect();
    assert_eq!(lines.len(), 3, "{found}");
    assert!(
        lines[0].starts_with("ID                   REQUEST"),
        "{found}"
    );
    assert!(
        lines[1].contains(" greet ") && lines[1].ends_with("1 / 1"),
        "{found}"
    );
    // Issue #36: none, or more than shown, is said (on stderr: stdout stays a table).
    let none = server.run(&["find", "type=nap"]);
    assert_eq!(none.status.code(), Some(0));
    assert!(none.stdout.is_empty(), "no rows, not even the header");
    assert_eq!(String::from_utf8_lossy(&none.stderr), "no requests match\n");
    // (rows with the header, what stderr says) of the greet requests, `limit` at most.
    let greets = |limit: &str| {
        let limit = format!("limit={limit}");
        let out = server.run(&["find", "type=greet", "states=complete", &limit]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (String::from_utf8_lossy(&out.stdout).lines().count(), stderr)
    };
    let hint = "more requests match: the next with offset=1, all with limit=0\n";
    assert_eq!(greets("1"), (2, hint.to_owned()));
    let both = greets("2");
    assert_eq!(both, (3, String::new()), "all shown: no hint");
    let schedules = server.run(&["schedules"]);
    assert_eq!(schedules.status.code(), Some(0));
    assert!(schedules.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&schedules.stderr).starts_with("no schedules"),
        "{schedules:?}"
    );
    let by_arg = server.stdout(&["find", "arg=who=bob", "state=COMPLETE"]);
    assert_eq!(by_arg.lines().count(), 2, "{by_arg}");
    // Issue #12: `--job` takes a name or an id; one the request does not have is an
    // error that lists its job names (it was silence).
    let unknown = server.run(&["log", &id, "--job", "nope"]);
    assert_eq!(unknown.status.code(), Some(4));
    assert!(unknown.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("has no job with id or name `nope`") && stderr.contains("hello"),
        "{stderr}"
    );
    let by_name = server.stdout(&["log", &id, "--job", "hello"]);
    assert_eq!(by_name.matches("\n--\n").count(), 1, "{by_name}");
    let job_id = by_name
        .lines()
        .find_map(|line| line.strip_prefix("job id:"))
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(server.stdout(&["log", &id, "--job", &job_id]), by_name);
    let all = server.stdout(&["log", &id, "--all"]);
    assert_eq!(all.matches("\n--\n").count(), 5, "{all}");
    // Issue #36: without --all, not the grapher's begin and end jobs.
    let log = server.stdout(&["log", &id]);
    assert!(
        all.contains("_begin\n") && !log.contains("_begin\n"),
        "{log}"
    );
    assert_eq!(log.matches("\n--\n").count(), 1, "{log}");
    assert!(
        log.contains("job name: hello\njob type: noop\nstate:    COMPLETE"),
        "{log}"
    );
}

#[test]
fn json_outputs() {
    let server = server();
    let id = server.start(&["greet", "who=bob"]);
    server.wait_state(&id, "COMPLETE");
    for args in [
        vec!["status", &id],
        vec!["info", &id],
        vec!["log", &id],
        vec!["find"],
        vec!["ps"],
        vec!["help", "greet"],
        vec![],
    ] {
        let mut all = vec!["--output", "json"];
        all.extend(args.iter().copied());
        let out = server.stdout(&all);
        let value: Value =
            serde_json::from_str(&out).unwrap_or_else(|err| panic!("{all:?}: {err}: {out}"));
        assert!(!value.is_null(), "{all:?}");
    }
    let info: Value =
        serde_json::from_str(&server.stdout(&["info", &id, "--output", "json"])).unwrap();
    assert_eq!(info["JobChain"]["jobs"].as_object().unwrap().len(), 5);
    let graph: Value = serde_json::from_str(&server.stdout(&["graph", &id])).unwrap();
    assert!(
        graph["jobs"]
            .as_object()
            .unwrap()
            .values()
            .all(|j| j["state"] == 3)
    );
    let dot = server.stdout(&["graph", &id, "--format", "dot"]);
    assert!(dot.contains("COMPLETE (try 1)"), "{dot}");
    assert!(
        dot.contains("fillcolor=\"#c6efce\""),
        "COMPLETE is green: {dot}"
    );
    // On a terminal the default is the tree, with each job's state.
    let tree = server.on_terminal(&format!("graph {id}"), "");
    assert!(tree.starts_with("request_greet\n"), "{tree}");
    assert!(tree.contains("  hello (noop, "), "{tree}");
    assert!(tree.contains(")  COMPLETE (try 1)\n"), "{tree}");
}

#[test]
fn prompting_on_a_terminal() {
    let server = server();
    let text = server.on_terminal("start greet", "\nCy\n3\nno\nok\n");
    assert!(text.contains("# Who to greet\nwho="), "{text}");
    assert!(text.contains("# Value required for who"), "{text}");
    assert!(
        text.contains("# How many greetings (default: 1)\ntimes="),
        "{text}"
    );
    assert!(
        text.contains("# spindle start greet who=Cy times=3"),
        "{text}"
    );
    assert!(
        text.contains("Enter 'ok' to start, or ctrl-c to abort: "),
        "{text}"
    );
    assert!(text.contains("OK, started greet request "), "{text}");
    let id = text
        .split("OK, started greet request ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let status = server.stdout(&["status", &id]);
    assert!(status.contains("args: who=Cy"), "{status}");
    // Issue #12: `y` and `yes` confirm too.
    for answer in ["y", "Yes"] {
        let text = server.on_terminal("start greet who=Di", &format!("{answer}\n"));
        assert!(
            text.contains("OK, started greet request "),
            "{answer}: {text}"
        );
    }
    // Without a terminal, a missing required arg is an error that names it.
    let output = server.run(&["start", "greet"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("missing required args: who"));
}

#[test]
fn ps_stop_watch_and_running() {
    let server = server();
    let id = server.start(&["nap"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let ps = loop {
        let ps = server.stdout(&["ps"]);
        if ps.contains("sleeping") {
            break ps;
        }
        assert!(Instant::now() < deadline, "the nap never showed in ps");
        std::thread::sleep(Duration::from_millis(50));
    };
    let lines: Vec<&str> = ps.lines().collect();
    assert!(
        lines[0].starts_with("REQUEST              ID                    PRG  USER"),
        "{ps}"
    );
    assert!(
        lines[1].starts_with("nap ") && lines[1].contains(&id) && lines[1].contains(" sleep "),
        "{ps}"
    );
    assert!(lines[1].ends_with("sleeping 1m0s"), "{ps}");
    assert!(
        !lines[0].contains("EACH"),
        "no expansion, no EACH column: {ps}"
    );
    assert_eq!(server.run(&["running", &id]).status.code(), Some(0));
    // The jobs of an expansion: each with its own id and its element.
    let naps = server.start(&["naps"]);
    let ps = loop {
        let ps = server.stdout(&["ps", &naps]);
        if ps.matches("sleeping").count() == 2 {
            break ps;
        }
        assert!(Instant::now() < deadline, "the naps never showed in ps");
        std::thread::sleep(Duration::from_millis(50));
    };
    let lines: Vec<&str> = ps.lines().collect();
    assert!(lines[0].contains(" TRY JOBID JOB "), "{ps}");
    assert!(lines[0].contains(" EACH "), "{ps}");
    let mut elements: Vec<&str> = lines[1..]
        .iter()
        .map(|line| line.split_whitespace().nth(8).unwrap())
        .collect();
    elements.sort_unstable();
    assert_eq!(elements, ["host=db1", "host=db2"], "{ps}");
    let ids: std::collections::HashSet<&str> = lines[1..]
        .iter()
        .map(|line| line.split_whitespace().nth(6).unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{ps}");
    assert!(ids.iter().all(|id| id.len() >= 4), "{ps}");
    server.stdout(&["stop", &naps]);
    // Issue #36: long elements are shown whole (they tell the iterations apart).
    let long = "web-01.eu-west-1.example.com";
    let naps = server.start(&[
        "naps",
        &format!("hosts={long},web-02.eu-west-1.example.com"),
    ]);
    let ps = loop {
        let ps = server.stdout(&["ps", &naps]);
        if ps.matches("sleeping").count() == 2 {
            break ps;
        }
        assert!(
            Instant::now() < deadline,
            "the long naps never showed in ps"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(ps.contains(&format!(" host={long} ")), "{ps}");
    assert!(ps.contains(" host=web-02.eu-west-1.example.com "), "{ps}");
    server.stdout(&["stop", &naps]);
    // The log names each iteration's job by its element too.
    let log = loop {
        let log = server.stdout(&["log", &naps]);
        if log.matches("job name: ").count() == 2 {
            break log;
        }
        assert!(Instant::now() < deadline, "the stopped naps never logged");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        log.contains(&format!("job name: sleep [host={long}]\n")),
        "{log}"
    );
    let stopped = server.stdout(&["stop", &id]);
    assert_eq!(stopped.trim(), format!("OK, stopped {id}"));
    let watch = server.run(&["watch", &id]);
    assert_eq!(watch.status.code(), Some(3), "STOPPED");
    assert_eq!(server.run(&["running", &id]).status.code(), Some(1));
    let done = server.run(&["start", "nap", "ms=10", "--yes", "--watch"]);
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(String::from_utf8_lossy(&done.stdout).contains(" COMPLETE"));
    let again = server.run(&["stop", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("expected state RUNNING"));
}

#[test]
fn failures_have_one_line_and_their_own_exit_code() {
    let server = server();
    let output = server.run(&["status", "nosuchrequest"]);
    assert_eq!(output.status.code(), Some(4));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: request nosuchrequest not found\n"
    );
    let output = server.run(&["help", "nosuchtype"]);
    assert_eq!(output.status.code(), Some(4));
    // Issue #10: as the help says, an unknown request type is 4 for start too.
    let output = server.run(&["start", "nosuchtype", "--yes"]);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = server.run(&["--addr", "http://127.0.0.1:1", "status", "x"]);
    assert_eq!(output.status.code(), Some(5));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .starts_with("error: cannot reach the Request Manager at http://127.0.0.1:1")
    );
    // A server that accepts connections but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", silent.local_addr().unwrap());
    let output = server.run(&["--addr", &addr, "--timeout", "300ms", "status", "x"]);
    assert_eq!(
        output.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("did not answer within 300ms"));
    let output = server.run(&["find", "colour=red"]);
    assert_eq!(output.status.code(), Some(2));
    let output = server.run(&["start", "greet", "who=x", "size=9", "--yes"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown request args: size"));
    // Issue #36: a near miss is named.
    for (start, code, said) in [
        (
            ["greet", "whom=x"],
            2,
            "unknown request args: whom (did you mean `who`?)",
        ),
        (
            ["gret", "who=x"],
            4,
            "unknown request type `gret` (did you mean `greet`?)",
        ),
    ] {
        let output = server.run(&["start", start[0], start[1], "--yes"]);
        assert_eq!(output.status.code(), Some(code));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(said), "{stderr}");
    }
    let help = server.stdout(&["--help"]);
    assert!(
        help.contains("5  the Request Manager cannot be reached"),
        "{help}"
    );
    let completions = server.stdout(&["completions", "bash"]);
    assert!(completions.contains("spindle"));
}

#[test]
fn log_follow_prints_a_running_jobs_output_as_it_is_printed() {
    let server = server();
    let go = server.dir.path().join("go");
    let id = server.start(&["talk", &format!("go={}", go.display())]);
    let mut follow = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["log", &id, "--follow"])
        .env("SPINDLE_ADDR", &server.addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let _ = lines_tx.send(line.unwrap());
        }
    });
    // The job is still waiting for `go` when its first line shows.
    let mut seen = Vec::new();
    while !seen.iter().any(|line: &String| line == "first line") {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => seen.push(line),
            Err(err) => panic!("no live output ({err}); so far: {seen:?}"),
        }
    }
    assert!(follow.try_wait().unwrap().is_none(), "follow ended early");
    assert!(
        seen.iter().any(
            |line| line.starts_with("==> chatter (job ") && line.ends_with(" try 1 stdout <==")
        ),
        "{seen:?}"
    );
    std::fs::write(&go, "").unwrap();
    let status = follow.wait().unwrap();
    reader.join().unwrap();
    seen.extend(lines.try_iter());
    assert!(status.success(), "{seen:?}");
    let text = seen.join("\n");
    assert!(text.contains("try 1 stdout <==\nfirst line\n"), "{text}");
    assert!(text.contains("\nlast line\n"), "{text}");
    assert!(text.contains("try 1 stderr <==\nto stderr"), "{text}");
    assert!(
        text.contains("job name: chatter\njob type: shell-command\nstate:    COMPLETE"),
        "{text}"
    );
    assert!(text.contains("stdout:   (shown above)"), "{text}");
}

#[test]
fn log_follow_prints_tries_until_the_request_ends_and_version() {
    let server = server();
    let id = server.start(&["nap", "ms=400"]);
    let output = server.run(&["log", &id, "--follow"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let log = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        log.matches("\n--\n").count(),
        1,
        "every job's try, once each, not the grapher's begin and end jobs: {log}"
    );
    assert!(
        log.contains("job name: sleep\njob type: sleep\nstate:    COMPLETE"),
        "{log}"
    );
    let version = server.stdout(&["version"]);
    assert!(
        version.starts_with("spindle ") && version.contains("Spin Cycle API 2.1.1"),
        "{version}"
    );
}

#[test]
fn colour_on_terminals_only_and_command_help() {
    let server = server();
    let id = server.start(&["greet", "who=bob"]);
    server.wait_state(&id, "COMPLETE");
    let on_terminal = |no_color: bool| {
        let mut command = Command::new("script");
        command
            .args([
                "-qec",
                &format!("{} status {id}", env!("CARGO_BIN_EXE_spindle")),
                "/dev/null",
            ])
            .env("SPINDLE_ADDR", &server.addr)
            .env_remove("NO_COLOR")
            .stdin(Stdio::null());
        if no_color {
            command.env("NO_COLOR", "1");
        }
        String::from_utf8_lossy(&command.output().unwrap().stdout).into_owned()
    };
    assert!(
        on_terminal(false).contains("\u{1b}["),
        "coloured on a terminal"
    );
    let plain = on_terminal(true);
    assert!(
        plain.contains("state: COMPLETE") && !plain.contains("\u{1b}["),
        "{plain:?}"
    );
    let piped = server.stdout(&["status", &id]);
    assert!(!piped.contains("\u{1b}["), "no colour into a pipe");
    let help = server.stdout(&["help", "start"]);
    assert!(help.contains("--yes") && help.contains("--watch"), "{help}");
}

#[test]
fn find_and_log_snapshots() {
    let server = server();
    let id = server.start(&["greet", "who=bob"]);
    server.wait_state(&id, "COMPLETE");
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"[0-9a-v]{20}", "[ID]");
    settings.add_filter(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC", "[TIME]");
    settings.add_filter(r"runtime: +[0-9.]+s", "runtime:  [RUNTIME]");
    settings.add_filter(r"job id: +[a-zA-Z0-9]{4}", "job id:   [JOB]");
    let _guard = settings.bind_to_scope();
    insta::assert_snapshot!(server.stdout(&["find"]), @r"
    ID                   REQUEST                                  USER             STATE     CREATED                 STARTED                 FINISHED                JOBS
    [ID] greet                                    ann              COMPLETE  [TIME] [TIME] [TIME] 1 / 1
    ");
    let hello = server.stdout(&["log", &id]);
    let entry = hello
        .split("--\n")
        .find(|e| e.contains("job name: hello"))
        .unwrap()
        .to_owned();
    insta::assert_snapshot!(entry, @r"
    job id:   [JOB]
    job name: hello
    job type: noop
    state:    COMPLETE
    exit:     0
    error:    
    try:      1
    runtime:  [RUNTIME]
    started:  [TIME]
    finished: [TIME]
    stdout:   
    stderr:
    ");
}

/// Issue #12: `--addr` takes `host:port` as well as a URL, and the caller is the login
/// name of the process's user when neither `$USER` nor `$LOGNAME` is set.
#[test]
fn addr_without_a_scheme_and_the_caller_without_user_variables() {
    let server = server();
    let host_port = server.addr.trim_start_matches("http://").to_owned();
    let output = Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["--addr", &host_port, "start", "greet", "who=x", "--yes"])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .env_remove("SPINDLE_ADDR")
        .current_dir(server.dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id = String::from_utf8(output.stdout)
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .to_owned();
    let login = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let status = server.stdout(&["status", &id]);
    assert!(status.contains(&format!("caller: {login}\n")), "{status}");
    let output = server.run(&["--addr", "ftp://x:1", "status", &id]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("expected http://HOST:PORT"));
}

/// Issue #12: `status` shows every arg the caller gave, and lists and maps print as JSON
/// that a shell takes back, not as escaped strings.
#[test]
fn status_and_info_show_given_args_and_json_values() {
    let server = server();
    let id = server.start(&["greet", "who=bob", "times=2"]);
    let status = server.stdout(&["status", &id]);
    assert!(status.contains("args: who=bob times=2\n"), "{status}");
    let id = server.start(&["greet", r#"who=["ann","o'neil"]"#]);
    let info = server.stdout(&["info", &id]);
    assert!(
        info.contains(r#"args: who='["ann","o'\''neil"]' times=1"#),
        "{info}"
    );
    let status = server.stdout(&["status", &id]);
    assert!(
        status.contains(r#"args: who='["ann","o'\''neil"]'"#),
        "{status}"
    );
}

#[test]
fn the_user_config_file_gives_the_address_and_refuses_unknown_keys() {
    let server = server();
    let home = tempfile::tempdir().unwrap();
    let spindle = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_spindle"))
            .args(args)
            .env_remove("SPINDLE_ADDR")
            .env("HOME", home.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let host_port = server.addr.trim_start_matches("http://");
    std::fs::write(
        home.path().join(".spindle.yaml"),
        format!("addr: {host_port}\n"),
    )
    .unwrap();
    let list = spindle(&[]);
    assert!(
        list.status.success(),
        "{}",
        String::from_utf8_lossy(&list.stderr)
    );
    assert!(String::from_utf8_lossy(&list.stdout).contains("  greet\n"));
    std::fs::write(home.path().join(".spindle.yaml"), "adress: x\n").unwrap();
    let refused = spindle(&["ps"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(".spindle.yaml")
            && stderr.contains("unknown field `adress`, expected one of addr"),
        "{stderr}"
    );
}

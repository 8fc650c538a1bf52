//! How the `spindle` process ends: every command returns an [`Exit`], `main` turns it
//! into the exit status, and `spindle --help` lists them from [`EXIT_CODES`]. This is the
//! one place exit codes are chosen.

/// The outcome of a command, as the shell sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Success,
    /// Something was found wrong: lint errors, a chain that cannot be built, a request
    /// that failed (run, watch), specs with errors (run, server, rm), not running (running).
    Failure,
    /// The command line or its input is wrong: a usage error, a path that cannot be read,
    /// an arg the request does not take or lacks.
    Usage,
    /// watch, start --watch: the request was STOPPED.
    Stopped,
    /// The request or request type does not exist.
    NotFound,
    /// The Request Manager cannot be reached.
    Unreachable,
    /// The Request Manager did not answer within --timeout.
    Timeout,
    /// run: the request was stopped with Ctrl-C.
    Interrupted,
}

impl Exit {
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Stopped => 3,
            Exit::NotFound => 4,
            Exit::Unreachable => 5,
            Exit::Timeout => 6,
            Exit::Interrupted => 130,
        }
    }
}

/// Runs a command's `future` to its [`Exit`] on a runtime of its own.
pub(crate) fn block_on<F: std::future::Future<Output = anyhow::Result<Exit>>>(
    future: F,
) -> anyhow::Result<Exit> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(future)
}

/// The exit codes as `spindle --help` lists them.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0  success (lint: no errors; run: the request completed)
  1  lint found errors (or warnings, with --strict); graph could not build the chain;
     run, watch: the request failed; run, server, rm: the specs have errors
  2  usage error, a path that cannot be read, or bad input (an arg the request does not
     take or lacks)
  3  watch, start --watch: the request was STOPPED
  4  the request (or request type) does not exist
  5  the Request Manager cannot be reached (--addr, SPINDLE_ADDR, addr: in ~/.spindle.yaml)
  6  the Request Manager did not answer within --timeout
  130  run: the request was stopped";

/// One line on stderr: `error: <message>`, `error` in red on terminals.
pub(crate) fn eprintln_failure(message: &str) {
    let style = anstyle::Style::new()
        .bold()
        .fg_color(Some(anstyle::AnsiColor::Red.into()));
    let mut stderr = anstream::stderr().lock();
    let _ = std::io::Write::write_fmt(
        &mut stderr,
        format_args!("{style}error{style:#}: {message}\n"),
    );
}

#[cfg(test)]
mod tests {
    use super::{EXIT_CODES, Exit};

    /// Every exit code has its line in the help, and no two share a code.
    #[test]
    fn the_help_lists_every_exit_code() {
        let all = [
            Exit::Success,
            Exit::Failure,
            Exit::Usage,
            Exit::Stopped,
            Exit::NotFound,
            Exit::Unreachable,
            Exit::Timeout,
            Exit::Interrupted,
        ];
        let mut codes: Vec<u8> = all.iter().map(|exit| exit.code()).collect();
        for code in &codes {
            assert!(
                EXIT_CODES.contains(&format!("\n  {code}  ")),
                "exit code {code} is not in the help"
            );
        }
        codes.dedup();
        assert_eq!(codes.len(), all.len());
    }
}

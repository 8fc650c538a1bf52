//! `spindle lint`: prints every diagnostic of the specs under the given paths.

use std::io::Write;
use std::path::{Path, PathBuf};

use anstyle::{AnsiColor, Style};
use spec::{Diagnostic, Severity};

use crate::exit::Exit;
use clap::ValueEnum;

/// The job types `registry` runs, as the linter checks nodes against them.
pub(crate) fn job_types(registry: &job::Registry) -> spec::JobTypes {
    let mut job_types = spec::JobTypes::new();
    for job_type in registry.types() {
        job_types.add(job_type, registry.required_args(job_type));
    }
    job_types
}

pub(crate) fn run(args: &LintArgs, registry: &job::Registry) -> anyhow::Result<Exit> {
    let mut report = spec::lint(&args.paths)?;
    if !args.any_job_type {
        let registry =
            crate::service::programs::with_config(registry.clone(), args.config.as_deref())?;
        report.check_job_types(&job_types(&registry));
    }
    for diagnostic in &mut report.diagnostics {
        if let Some(file) = &diagnostic.file {
            diagnostic.file = Some(tidy_path(file));
        }
        if args.strict {
            diagnostic.severity = Severity::Error;
        }
    }
    let failed = report.has_errors();
    let mut stdout = anstream::stdout().lock();
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, &report.diagnostics)?;
            writeln!(stdout)?;
        }
        Format::Human => {
            for diagnostic in &report.diagnostics {
                write_human(&mut stdout, diagnostic)?;
            }
            writeln!(stdout, "{}", summary(&report, failed))?;
        }
    }
    Ok(if failed { Exit::Failure } else { Exit::Success })
}

/// `./specs/a.yaml` reads better as `specs/a.yaml`.
fn tidy_path(path: &Path) -> PathBuf {
    path.strip_prefix(".")
        .map_or_else(|_| path.to_path_buf(), Path::to_path_buf)
}

pub(crate) fn write_human(out: &mut impl Write, diagnostic: &Diagnostic) -> std::io::Result<()> {
    let (label, color) = match diagnostic.severity {
        Severity::Error => ("error", AnsiColor::Red),
        Severity::Warning => ("warning", AnsiColor::Yellow),
    };
    let severity_style = Style::new().bold().fg_color(Some(color.into()));
    let place_style = Style::new().bold();
    let mut place = String::new();
    if let Some(file) = &diagnostic.file {
        place.push_str(&file.display().to_string());
        for number in [diagnostic.line, diagnostic.column].into_iter().flatten() {
            place.push_str(&format!(":{number}"));
        }
        place.push_str(": ");
    }
    write!(
        out,
        "{place_style}{place}{place_style:#}{severity_style}{label}{severity_style:#}: "
    )?;
    if let Some(context) = diagnostic.context() {
        write!(out, "{context}: ")?;
    }
    writeln!(out, "{} [{}]", diagnostic.message, diagnostic.code)
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn summary(report: &spec::Report, failed: bool) -> String {
    let scope = format!(
        "{}, {}",
        plural(report.n_files, "file"),
        plural(report.specs.len(), "sequence")
    );
    let (n_errors, n_warnings) = (report.n_errors(), report.n_warnings());
    let style = if failed {
        Style::new().bold().fg_color(Some(AnsiColor::Red.into()))
    } else {
        Style::new().bold().fg_color(Some(AnsiColor::Green.into()))
    };
    let verdict = if failed { "failed" } else { "ok" };
    let found = match (n_errors, n_warnings) {
        (0, 0) => "no errors or warnings".to_owned(),
        (0, w) => plural(w, "warning"),
        (e, 0) => plural(e, "error"),
        (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
    };
    format!("{style}{verdict}{style:#}: {scope}: {found}")
}

/// Lints the specs (with `registry`, also their job nodes against its job types); prints
/// the errors and returns `None` when there are any.
pub(crate) fn load_specs(
    path: &Path,
    registry: Option<&job::Registry>,
) -> anyhow::Result<Option<spec::Specs>> {
    Ok(load_report(path, registry)?.map(|report| report.specs))
}

/// [`load_specs`], with the files read (for their version).
pub(crate) fn load_report(
    path: &Path,
    registry: Option<&job::Registry>,
) -> anyhow::Result<Option<spec::Report>> {
    let report = lint_report(path, registry)?;
    if report.has_errors() {
        let mut stderr = anstream::stderr().lock();
        for diagnostic in report
            .diagnostics
            .iter()
            .filter(|d| d.severity == spec::Severity::Error)
        {
            write_human(&mut stderr, diagnostic)?;
        }
        return Ok(None);
    }
    Ok(Some(report))
}

/// The linter's report on the specs at `path`, job types checked against `registry`.
pub(crate) fn lint_report(
    path: &Path,
    registry: Option<&job::Registry>,
) -> anyhow::Result<spec::Report> {
    let mut report = spec::lint(&[path.to_path_buf()])?;
    if let Some(registry) = registry {
        report.check_job_types(&job_types(registry));
    }
    Ok(report)
}

#[derive(Debug, clap::Args)]
pub(crate) struct LintArgs {
    /// Spec files or directories (walked recursively for .yaml and .yml files)
    #[arg(default_value = ".")]
    pub(crate) paths: Vec<PathBuf>,
    /// Treat warnings as errors
    #[arg(long, short = 's')]
    pub(crate) strict: bool,
    /// Accept any job type (specs written for another binary's job types); by default a
    /// job node's type must be one this binary runs, with the job args it requires
    #[arg(long)]
    pub(crate) any_job_type: bool,
    /// A config file whose job programs (`jobs:`) serve job types besides this binary's
    #[arg(long, env = "SPINDLE_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub(crate) format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// `file:line:col: error: message` lines and a summary
    Human,
    /// A JSON array of diagnostics
    Json,
}

//! Request specs: loading YAML spec files, the spec model, and every linter check.
//!
//! The flow is `load` (files → [`Specs`] plus parse diagnostics) → `check` (static checks
//! of every sequence and node) → `graph` (dependency and arg-flow checks over sequence
//! graphs). [`lint`] runs all three and returns every [`Diagnostic`], sorted by place:
//! one bad node or one unreadable file never hides the others.
//!
//! The model keeps Spin Cycle's spec format unchanged, with one deliberate addition: the
//! built-in sequence `noop`, which does nothing (see [`BUILTIN_NOOP`]).

mod check;
mod diagnostic;
mod graph;
mod job_types;
mod load;
mod model;
pub mod near;
pub mod schedule;
mod yaml;

use std::path::{Path, PathBuf};

pub use diagnostic::{Diagnostic, Pos, Severity};
pub use graph::SequenceGraph;
pub use job_types::JobTypes;
pub use load::{Fingerprint, LoadError, fingerprint};
pub use model::{
    Acl, ArgDecl, Category, LOCK_KEY_MAX, Lock, LockKeyError, Node, NodeArg, NodeSet, Pool,
    Sequence, SequenceArgs, Share, Spanned, Specs, WhenTaken, lock_key,
};
pub use schedule::{Schedule, ScheduleError};

/// The built-in sequence that does nothing, so that a conditional can say `default: noop`.
/// A sequence of that name in the specs takes its place.
pub const BUILTIN_NOOP: &str = "noop";

/// The result of linting: the specs as read, and every diagnostic sorted by file and line.
#[derive(Debug)]
pub struct Report {
    pub specs: Specs,
    pub diagnostics: Vec<Diagnostic>,
    /// Spec files read.
    pub n_files: usize,
    /// The text of each spec file read, in walk order: what a request built from these
    /// specs records as its spec version.
    pub sources: Vec<proto::SpecFile>,
}

impl Report {
    pub fn n_errors(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.severity == Severity::Error)
            .count()
    }

    pub fn n_warnings(&self) -> usize {
        self.diagnostics.len() - self.n_errors()
    }

    /// Checks every job node against the job types of the binary that will run the
    /// specs (issue #12): an unknown `type` (with the near miss, if any) and a required
    /// job arg the node does not pass are errors.
    pub fn check_job_types(&mut self, job_types: &JobTypes) {
        self.diagnostics
            .extend(job_types::check(&self.specs, job_types));
        self.diagnostics
            .sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    }

    pub fn has_errors(&self) -> bool {
        self.n_errors() > 0
    }
}

/// Loads every spec file under `paths` (files are read whatever their name; directories
/// are walked for `.yaml`/`.yml` files) and runs every check.
///
/// Fails only when a path itself cannot be read; problems inside files are diagnostics.
pub fn lint(paths: &[PathBuf]) -> Result<Report, LoadError> {
    let loaded = load::load_paths(paths)?;
    Ok(check_loaded(loaded))
}

/// Lints one spec held in memory, as if read from `file`.
pub fn lint_str(file: &Path, text: &str) -> Report {
    check_loaded(load::load_str(file, text))
}

fn check_loaded(loaded: load::Loaded) -> Report {
    let load::Loaded {
        specs,
        mut diagnostics,
        n_files,
        sources,
    } = loaded;
    diagnostics.extend(check::check(&specs));
    let graph_diagnostics = graph::check(&specs, &diagnostics);
    diagnostics.extend(graph_diagnostics);
    diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    Report {
        specs,
        diagnostics,
        n_files,
        sources,
    }
}

#[cfg(test)]
mod node_lock_tests;
#[cfg(test)]
mod tests;

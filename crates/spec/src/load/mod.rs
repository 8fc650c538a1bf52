//! Reading spec files into the model: directory walking, YAML parsing, and typed reading
//! of every field with a diagnostic for each unknown field, duplicated key or wrong type.
//!
//! As in Spin Cycle, unknown fields and duplicated keys are warnings (the last duplicate
//! wins); a value of the wrong type is an error, and the rest of the file is still read.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::Value as Json;

use crate::model::{
    Acl, ArgDecl, Lock, Node, NodeArg, NodeSet, Sequence, SequenceArgs, Share, Spanned, Specs,
};
use crate::yaml::{self, Value};
use crate::{Diagnostic, Pos, Severity};

/// A path given to the linter that cannot be read at all. Its message holds the
/// operating system's reason, so it is not also its `source` (a printed chain would say
/// it twice).
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {reason}", path.display())]
pub struct LoadError {
    pub path: PathBuf,
    pub reason: std::io::Error,
}

/// Specs read from files, with the diagnostics found while reading them.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub(crate) specs: Specs,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) n_files: usize,
    /// Each file read, with its text, in walk order.
    pub(crate) sources: Vec<proto::SpecFile>,
}

/// Whether a directory walk picks up this file: `.yaml` or `.yml`, in any case.
fn is_spec_file(path: &Path) -> bool {
    path.extension()
        .and_then(|ext| ext.to_str())
        .is_some_and(|ext| ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml"))
}

/// What the spec files under some paths look like from outside: each file's path, size
/// and modification time, in walk order. Equal fingerprints mean nothing was added,
/// removed, or (by its size or time) changed, so a watcher need not read the files again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint(Vec<(PathBuf, u64, Option<std::time::SystemTime>)>);

/// The [`Fingerprint`] of the spec files [`crate::lint`] would read under `paths`.
pub fn fingerprint(paths: &[PathBuf]) -> Result<Fingerprint, LoadError> {
    let (files, _) = spec_files(paths)?;
    Ok(Fingerprint(
        files
            .into_iter()
            .map(|file| {
                let metadata = std::fs::metadata(&file).ok();
                let size = metadata.as_ref().map_or(0, std::fs::Metadata::len);
                let modified = metadata.and_then(|m| m.modified().ok());
                (file, size, modified)
            })
            .collect(),
    ))
}

/// The files under `paths`: directories walked recursively in lexical order (their
/// `.yaml`/`.yml` files), files named directly whatever their extension; with the walk's
/// errors as diagnostics.
fn spec_files(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<Diagnostic>), LoadError> {
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|reason| LoadError {
            path: path.clone(),
            reason,
        })?;
        if !metadata.is_dir() {
            files.push(path.clone());
            continue;
        }
        let walker = walkdir::WalkDir::new(path)
            .follow_links(true)
            .sort_by_file_name();
        for entry in walker {
            match entry {
                Ok(entry) if entry.file_type().is_file() && is_spec_file(entry.path()) => {
                    files.push(entry.into_path());
                }
                Ok(_) => {}
                Err(err) => {
                    let file = err.path().unwrap_or(path).to_path_buf();
                    diagnostics.push(io_diagnostic(file, &err.to_string()));
                }
            }
        }
    }
    Ok((files, diagnostics))
}

/// Reads every spec file under `paths`. Directories are walked recursively in lexical
/// order; files named directly are read whatever their extension.
pub(crate) fn load_paths(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    let (files, diagnostics) = spec_files(paths)?;
    let mut loaded = Loaded {
        diagnostics,
        ..Loaded::default()
    };
    // Files are read and parsed in parallel, then merged in walk order so that the first
    // definition of a sequence is the one kept.
    type Read = (Arc<PathBuf>, Parsed, Vec<Diagnostic>, Option<String>);
    let results: Vec<Read> = files
        .into_par_iter()
        .map(|file| {
            let file = Arc::new(file);
            let mut source = None;
            let (sequences, diagnostics) = match std::fs::read(&*file) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => {
                        let read = read_file(&file, &text);
                        source = Some(text);
                        read
                    }
                    Err(err) => {
                        let message = format!(
                            "not UTF-8 text (invalid byte at offset {}); expected a YAML file",
                            err.utf8_error().valid_up_to()
                        );
                        (
                            Parsed::default(),
                            vec![io_diagnostic(file.to_path_buf(), &message)],
                        )
                    }
                },
                Err(err) => (
                    Parsed::default(),
                    vec![io_diagnostic(file.to_path_buf(), &err.to_string())],
                ),
            };
            (file, sequences, diagnostics, source)
        })
        .collect();
    for (file, sequences, diagnostics, source) in results {
        loaded.n_files += 1;
        if let Some(text) = source {
            loaded.sources.push(proto::SpecFile {
                path: file.display().to_string(),
                text,
            });
        }
        loaded.diagnostics.extend(diagnostics);
        merge(&mut loaded, &file, sequences);
    }
    Ok(loaded)
}

/// Reads one spec held in memory.
pub(crate) fn load_str(file: &Path, text: &str) -> Loaded {
    let mut loaded = Loaded {
        n_files: 1,
        ..Loaded::default()
    };
    let file = Arc::new(file.to_path_buf());
    let (parsed, diagnostics) = read_file(&file, text);
    loaded.diagnostics = diagnostics;
    loaded.sources.push(proto::SpecFile {
        path: file.display().to_string(),
        text: text.to_owned(),
    });
    merge(&mut loaded, &file, parsed);
    loaded
}

fn io_diagnostic(file: PathBuf, message: &str) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: Some(file),
        line: None,
        column: None,
        sequence: None,
        node: None,
        field: None,
        message: format!("cannot read spec file: {message}"),
        code: "io",
    }
}

/// Parses one file into its sequences, with the diagnostics found on the way.
fn read_file(file: &Arc<PathBuf>, text: &str) -> (Parsed, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let root = match yaml::parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => return (Parsed::default(), diagnostics),
        Err(err) => {
            diagnostics.push(Diagnostic {
                severity: Severity::Error,
                file: Some(file.to_path_buf()),
                line: Some(err.pos.line),
                column: Some(err.pos.column),
                sequence: None,
                node: None,
                field: None,
                message: format!("invalid YAML: {}", err.message),
                code: "yaml",
            });
            return (Parsed::default(), diagnostics);
        }
    };
    let mut reader = Reader {
        file,
        diagnostics: &mut diagnostics,
    };
    let parsed = reader.file_root(&root);
    (parsed, diagnostics)
}

/// What one file defines.
#[derive(Default)]
struct Parsed {
    sequences: Vec<Sequence>,
    schedules: Vec<crate::Schedule>,
    pools: Vec<crate::model::Pool>,
}

/// Adds a file's sequences to the specs; a name already defined is an error naming both
/// files, and the later definition is dropped.
fn merge(loaded: &mut Loaded, file: &Path, parsed: Parsed) {
    for schedule in parsed.schedules {
        if let Err(schedule) = loaded.specs.add_schedule(schedule) {
            let first = loaded
                .specs
                .schedules()
                .iter()
                .find(|s| s.name == schedule.name)
                .map(|s| format!("{} at line {}", s.file.display(), s.pos.line))
                .unwrap_or_default();
            loaded.diagnostics.push(Diagnostic {
                severity: Severity::Error,
                file: Some(file.to_path_buf()),
                line: Some(schedule.pos.line),
                column: Some(schedule.pos.column),
                sequence: None,
                node: None,
                field: Some(format!("schedules.{}", schedule.name)),
                message: format!(
                    "schedule `{}` is already defined in {first}; expected each schedule name once across all spec files",
                    schedule.name
                ),
                code: "duplicate-schedule",
            });
        }
    }
    for pool in parsed.pools {
        if let Err(pool) = loaded.specs.add_pool(pool) {
            let first = loaded
                .specs
                .pools()
                .iter()
                .find(|p| p.name == pool.name)
                .map(|p| format!("{} at line {}", p.file.display(), p.pos.line))
                .unwrap_or_default();
            loaded.diagnostics.push(Diagnostic {
                severity: Severity::Error,
                file: Some(file.to_path_buf()),
                line: Some(pool.pos.line),
                column: Some(pool.pos.column),
                sequence: None,
                node: None,
                field: Some(format!("pools.{}", pool.name)),
                message: format!(
                    "pool `{}` is already defined in {first}; expected each pool name once across all spec files",
                    pool.name
                ),
                code: "duplicate-pool",
            });
        }
    }
    for sequence in parsed.sequences {
        if let Some(first) = loaded.specs.get(&sequence.name) {
            let message = format!(
                "sequence `{}` is already defined in {} at line {}; expected each sequence name once across all spec files",
                sequence.name,
                first.file.display(),
                first.pos.line
            );
            loaded.diagnostics.push(Diagnostic {
                severity: Severity::Error,
                file: Some(file.to_path_buf()),
                line: Some(sequence.pos.line),
                column: Some(sequence.pos.column),
                sequence: Some(sequence.name.clone()),
                node: None,
                field: None,
                message,
                code: "duplicate-sequence",
            });
            continue;
        }
        // `get` just said the name is free.
        let _ = loaded.specs.insert(sequence);
    }
}

/// Where in the specs a value being read belongs.
mod reader;
mod shapes;

use reader::{Place, Reader, json};

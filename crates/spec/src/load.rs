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

use crate::model::{Acl, ArgDecl, Node, NodeArg, NodeSet, Sequence, SequenceArgs, Spanned, Specs};
use crate::yaml::{self, Value};
use crate::{Diagnostic, Pos, Severity};

/// A path given to the linter that cannot be read at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {source}", path.display())]
pub struct LoadError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
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
        let metadata = std::fs::metadata(path).map_err(|source| LoadError {
            path: path.clone(),
            source,
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
#[derive(Clone, Copy)]
struct Place<'p> {
    sequence: Option<&'p str>,
    node: Option<&'p str>,
}

const TOP_FIELDS: &[&str] = &["sequences", "schedules"];
const SCHEDULE_FIELDS: &[&str] = &["cron", "timezone", "request", "args", "overlap", "missed"];
const SEQUENCE_FIELDS: &[&str] = &["request", "args", "acl", "nodes", "timeout"];
const SEQUENCE_ARGS_FIELDS: &[&str] = &["required", "optional", "static"];
const ARG_FIELDS: &[&str] = &["name", "desc", "default"];
const ACL_FIELDS: &[&str] = &["role", "admin", "ops"];
const NODE_FIELDS: &[&str] = &[
    "category",
    "type",
    "args",
    "sets",
    "deps",
    "retry",
    "retryWait",
    "timeout",
    "each",
    "parallel",
    "if",
    "eq",
];
const NODE_ARG_FIELDS: &[&str] = &["expected", "given"];
const NODE_SET_FIELDS: &[&str] = &["arg", "as"];

struct Reader<'a> {
    file: &'a Arc<PathBuf>,
    diagnostics: &'a mut Vec<Diagnostic>,
}

impl Reader<'_> {
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site shape, all fields of a diagnostic"
    )]
    fn push(
        &mut self,
        severity: Severity,
        code: &'static str,
        pos: Pos,
        place: Place<'_>,
        field: Option<&str>,
        message: String,
    ) {
        self.diagnostics.push(Diagnostic {
            severity,
            file: Some(self.file.to_path_buf()),
            line: Some(pos.line),
            column: Some(pos.column),
            sequence: place.sequence.map(str::to_owned),
            node: place.node.map(str::to_owned),
            field: field.map(str::to_owned),
            message,
            code,
        });
    }

    fn type_error(&mut self, node: &yaml::Node, place: Place<'_>, field: &str, expected: &str) {
        let message = format!("expected {expected}, found {}", node.describe());
        self.push(
            Severity::Error,
            "type",
            node.pos,
            place,
            Some(field),
            message,
        );
    }

    /// The entries of a map whose keys are field names, keyed by the known field name.
    /// Warns on unknown and duplicated fields; the last duplicate wins.
    fn fields<'y>(
        &mut self,
        map: &'y yaml::Node,
        place: Place<'_>,
        what: &str,
        field_prefix: &str,
        known: &[&'static str],
    ) -> BTreeMap<&'static str, (Pos, &'y yaml::Node)> {
        let mut fields: BTreeMap<&'static str, (Pos, &'y yaml::Node)> = BTreeMap::new();
        let Value::Map(entries) = &map.value else {
            return fields;
        };
        for (key, value) in entries {
            let Some(name) = key.scalar() else {
                self.type_error(
                    key,
                    place,
                    field_prefix.trim_end_matches('.'),
                    "a field name",
                );
                continue;
            };
            // Only a warning names the field (made for it: most fields warn of nothing).
            let path = || format!("{field_prefix}{name}");
            let Some(&known_name) = known.iter().find(|k| **k == name) else {
                let message = format!(
                    "unknown field `{name}` in {what}; expected one of: {}",
                    known.join(", ")
                );
                self.push(
                    Severity::Warning,
                    "unknown-field",
                    key.pos,
                    place,
                    Some(&path()),
                    message,
                );
                continue;
            };
            if let Some((first, _)) = fields.get(known_name) {
                let message = format!(
                    "field `{name}` is given twice in {what} (first at line {}); the last one is used",
                    first.line
                );
                self.push(
                    Severity::Warning,
                    "duplicate-key",
                    key.pos,
                    place,
                    Some(&path()),
                    message,
                );
            }
            fields.insert(known_name, (key.pos, value));
        }
        fields
    }

    /// The entries of a map keyed by names (sequences, nodes, `eq`), warning on duplicated
    /// names; the last duplicate wins but keeps the first one's place in the order.
    fn named_entries<'y>(
        &mut self,
        map: &'y yaml::Node,
        place: Place<'_>,
        field: &str,
        what: &str,
    ) -> Vec<(Spanned<String>, &'y yaml::Node)> {
        let mut out: Vec<(Spanned<String>, &'y yaml::Node)> = Vec::new();
        let Value::Map(entries) = &map.value else {
            return out;
        };
        let mut index: HashMap<&'y str, usize> = HashMap::with_capacity(entries.len());
        for (key, value) in entries {
            let Some(name) = key.scalar() else {
                self.type_error(key, place, field, &format!("a {what} name"));
                continue;
            };
            if let Some(&slot) = index.get(name) {
                let message = format!(
                    "{what} `{name}` is given twice (first at line {}); the last one is used",
                    out[slot].0.pos.line
                );
                self.push(
                    Severity::Warning,
                    "duplicate-key",
                    key.pos,
                    place,
                    Some(field),
                    message,
                );
                out[slot] = (Spanned::new(name.to_owned(), key.pos), value);
                continue;
            }
            index.insert(name, out.len());
            out.push((Spanned::new(name.to_owned(), key.pos), value));
        }
        out
    }

    fn is_map(&mut self, node: &yaml::Node, place: Place<'_>, field: &str, expected: &str) -> bool {
        match node.value {
            Value::Map(_) => true,
            Value::Null => false,
            _ => {
                self.type_error(node, place, field, expected);
                false
            }
        }
    }

    fn list<'y>(
        &mut self,
        node: &'y yaml::Node,
        place: Place<'_>,
        field: &str,
        expected: &str,
    ) -> &'y [yaml::Node] {
        match &node.value {
            Value::Seq(items) => items,
            Value::Null => &[],
            _ => {
                self.type_error(node, place, field, expected);
                &[]
            }
        }
    }

    fn string(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
    ) -> Option<Spanned<String>> {
        match &node.value {
            Value::Scalar { text, .. } => Some(Spanned::new(text.clone(), node.pos)),
            Value::Null => None,
            _ => {
                self.type_error(node, place, field, "a string");
                None
            }
        }
    }

    fn boolean(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
    ) -> Option<Spanned<bool>> {
        let value = match &node.value {
            Value::Null => return None,
            Value::Scalar { text, .. } => match text.as_str() {
                "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y"
                | "Y" => Some(true),
                "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n"
                | "N" => Some(false),
                _ => None,
            },
            _ => None,
        };
        if value.is_none() {
            self.type_error(node, place, field, "true or false");
        }
        value.map(|value| Spanned::new(value, node.pos))
    }

    fn uint(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
        meaning: &str,
    ) -> Option<Spanned<u32>> {
        let value = match &node.value {
            Value::Null => return None,
            Value::Scalar { text, .. } => text.parse::<u32>().ok(),
            _ => None,
        };
        if value.is_none() {
            let expected = format!("a non-negative integer ({meaning})");
            self.type_error(node, place, field, &expected);
        }
        value.map(|value| Spanned::new(value, node.pos))
    }

    fn string_list(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
        expected: &str,
    ) -> Vec<Spanned<String>> {
        let items = self.list(node, place, field, expected);
        items
            .iter()
            .filter_map(|item| self.string(item, place, field))
            .collect()
    }

    fn file_root(&mut self, root: &yaml::Node) -> Parsed {
        let place = Place {
            sequence: None,
            node: None,
        };
        let mut parsed = Parsed::default();
        if !self.is_map(root, place, "sequences", "a map with the key `sequences`") {
            return parsed;
        }
        let fields = self.fields(root, place, "a spec file", "", TOP_FIELDS);
        if let Some(&(_, schedules)) = fields.get("schedules")
            && self.is_map(
                schedules,
                place,
                "schedules",
                "a map of schedule names to schedules",
            )
        {
            let entries = self.named_entries(schedules, place, "schedules", "schedule");
            parsed.schedules = entries
                .into_iter()
                .map(|(name, body)| self.schedule(name, body))
                .collect();
        }
        let Some(&(_, sequences)) = fields.get("sequences") else {
            return parsed;
        };
        if !self.is_map(
            sequences,
            place,
            "sequences",
            "a map of sequence names to sequences",
        ) {
            return parsed;
        }
        let entries = self.named_entries(sequences, place, "sequences", "sequence");
        parsed.sequences = entries
            .into_iter()
            .map(|(name, body)| self.sequence(name, body))
            .collect();
        parsed
    }

    fn schedule(&mut self, name: Spanned<String>, body: &yaml::Node) -> crate::Schedule {
        let mut schedule = crate::Schedule {
            name: name.value,
            file: Arc::clone(self.file),
            pos: name.pos,
            cron: None,
            timezone: None,
            request: None,
            args: proto::JobArgs::new(),
            overlap: None,
            missed: None,
        };
        let place = Place {
            sequence: None,
            node: None,
        };
        let prefix = format!("schedules.{}.", schedule.name);
        let field = |name: &str| format!("{prefix}{name}");
        if !self.is_map(
            body,
            place,
            &format!("schedules.{}", schedule.name),
            "a schedule (a map with `cron` and `request`)",
        ) {
            return schedule;
        }
        let fields = self.fields(body, place, "a schedule", &prefix, SCHEDULE_FIELDS);
        for (&name, &(_, value)) in &fields {
            match name {
                "cron" => schedule.cron = self.string(value, place, &field("cron")),
                "timezone" => schedule.timezone = self.string(value, place, &field("timezone")),
                "request" => schedule.request = self.string(value, place, &field("request")),
                "overlap" => schedule.overlap = self.string(value, place, &field("overlap")),
                "missed" => schedule.missed = self.string(value, place, &field("missed")),
                "args" => match json(value) {
                    Some(Json::Object(args)) => schedule.args = args.into(),
                    None => {}
                    Some(_) => self.type_error(
                        value,
                        place,
                        &field("args"),
                        "a map of arg names to values",
                    ),
                },
                _ => unreachable!("field {name} is in SCHEDULE_FIELDS"),
            }
        }
        schedule
    }

    fn sequence(&mut self, name: Spanned<String>, body: &yaml::Node) -> Sequence {
        let mut sequence = Sequence {
            name: name.value,
            file: Arc::clone(self.file),
            pos: name.pos,
            request: false,
            args: SequenceArgs::default(),
            acl: Vec::new(),
            nodes: Vec::new(),
            timeout: None,
            field_pos: BTreeMap::new(),
        };
        let seq_name = sequence.name.clone();
        let place = Place {
            sequence: Some(&seq_name),
            node: None,
        };
        if !self.is_map(
            body,
            place,
            "",
            "a sequence (a map with `args` and `nodes`)",
        ) {
            return sequence;
        }
        let fields = self.fields(body, place, "a sequence", "", SEQUENCE_FIELDS);
        for (&field, &(key_pos, value)) in &fields {
            sequence.field_pos.insert(field, key_pos);
            match field {
                "request" => {
                    sequence.request = self
                        .boolean(value, place, "request")
                        .is_some_and(|r| r.value);
                }
                "args" => sequence.args = self.sequence_args(value, place, &mut sequence.field_pos),
                "acl" => {
                    let items = self.list(value, place, "acl", "a list of ACL entries");
                    sequence.acl = items
                        .iter()
                        .filter_map(|item| self.acl(item, place))
                        .collect();
                }
                "nodes" => {
                    if self.is_map(value, place, "nodes", "a map of node names to nodes") {
                        let entries = self.named_entries(value, place, "nodes", "node");
                        sequence.nodes = entries
                            .into_iter()
                            .map(|(node_name, node_body)| {
                                self.node(&seq_name, node_name, node_body)
                            })
                            .collect();
                    }
                }
                "timeout" => sequence.timeout = self.string(value, place, "timeout"),
                _ => unreachable!("field {field} is in SEQUENCE_FIELDS"),
            }
        }
        sequence
    }

    fn sequence_args(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field_pos: &mut BTreeMap<&'static str, Pos>,
    ) -> SequenceArgs {
        let mut args = SequenceArgs::default();
        if !self.is_map(
            node,
            place,
            "args",
            "a map with `required`, `optional` and `static` lists",
        ) {
            return args;
        }
        let fields = self.fields(node, place, "sequence args", "args.", SEQUENCE_ARGS_FIELDS);
        for (&kind, &(key_pos, value)) in &fields {
            let field = match kind {
                "required" => "args.required",
                "optional" => "args.optional",
                _ => "args.static",
            };
            field_pos.insert(field, key_pos);
            let items = self.list(value, place, field, "a list of args (`- name: ...`)");
            let decls: Vec<ArgDecl> = items
                .iter()
                .filter_map(|item| self.arg_decl(item, place, field))
                .collect();
            match kind {
                "required" => args.required = decls,
                "optional" => args.optional = decls,
                _ => args.statics = decls,
            }
        }
        args
    }

    fn arg_decl(&mut self, item: &yaml::Node, place: Place<'_>, field: &str) -> Option<ArgDecl> {
        let mut decl = ArgDecl {
            name: None,
            desc: String::new(),
            default: None,
            pos: item.pos,
        };
        match item.value {
            Value::Map(_) => {}
            // A null entry has no name; the static checks say so.
            Value::Null => return Some(decl),
            _ => {
                self.type_error(item, place, field, "an arg (`name:`, `desc:`, `default:`)");
                return None;
            }
        }
        let fields = self.fields(item, place, "an arg", &format!("{field}."), ARG_FIELDS);
        for (&name, &(_, value)) in &fields {
            let path = format!("{field}.{name}");
            match name {
                "name" => decl.name = self.string(value, place, &path),
                "desc" => {
                    decl.desc = self
                        .string(value, place, &path)
                        .map(|d| d.value)
                        .unwrap_or_default();
                }
                _ => decl.default = json(value).map(|default| Spanned::new(default, value.pos)),
            }
        }
        Some(decl)
    }

    fn acl(&mut self, item: &yaml::Node, place: Place<'_>) -> Option<Acl> {
        let mut acl = Acl {
            role: None,
            admin: None,
            ops: Vec::new(),
            pos: item.pos,
        };
        match item.value {
            Value::Map(_) => {}
            Value::Null => return Some(acl),
            _ => {
                self.type_error(
                    item,
                    place,
                    "acl",
                    "an ACL entry (`role:`, `admin:`, `ops:`)",
                );
                return None;
            }
        }
        let fields = self.fields(item, place, "an ACL entry", "acl.", ACL_FIELDS);
        for (&name, &(_, value)) in &fields {
            match name {
                "role" => acl.role = self.string(value, place, "acl.role"),
                "admin" => acl.admin = self.boolean(value, place, "acl.admin"),
                _ => {
                    acl.ops = self.string_list(
                        value,
                        place,
                        "acl.ops",
                        "a list of operations (start, stop)",
                    )
                }
            }
        }
        Some(acl)
    }

    fn node(&mut self, sequence: &str, name: Spanned<String>, body: &yaml::Node) -> Node {
        let mut node = Node {
            name: name.value,
            pos: name.pos,
            category: None,
            node_type: None,
            args: Vec::new(),
            sets: Vec::new(),
            deps: Vec::new(),
            retry: None,
            retry_wait: None,
            timeout: None,
            each: Vec::new(),
            parallel: None,
            if_arg: None,
            eq: Vec::new(),
            field_pos: BTreeMap::new(),
        };
        let node_name = node.name.clone();
        let place = Place {
            sequence: Some(sequence),
            node: Some(&node_name),
        };
        if !self.is_map(
            body,
            place,
            "",
            "a node (a map with `category`, `type`, ...)",
        ) {
            return node;
        }
        let fields = self.fields(body, place, "a node", "", NODE_FIELDS);
        for (&field, &(key_pos, value)) in &fields {
            node.field_pos.insert(field, key_pos);
            match field {
                "category" => node.category = self.string(value, place, field),
                "type" => node.node_type = self.string(value, place, field),
                "args" => {
                    let items =
                        self.list(value, place, field, "a list of args (`- expected: ...`)");
                    node.args = items
                        .iter()
                        .filter_map(|item| self.node_arg(item, place))
                        .collect();
                }
                "sets" => {
                    let items = self.list(value, place, field, "a list of sets (`- arg: ...`)");
                    node.sets = items
                        .iter()
                        .filter_map(|item| self.node_set(item, place))
                        .collect();
                }
                "deps" => node.deps = self.string_list(value, place, field, "a list of node names"),
                "retry" => node.retry = self.uint(value, place, field, "the number of retries"),
                "retryWait" => node.retry_wait = self.string(value, place, field),
                "timeout" => node.timeout = self.string(value, place, field),
                "each" => {
                    node.each =
                        self.string_list(value, place, field, "a list of `list:element` entries");
                }
                "parallel" => {
                    node.parallel =
                        self.uint(value, place, field, "how many expansions run at once");
                }
                "if" => node.if_arg = self.string(value, place, field),
                "eq" => {
                    if self.is_map(value, place, field, "a map of values to sequence names") {
                        let entries = self.named_entries(value, place, field, "`eq` value");
                        for (key, target) in entries {
                            if let Some(target) = self.string(target, place, field) {
                                node.eq.push((key, target));
                            }
                        }
                    }
                }
                _ => unreachable!("field {field} is in NODE_FIELDS"),
            }
        }
        node
    }

    fn node_arg(
        &mut self,
        item: &yaml::Node,
        place: Place<'_>,
    ) -> Option<Spanned<Option<NodeArg>>> {
        match item.value {
            Value::Map(_) => {}
            Value::Null => return Some(Spanned::new(None, item.pos)),
            _ => {
                self.type_error(
                    item,
                    place,
                    "args",
                    "an arg (`expected:` and optional `given:`)",
                );
                return None;
            }
        }
        let fields = self.fields(item, place, "a node's arg", "args.", NODE_ARG_FIELDS);
        let mut arg = NodeArg {
            expected: None,
            given: None,
        };
        for (&name, &(_, value)) in &fields {
            if name == "expected" {
                arg.expected = self.string(value, place, "args.expected");
            } else {
                arg.given = self.string(value, place, "args.given");
            }
        }
        Some(Spanned::new(Some(arg), item.pos))
    }

    fn node_set(
        &mut self,
        item: &yaml::Node,
        place: Place<'_>,
    ) -> Option<Spanned<Option<NodeSet>>> {
        match item.value {
            Value::Map(_) => {}
            Value::Null => return Some(Spanned::new(None, item.pos)),
            _ => {
                self.type_error(item, place, "sets", "a set (`arg:` and optional `as:`)");
                return None;
            }
        }
        let fields = self.fields(item, place, "a node's set", "sets.", NODE_SET_FIELDS);
        let mut set = NodeSet {
            arg: None,
            r#as: None,
        };
        for (&name, &(_, value)) in &fields {
            if name == "arg" {
                set.arg = self.string(value, place, "sets.arg");
            } else {
                set.r#as = self.string(value, place, "sets.as");
            }
        }
        Some(Spanned::new(Some(set), item.pos))
    }
}

/// A YAML value as JSON, scalars kept as the text written; `None` for null.
fn json(node: &yaml::Node) -> Option<Json> {
    match &node.value {
        Value::Null => None,
        Value::Scalar { text, .. } => Some(Json::String(text.clone())),
        Value::Seq(items) => Some(Json::Array(
            items
                .iter()
                .map(|item| json(item).unwrap_or(Json::Null))
                .collect(),
        )),
        Value::Map(entries) => Some(Json::Object(
            entries
                .iter()
                .map(|(key, value)| {
                    let key = key.scalar().unwrap_or_default().to_owned();
                    (key, json(value).unwrap_or(Json::Null))
                })
                .collect(),
        )),
    }
}

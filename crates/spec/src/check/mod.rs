//! Static checks (specs.md section 4): every sequence and every node on its own, plus the
//! sequences its nodes call. Codes are Spin Cycle's check numbers: S1-S11 and SW1 for
//! sequences, N1-N23 and NW1-NW5 for nodes; Spindle's L1-L7 for locks.

use proto::RequestArgType;
use std::collections::{HashMap, HashSet};

use crate::Severity::{Error, Warning};
use crate::model::{Category, Node, Sequence, Specs, split_each};
use crate::{Diagnostic, Pos, Severity};

pub(crate) fn check(specs: &Specs) -> Vec<Diagnostic> {
    let mut checker = Checker {
        specs,
        out: Vec::new(),
    };
    for sequence in specs.sequences() {
        checker.sequence(sequence);
        for node in &sequence.nodes {
            checker.node(sequence, node);
        }
    }
    locks::lock_limits_agree(&mut checker);
    for schedule in specs.schedules() {
        schedule_checks(specs, schedule, &mut checker.out);
    }
    checker.out
}

/// A schedule's cron expression, time zone and policies parse; it names a request type
/// and gives every required arg of it, and no arg it does not have.
fn schedule_checks(specs: &Specs, schedule: &crate::Schedule, out: &mut Vec<Diagnostic>) {
    let mut push = |pos: Pos, field: &str, message: String| {
        out.push(Diagnostic {
            severity: Error,
            file: Some(schedule.file.to_path_buf()),
            line: Some(pos.line),
            column: Some(pos.column),
            sequence: None,
            node: None,
            field: Some(format!("schedules.{}.{field}", schedule.name)),
            message: format!("schedule `{}`: {message}", schedule.name),
            code: "schedule",
        });
    };
    if let Err(err) = schedule.fires() {
        let field = err.field();
        let pos = match field {
            "timezone" => schedule.timezone.as_ref().map(|v| v.pos),
            "overlap" => schedule.overlap.as_ref().map(|v| v.pos),
            "missed" => schedule.missed.as_ref().map(|v| v.pos),
            "request" => schedule.request.as_ref().map(|v| v.pos),
            _ => schedule.cron.as_ref().map(|v| v.pos),
        }
        .unwrap_or(schedule.pos);
        push(pos, field, err.to_string());
    }
    let Some(request) = &schedule.request else {
        return;
    };
    let Some(sequence) = specs.get(&request.value).filter(|s| s.request) else {
        let known: Vec<&str> = specs.requests().iter().map(|s| s.name.as_str()).collect();
        push(
            request.pos,
            "request",
            format!(
                "`{}` is not a request type{}; expected one of: {}",
                request.value,
                crate::near::did_you_mean(&request.value, known.iter().copied()),
                quoted(known)
            ),
        );
        return;
    };
    let name_of = |decl: &crate::ArgDecl| decl.name.as_ref().map(|n| n.value.clone());
    let required: Vec<String> = sequence.args.required.iter().filter_map(name_of).collect();
    let optional: Vec<String> = sequence.args.optional.iter().filter_map(name_of).collect();
    let missing: Vec<&str> = required
        .iter()
        .filter(|name| !schedule.args.contains_key(name.as_str()))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        push(
            request.pos,
            "args",
            format!(
                "request `{}` requires {}, which `args` does not give",
                request.value,
                quoted(missing)
            ),
        );
    }
    for name in schedule.args.keys() {
        if !required.contains(name) && !optional.contains(name) {
            push(
                schedule.pos,
                "args",
                format!(
                    "request `{}` has no arg `{name}`{}; expected one of: {}",
                    request.value,
                    crate::near::did_you_mean(
                        name,
                        required.iter().chain(&optional).map(String::as_str)
                    ),
                    quoted(required.iter().chain(&optional).map(String::as_str))
                ),
            );
        }
    }
}

/// `` `a`, `b` `` for messages.
pub(crate) fn quoted<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Names that occur more than once, in order of their second occurrence.
fn duplicates<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    let mut dups = Vec::new();
    for name in names {
        if !seen.insert(name) && !dups.contains(&name) {
            dups.push(name);
        }
    }
    dups
}

struct Checker<'s> {
    specs: &'s Specs,
    out: Vec<Diagnostic>,
}

mod locks;
pub(crate) use locks::pool_diagnostic;
mod node;
mod rollout;
mod sequence;

impl Checker<'_> {
    #[allow(clippy::too_many_arguments, reason = "all fields of a diagnostic")]
    fn push(
        &mut self,
        severity: Severity,
        code: &'static str,
        sequence: &Sequence,
        node: Option<&Node>,
        field: &str,
        pos: Pos,
        message: String,
    ) {
        let place = SpecPlace {
            sequence,
            node,
            field,
            pos,
        };
        self.out.push(place.diagnostic(severity, code, message));
    }
}

/// A default value as written: strings bare, lists and maps as JSON.
fn shown_value(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => format!("`{text}`"),
        other => format!("`{other}`"),
    }
}

/// A place in a sequence that a diagnostic points at.
pub(crate) struct SpecPlace<'a> {
    pub(crate) sequence: &'a Sequence,
    pub(crate) node: Option<&'a Node>,
    /// Empty when the diagnostic is about no field in particular.
    pub(crate) field: &'a str,
    pub(crate) pos: Pos,
}

impl SpecPlace<'_> {
    pub(crate) fn diagnostic(
        &self,
        severity: Severity,
        code: &'static str,
        message: String,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            file: Some(self.sequence.file.to_path_buf()),
            line: Some(self.pos.line),
            column: Some(self.pos.column),
            sequence: Some(self.sequence.name.clone()),
            node: self.node.map(|node| node.name.clone()),
            field: (!self.field.is_empty()).then(|| self.field.to_owned()),
            message,
            code,
        }
    }
}

/// What is wrong with a `timeout` value, if anything.
fn timeout_problem(value: &str) -> Option<String> {
    match proto::duration::parse(value) {
        Err(err) => Some(format!(
            "invalid `timeout`: {err}; expected a Go duration such as 30s or 5m"
        )),
        Ok(duration) if duration.is_zero() => {
            Some("`timeout` is 0; expected a duration greater than 0 (or no timeout)".to_owned())
        }
        Ok(_) => None,
    }
}

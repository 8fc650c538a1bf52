//! Static checks (specs.md section 4): every sequence and every node on its own, plus the
//! sequences its nodes call. Codes are Spin Cycle's check numbers: S1-S11 and SW1 for
//! sequences, N1-N23 and NW1-NW5 for nodes.

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
        let field = err
            .strip_prefix('`')
            .and_then(|rest| rest.split_once('`'))
            .map_or("cron", |(field, _)| field)
            .to_owned();
        let pos = match field.as_str() {
            "timezone" => schedule.timezone.as_ref().map(|v| v.pos),
            "overlap" => schedule.overlap.as_ref().map(|v| v.pos),
            "missed" => schedule.missed.as_ref().map(|v| v.pos),
            "request" => schedule.request.as_ref().map(|v| v.pos),
            _ => schedule.cron.as_ref().map(|v| v.pos),
        }
        .unwrap_or(schedule.pos);
        push(pos, &field, err);
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
                "`{}` is not a request type; expected one of: {}",
                request.value,
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
                    "request `{}` has no arg `{name}`; expected one of: {}",
                    request.value,
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

    fn sequence(&mut self, seq: &Sequence) {
        self.sequence_timeout(seq);
        self.sequence_args(seq);
        self.sequence_acls(seq);
        self.unique_arg_names(seq);
        self.has_nodes(seq);
        self.single_setters(seq);
    }

    /// Spindle's sequence `timeout`: a positive duration.
    fn sequence_timeout(&mut self, seq: &Sequence) {
        if let Some(timeout) = &seq.timeout
            && let Some(message) = timeout_problem(&timeout.value)
        {
            self.push(Error, "timeout", seq, None, "timeout", timeout.pos, message);
        }
    }

    /// S1-S5, S10: the names and defaults of the three kinds of args.
    fn sequence_args(&mut self, seq: &Sequence) {
        // S1-S5: names and defaults of the three kinds of args.
        for (kind, arg) in seq.args.all() {
            let field = format!("args.{kind}");
            if arg.name.is_none() {
                let code = match kind {
                    RequestArgType::Required => "S1",
                    RequestArgType::Optional => "S2",
                    RequestArgType::Static => "S3",
                };
                let message = format!("{kind} arg has no `name`; expected `- name: <arg name>`");
                self.push(
                    Error,
                    code,
                    seq,
                    None,
                    &format!("{field}.name"),
                    arg.pos,
                    message,
                );
            }
            let shown = arg
                .name()
                .map_or_else(|| "(unnamed)".to_owned(), |name| format!("`{name}`"));
            match (kind, &arg.default) {
                (RequestArgType::Optional, None) => {
                    let message = format!(
                        "optional arg {shown} has no `default`; expected a default value, used when the caller gives none (or make the arg required)"
                    );
                    self.push(
                        Error,
                        "S4",
                        seq,
                        None,
                        "args.optional.default",
                        arg.pos,
                        message,
                    );
                }
                (RequestArgType::Static, None) => {
                    let message = format!(
                        "static arg {shown} has no `default`; expected its fixed value in `default`"
                    );
                    self.push(
                        Error,
                        "S5",
                        seq,
                        None,
                        "args.static.default",
                        arg.pos,
                        message,
                    );
                }
                // S10: required args have no defaults.
                (RequestArgType::Required, Some(default)) => {
                    let message = format!(
                        "required arg {shown} has a default ({}); expected no default, since the caller must give a required arg (make it optional to give it a default)",
                        shown_value(&default.value)
                    );
                    self.push(
                        Error,
                        "S10",
                        seq,
                        None,
                        "args.required.default",
                        default.pos,
                        message,
                    );
                }
                _ => {}
            }
        }
    }

    /// S6-S8: ACL entries.
    fn sequence_acls(&mut self, seq: &Sequence) {
        // S6-S8: ACLs.
        let mut roles: HashMap<&str, Pos> = HashMap::new();
        for acl in &seq.acl {
            let role = acl.role.as_ref().filter(|role| !role.value.is_empty());
            if let Some(admin) = acl.admin.as_ref().filter(|admin| admin.value)
                && !acl.ops.is_empty()
            {
                let message = format!(
                    "ACL entry{} has both `admin: true` and `ops`; expected either `admin: true` (every operation) or a list of `ops`, not both",
                    role.map(|r| format!(" for role `{}`", r.value))
                        .unwrap_or_default()
                );
                self.push(Error, "S6", seq, None, "acl.admin", admin.pos, message);
            }
            let Some(role) = role else {
                let message = "ACL entry has no `role`; expected a non-empty role name".to_owned();
                self.push(Error, "S7", seq, None, "acl.role", acl.pos, message);
                continue;
            };
            if let Some(first) = roles.get(role.value.as_str()) {
                let message = format!(
                    "role `{}` has a second ACL entry (first at line {}); expected one entry per role",
                    role.value, first.line
                );
                self.push(Error, "S8", seq, None, "acl.role", role.pos, message);
            } else {
                roles.insert(&role.value, role.pos);
            }
        }
    }

    /// S9: arg names are unique across the kinds.
    fn unique_arg_names(&mut self, seq: &Sequence) {
        // S9: arg names unique across required, optional and static.
        let mut names: HashMap<&str, (RequestArgType, Pos)> = HashMap::new();
        for (kind, arg) in seq.args.all() {
            let Some(name) = &arg.name else { continue };
            if let Some((first_kind, first_pos)) = names.get(name.value.as_str()) {
                let message = format!(
                    "arg `{}` is declared twice (first as a {first_kind} arg at line {}); expected unique arg names within a sequence",
                    name.value, first_pos.line
                );
                self.push(
                    Error,
                    "S9",
                    seq,
                    None,
                    &format!("args.{kind}.name"),
                    name.pos,
                    message,
                );
            } else {
                names.insert(&name.value, (kind, name.pos));
            }
        }
    }

    /// S11: a sequence has nodes.
    fn has_nodes(&mut self, seq: &Sequence) {
        // S11: at least one node.
        if seq.nodes.is_empty() {
            let message =
                "sequence has no nodes; expected at least one node under `nodes`".to_owned();
            self.push(
                Error,
                "S11",
                seq,
                None,
                "nodes",
                seq.pos_of("nodes"),
                message,
            );
        }
    }

    /// SW1: one setter per arg.
    fn single_setters(&mut self, seq: &Sequence) {
        // SW1: every arg set by one node only, and not also a sequence arg.
        let mut setters: HashMap<&str, Vec<&str>> = HashMap::new();
        for arg in seq.arg_names() {
            setters.entry(arg).or_default().push("this sequence");
        }
        for node in &seq.nodes {
            let mut node_sets: Vec<&str> = node.node_sets().filter_map(|set| set.r#as()).collect();
            node_sets.dedup();
            let mut seen = HashSet::new();
            for name in node_sets {
                if seen.insert(name) {
                    setters.entry(name).or_default().push(&node.name);
                }
            }
        }
        let mut repeated: Vec<(&str, &Vec<&str>)> = setters
            .iter()
            .filter(|(_, by)| by.len() > 1)
            .map(|(n, by)| (*n, by))
            .collect();
        repeated.sort();
        if !repeated.is_empty() {
            let listed: Vec<String> = repeated
                .iter()
                .map(|(name, by)| format!("`{name}` (set by {})", by.join(", ")))
                .collect();
            let message = format!(
                "{} set more than once in the sequence: {}; expected each arg to be set by one node (`as` defaults to `arg`)",
                if listed.len() == 1 { "arg" } else { "args" },
                listed.join("; ")
            );
            let first_node = repeated
                .iter()
                .flat_map(|(_, by)| by.iter())
                .find_map(|name| seq.node(name));
            let pos = first_node.map_or(seq.pos, |node| node.pos_of("sets"));
            self.push(
                Warning,
                "SW1",
                seq,
                first_node,
                "nodes.sets.as",
                pos,
                message,
            );
        }
    }

    fn node(&mut self, seq: &Sequence, node: &Node) {
        self.node_category(seq, node);
        self.called_sequences_exist(seq, node);
        self.node_entries(seq, node);
        self.node_kind_fields(seq, node);
        self.node_retries(seq, node);
        self.node_names(seq, node);
        self.node_repeats(seq, node);
        // N14, NW5: inputs against the called sequences' args.
        if matches!(
            node.category(),
            Some(Category::Sequence | Category::Conditional)
        ) {
            self.called_args(seq, node);
        }
        self.node_renames(seq, node);
    }

    /// N1, N2: the category.
    fn node_category(&mut self, seq: &Sequence, node: &Node) {
        let category = node.category();
        let n = Some(node);
        // N1, N2: category.
        match &node.category {
            None => {
                let message =
                    "node has no `category`; expected one of job, sequence, conditional".to_owned();
                self.push(Error, "N1", seq, n, "category", node.pos, message);
            }
            Some(text) if category.is_none() => {
                let message = format!(
                    "invalid category `{}`; expected one of job, sequence, conditional",
                    text.value
                );
                self.push(Error, "N2", seq, n, "category", text.pos, message);
            }
            Some(_) => {}
        }
    }

    /// N3: the sequences a node calls exist.
    fn called_sequences_exist(&mut self, seq: &Sequence, node: &Node) {
        let category = node.category();
        let n = Some(node);
        // N3: called sequences exist.
        match category {
            Some(Category::Sequence) => {
                if let Some(node_type) = node
                    .node_type
                    .as_ref()
                    .filter(|t| !self.specs.exists(&t.value))
                {
                    let message = format!(
                        "sequence `{}` does not exist; expected the name of a sequence in the specs (or the built-in `noop`)",
                        node_type.value
                    );
                    self.push(Error, "N3", seq, n, "type", node_type.pos, message);
                }
            }
            Some(Category::Conditional) => {
                let missing: Vec<_> = node
                    .eq
                    .iter()
                    .filter(|(_, target)| !self.specs.exists(&target.value))
                    .collect();
                if let Some((_, first)) = missing.first() {
                    let names = quoted(missing.iter().map(|(_, t)| t.value.as_str()));
                    let message = format!(
                        "{} {names} in `eq` {}; expected names of sequences in the specs (or the built-in `noop`)",
                        if missing.len() == 1 {
                            "sequence"
                        } else {
                            "sequences"
                        },
                        if missing.len() == 1 {
                            "does not exist"
                        } else {
                            "do not exist"
                        },
                    );
                    self.push(Error, "N3", seq, n, "eq", first.pos, message);
                }
            }
            _ => {}
        }
    }

    /// N4-N9: `each`, `args` and `sets` entries, and `parallel`.
    fn node_entries(&mut self, seq: &Sequence, node: &Node) {
        let n = Some(node);
        // N4: each entries are list:element.
        let bad_each: Vec<_> = node
            .each
            .iter()
            .filter(|entry| split_each(&entry.value).is_none())
            .collect();
        if let Some(first) = bad_each.first() {
            let message = format!(
                "invalid `each` {} {}; expected `list:element` (for example `hosts:host`)",
                if bad_each.len() == 1 {
                    "entry"
                } else {
                    "entries"
                },
                quoted(bad_each.iter().map(|e| e.value.as_str()))
            );
            self.push(Error, "N4", seq, n, "each", first.pos, message);
        }
        // N5, N6: args entries.
        if let Some(null) = node.args.iter().find(|arg| arg.value.is_none()) {
            let message = "empty entry in `args`; expected `- expected: <name>` (and optionally `given: <name>`)".to_owned();
            self.push(Error, "N5", seq, n, "args", null.pos, message);
        }
        if let Some(unnamed) = node
            .args
            .iter()
            .find(|arg| arg.value.as_ref().is_some_and(|a| a.expected.is_none()))
        {
            let message = "arg entry has no `expected`; expected the name under which the job or sequence sees the arg".to_owned();
            self.push(Error, "N6", seq, n, "args.expected", unnamed.pos, message);
        }
        // N7, N8: sets entries.
        if let Some(null) = node.sets.iter().find(|set| set.value.is_none()) {
            let message =
                "empty entry in `sets`; expected `- arg: <name>` (and optionally `as: <name>`)"
                    .to_owned();
            self.push(Error, "N7", seq, n, "sets", null.pos, message);
        }
        if let Some(unnamed) = node
            .sets
            .iter()
            .find(|set| set.value.as_ref().is_some_and(|s| s.arg.is_none()))
        {
            let message =
                "sets entry has no `arg`; expected the name of the arg the job or sequence sets"
                    .to_owned();
            self.push(Error, "N8", seq, n, "sets.arg", unnamed.pos, message);
        }
        // N9: parallel > 0.
        if let Some(parallel) = node.parallel.as_ref().filter(|p| p.value == 0) {
            let message =
                "`parallel: 0` would never run anything; expected a number greater than 0"
                    .to_owned();
            self.push(Error, "N9", seq, n, "parallel", parallel.pos, message);
        }
    }

    /// N10-N12, N20-N22: the fields of conditionals and of the other nodes.
    fn node_kind_fields(&mut self, seq: &Sequence, node: &Node) {
        let category = node.category();
        let n = Some(node);
        let is_conditional = category == Some(Category::Conditional);
        if is_conditional {
            // N10, N11: conditionals have if and eq.
            if node.if_arg.is_none() {
                let message = "conditional node has no `if`; expected the name of the job arg whose value picks the branch".to_owned();
                self.push(Error, "N10", seq, n, "if", node.pos, message);
            }
            if node.eq.is_empty() {
                let message = "conditional node has no `eq` entries; expected a map of values to sequence names (with an optional `default`)".to_owned();
                self.push(Error, "N11", seq, n, "eq", node.pos_of("eq"), message);
            }
            // N20: conditionals have no type.
            if let Some(node_type) = &node.node_type {
                let message = format!(
                    "conditional node has `type: {}`; expected no type, since a conditional picks its sequence from `eq`",
                    node_type.value
                );
                self.push(Error, "N20", seq, n, "type", node_type.pos, message);
            }
        } else {
            // N12: others have a type.
            if node.node_type.is_none() {
                let message = match category {
                    Some(Category::Sequence) => "sequence node has no `type`; expected the name of the sequence to run".to_owned(),
                    Some(Category::Job) => "job node has no `type`; expected the job type to run".to_owned(),
                    _ => "node has no `type`; expected the job type (or, for category sequence, the sequence to run)".to_owned(),
                };
                self.push(Error, "N12", seq, n, "type", node.pos, message);
            }
            // N21, N22: only conditionals have if and eq.
            let what = node
                .category
                .as_ref()
                .map_or("a node without category".to_owned(), |c| {
                    format!("a `{}` node", c.value)
                });
            if let Some(if_arg) = &node.if_arg {
                let message =
                    format!("`if` on {what}; expected no `if`: only conditional nodes take one");
                self.push(Error, "N21", seq, n, "if", if_arg.pos, message);
            }
            if let Some((first, _)) = node.eq.first() {
                let message =
                    format!("`eq` on {what}; expected no `eq`: only conditional nodes take one");
                self.push(Error, "N22", seq, n, "eq", first.pos, message);
            }
        }
    }

    /// N13, N23, N19: retries and `parallel`; Spindle's `timeout`.
    fn node_retries(&mut self, seq: &Sequence, node: &Node) {
        let n = Some(node);
        // timeout: a positive duration (on a job node it bounds each try; on a sequence
        // or conditional node, each run of its sub-sequence).
        if let Some(timeout) = &node.timeout
            && let Some(message) = timeout_problem(&timeout.value)
        {
            self.push(Error, "timeout", seq, n, "timeout", timeout.pos, message);
        }
        // N13: retryWait is a duration.
        if let Some(wait) = &node.retry_wait
            && let Err(err) = proto::duration::parse(&wait.value)
        {
            let message = format!("invalid `retryWait`: {err}");
            self.push(Error, "N13", seq, n, "retryWait", wait.pos, message);
        }
        // N23: retryWait needs retry.
        if let Some(wait) = &node.retry_wait
            && node.retry() == 0
        {
            let message = "`retryWait` is set but `retry` is 0; expected `retry: N` (N > 0) with a retryWait, or no retryWait".to_owned();
            self.push(
                Error,
                "N23",
                seq,
                n,
                "retry",
                node.retry.as_ref().map_or(wait.pos, |r| r.pos),
                message,
            );
        }
        // N19: parallel needs each.
        if let Some(parallel) = &node.parallel
            && node.each.is_empty()
        {
            let message = "`parallel` is set without `each`; expected `each: [list:element]` (parallel limits how many expansions run at once)".to_owned();
            self.push(Error, "N19", seq, n, "each", parallel.pos, message);
        }
    }

    /// N15-N18: names used twice within a node.
    fn node_names(&mut self, seq: &Sequence, node: &Node) {
        let n = Some(node);
        let pairs: Vec<(&str, &str)> = node.each_pairs().collect();
        let expected: Vec<&str> = node.node_args().filter_map(|arg| arg.expected()).collect();
        // N15: each element unique.
        let dup_elements = duplicates(pairs.iter().map(|(_, element)| *element));
        if !dup_elements.is_empty() {
            let message = format!(
                "`each` element {} appears more than once; expected each element at most once per node",
                quoted(dup_elements)
            );
            self.push(Error, "N15", seq, n, "each", node.pos_of("each"), message);
        }
        // N16: expected unique.
        let dup_expected = duplicates(expected.iter().copied());
        if !dup_expected.is_empty() {
            let message = format!(
                "{} listed more than once as `expected` in `args`; expected each name once",
                quoted(dup_expected)
            );
            self.push(
                Error,
                "N16",
                seq,
                n,
                "args.expected",
                node.pos_of("args"),
                message,
            );
        }
        // N17: an each element is not also an expected arg.
        let clashing: Vec<&str> = pairs
            .iter()
            .map(|(_, e)| *e)
            .filter(|e| expected.contains(e))
            .collect();
        if !clashing.is_empty() {
            let message = format!(
                "`each` element {} is also passed in `args` as `expected`; expected an element not to be repeated in `args.expected`",
                quoted(clashing)
            );
            self.push(Error, "N17", seq, n, "each", node.pos_of("each"), message);
        }
        // N18: sets.as unique.
        let dup_as = duplicates(node.node_sets().filter_map(|set| set.r#as()));
        if !dup_as.is_empty() {
            let message = format!(
                "{} set more than once by this node; expected each `as` name once (`as` defaults to `arg`)",
                quoted(dup_as)
            );
            self.push(
                Error,
                "N18",
                seq,
                n,
                "sets.as",
                node.pos_of("sets"),
                message,
            );
        }
    }

    /// NW1-NW3: lists and args used twice within a node.
    fn node_repeats(&mut self, seq: &Sequence, node: &Node) {
        let n = Some(node);
        let pairs: Vec<(&str, &str)> = node.each_pairs().collect();
        // NW1: a list expanded twice.
        let dup_lists = duplicates(pairs.iter().map(|(list, _)| *list));
        if !dup_lists.is_empty() {
            let message = format!(
                "list {} is expanded more than once in `each`; expected each list at most once per node",
                quoted(dup_lists)
            );
            self.push(Warning, "NW1", seq, n, "each", node.pos_of("each"), message);
        }
        // NW2: a given passed under two names.
        let givens: Vec<&str> = {
            let mut by_given: Vec<(&str, &str)> = node
                .node_args()
                .filter_map(|a| Some((a.given()?, a.expected()?)))
                .collect();
            by_given.sort();
            by_given.dedup();
            duplicates(by_given.iter().map(|(given, _)| *given))
        };
        if !givens.is_empty() {
            let message = format!(
                "{} passed under more than one `expected` name; expected each arg to be passed once (`given` defaults to `expected`)",
                quoted(givens)
            );
            self.push(
                Warning,
                "NW2",
                seq,
                n,
                "args.given",
                node.pos_of("args"),
                message,
            );
        }
        // NW3: a list both expanded and passed whole.
        let all_givens: Vec<&str> = node.node_args().filter_map(|arg| arg.given()).collect();
        let mut both: Vec<&str> = pairs
            .iter()
            .map(|(l, _)| *l)
            .filter(|l| all_givens.contains(l))
            .collect();
        both.dedup();
        if !both.is_empty() {
            let message = format!(
                "list {} is expanded by `each` and also passed whole in `args`; expected one or the other (each expansion gets one element)",
                quoted(both)
            );
            self.push(Warning, "NW3", seq, n, "each", node.pos_of("each"), message);
        }
    }

    /// NW4: a set arg renamed twice.
    fn node_renames(&mut self, seq: &Sequence, node: &Node) {
        let n = Some(node);
        // NW4: a set arg renamed twice.
        let renamed: Vec<&str> = {
            let mut pairs: Vec<(&str, &str)> = node
                .node_sets()
                .filter_map(|s| Some((s.arg()?, s.r#as()?)))
                .collect();
            pairs.sort();
            pairs.dedup();
            duplicates(pairs.iter().map(|(arg, _)| *arg))
        };
        if !renamed.is_empty() {
            let message = format!(
                "{} renamed more than once with `as`; expected each set arg under one name",
                quoted(renamed)
            );
            self.push(
                Warning,
                "NW4",
                seq,
                n,
                "sets.arg",
                node.pos_of("sets"),
                message,
            );
        }
    }

    /// N14 (required args of called sequences are passed) and NW5 (nothing else is).
    fn called_args(&mut self, seq: &Sequence, node: &Node) {
        let called: Vec<&Sequence> = node
            .called_sequences()
            .into_iter()
            .filter_map(|name| self.specs.get(name))
            .collect();
        let inputs = node.declared_inputs();
        let mut missing: Vec<(String, Vec<&str>)> = Vec::new();
        for callee in &called {
            for arg in callee.args.required.iter().filter_map(|arg| arg.name()) {
                if inputs.contains(&arg) {
                    continue;
                }
                match missing.iter_mut().find(|(name, _)| name == arg) {
                    Some((_, by)) => by.push(&callee.name),
                    None => missing.push((arg.to_owned(), vec![&callee.name])),
                }
            }
        }
        if !missing.is_empty() {
            let parts: Vec<String> = missing
                .iter()
                .map(|(arg, by)| format!("`{arg}` (required by {})", quoted(by.iter().copied())))
                .collect();
            let message = format!(
                "required {} not passed to the called sequence: {}; expected {} under `args` (`- expected: <name>`) or as an `each` element",
                if parts.len() == 1 { "arg" } else { "args" },
                parts.join(", "),
                if parts.len() == 1 { "it" } else { "them" }
            );
            self.push(
                Severity::Error,
                "N14",
                seq,
                Some(node),
                "args",
                node.pos_of("args"),
                message,
            );
        }
        // Only sequences that exist say what they take; the built-in noop takes nothing.
        let n_known = node
            .called_sequences()
            .into_iter()
            .filter(|name| self.specs.exists(name))
            .count();
        if n_known == 0 {
            return;
        }
        let mut extra: Vec<&str> = inputs
            .iter()
            .copied()
            .filter(|input| {
                !called
                    .iter()
                    .any(|callee| callee.args.is_required(input) || callee.args.is_optional(input))
            })
            .collect();
        extra.dedup();
        if !extra.is_empty() {
            let known: Vec<&str> = node
                .called_sequences()
                .into_iter()
                .filter(|name| self.specs.exists(name))
                .collect();
            let message = format!(
                "{} passed to {} {}, which {} not take {}; expected only args that the called sequence requires or accepts (its required or optional args)",
                quoted(extra.iter().copied()),
                if n_known == 1 {
                    "sequence"
                } else {
                    "sequences"
                },
                quoted(known),
                if n_known == 1 { "does" } else { "do" },
                if extra.len() == 1 { "it" } else { "them" }
            );
            let pos = node
                .args
                .iter()
                .filter_map(|arg| arg.value.as_ref())
                .find(|arg| arg.expected().is_some_and(|e| extra.contains(&e)))
                .and_then(|arg| arg.expected.as_ref().map(|e| e.pos))
                .unwrap_or_else(|| node.pos_of("each"));
            self.push(
                Severity::Warning,
                "NW5",
                seq,
                Some(node),
                "args",
                pos,
                message,
            );
        }
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

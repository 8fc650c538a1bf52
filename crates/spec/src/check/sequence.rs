//! The checks of a sequence: its timeout, args, ACLs, names, nodes and setters.

use super::*;

impl Checker<'_> {
    pub(super) fn sequence(&mut self, seq: &Sequence) {
        self.sequence_timeout(seq);
        self.sequence_args(seq);
        self.sequence_acls(seq);
        self.sequence_locks(seq);
        self.unique_arg_names(seq);
        self.has_nodes(seq);
        self.single_setters(seq);
    }

    /// Spindle's sequence `timeout`: a positive duration.
    pub(super) fn sequence_timeout(&mut self, seq: &Sequence) {
        if let Some(timeout) = &seq.timeout
            && let Some(message) = timeout_problem(&timeout.value)
        {
            self.push(Error, "timeout", seq, None, "timeout", timeout.pos, message);
        }
    }

    /// S1-S5, S10: the names and defaults of the three kinds of args.
    pub(super) fn sequence_args(&mut self, seq: &Sequence) {
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
            // S12 (Spindle): a static arg's value is the spec's, for anyone to read.
            if arg.secret && kind == RequestArgType::Static {
                let message = format!(
                    "static arg {shown} is `secret: true`, but its value is written in the spec; expected a required or optional arg that the caller gives (or drop `secret`)"
                );
                self.push(
                    Error,
                    "S12",
                    seq,
                    None,
                    "args.static.secret",
                    arg.pos,
                    message,
                );
            }
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
    pub(super) fn sequence_acls(&mut self, seq: &Sequence) {
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
    pub(super) fn unique_arg_names(&mut self, seq: &Sequence) {
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
    pub(super) fn has_nodes(&mut self, seq: &Sequence) {
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
    pub(super) fn single_setters(&mut self, seq: &Sequence) {
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
}

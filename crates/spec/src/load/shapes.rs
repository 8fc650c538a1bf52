//! What each spec shape reads: a file's root, a schedule, a sequence with its args and
//! ACLs, a node with its args and sets.

use super::*;
use crate::model::Pool;

const TOP_FIELDS: &[&str] = &["sequences", "schedules", "pools"];
const POOL_FIELDS: &[&str] = &["limit", "types"];
const SCHEDULE_FIELDS: &[&str] = &["cron", "timezone", "request", "args", "overlap", "missed"];
const SEQUENCE_FIELDS: &[&str] = &[
    "request", "args", "acl", "nodes", "timeout", "locks", "priority",
];
const LOCK_FIELDS: &[&str] = &["name", "key", "limit", "when_taken", "fair_by"];
const SEQUENCE_ARGS_FIELDS: &[&str] = &["required", "optional", "static"];
const ARG_FIELDS: &[&str] = &["name", "desc", "default", "secret"];
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
    "locks",
    "max_failures",
    "on_budget_exceeded",
    "waves",
    "wave_wait",
    "wave_approval",
];
const NODE_ARG_FIELDS: &[&str] = &["expected", "given"];
const NODE_SET_FIELDS: &[&str] = &["arg", "as"];

impl Reader<'_> {
    pub(super) fn file_root(&mut self, root: &yaml::Node) -> Parsed {
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
        if let Some(&(_, pools)) = fields.get("pools")
            && self.is_map(pools, place, "pools", "a map of pool names to pools")
        {
            let entries = self.named_entries(pools, place, "pools", "pool");
            parsed.pools = entries
                .into_iter()
                .map(|(name, body)| self.pool(name, body))
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

    pub(super) fn pool(&mut self, name: Spanned<String>, body: &yaml::Node) -> Pool {
        let mut pool = Pool {
            name: name.value,
            file: Arc::clone(self.file),
            pos: name.pos,
            limit: None,
            types: Vec::new(),
        };
        let place = Place {
            sequence: None,
            node: None,
        };
        let prefix = format!("pools.{}.", pool.name);
        let expected = "a pool (a map with `limit` and `types`)";
        if !self.is_map(body, place, &format!("pools.{}", pool.name), expected) {
            return pool;
        }
        let fields = self.fields(body, place, "a pool", &prefix, POOL_FIELDS);
        for (&name, &(_, value)) in &fields {
            let field = format!("{prefix}{name}");
            match name {
                "limit" => {
                    let meaning = "how many of its jobs may run at once";
                    pool.limit = self.uint(value, place, &field, meaning);
                }
                _ => pool.types = self.string_list(value, place, &field, "a list of job types"),
            }
        }
        pool
    }

    pub(super) fn schedule(&mut self, name: Spanned<String>, body: &yaml::Node) -> crate::Schedule {
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

    pub(super) fn sequence(&mut self, name: Spanned<String>, body: &yaml::Node) -> Sequence {
        let mut sequence = Sequence {
            name: name.value,
            file: Arc::clone(self.file),
            pos: name.pos,
            request: false,
            args: SequenceArgs::default(),
            acl: Vec::new(),
            nodes: Vec::new(),
            timeout: None,
            locks: Vec::new(),
            priority: None,
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
                "priority" => sequence.priority = self.int(value, place, "priority"),
                "locks" => {
                    let items = self.list(value, place, "locks", "a list of locks");
                    sequence.locks = items
                        .iter()
                        .filter_map(|item| self.lock(item, place))
                        .collect();
                }
                _ => unreachable!("field {field} is in SEQUENCE_FIELDS"),
            }
        }
        sequence
    }

    pub(super) fn sequence_args(
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

    pub(super) fn arg_decl(
        &mut self,
        item: &yaml::Node,
        place: Place<'_>,
        field: &str,
    ) -> Option<ArgDecl> {
        let mut decl = ArgDecl {
            name: None,
            desc: String::new(),
            default: None,
            secret: false,
            pos: item.pos,
        };
        match item.value {
            Value::Map(_) => {}
            // A null entry has no name; the static checks say so.
            Value::Null => return Some(decl),
            _ => {
                self.type_error(
                    item,
                    place,
                    field,
                    "an arg (`name:`, `desc:`, `default:`, `secret:`)",
                );
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
                "secret" => {
                    decl.secret = self
                        .boolean(value, place, &path)
                        .is_some_and(|secret| secret.value);
                }
                _ => decl.default = json(value).map(|default| Spanned::new(default, value.pos)),
            }
        }
        Some(decl)
    }

    pub(super) fn lock(&mut self, item: &yaml::Node, place: Place<'_>) -> Option<Lock> {
        let mut lock = Lock {
            name: None,
            key: None,
            limit: None,
            when_taken: None,
            fair_by: None,
            pos: item.pos,
        };
        match item.value {
            Value::Map(_) => {}
            Value::Null => return Some(lock),
            _ => {
                let expected = "a lock (`name:`, `key:`, `limit:`, `when_taken:`, `fair_by:`)";
                self.type_error(item, place, "locks", expected);
                return None;
            }
        }
        let fields = self.fields(item, place, "a lock", "locks.", LOCK_FIELDS);
        for (&name, &(_, value)) in &fields {
            match name {
                "name" => lock.name = self.string(value, place, "locks.name"),
                "key" => lock.key = self.string(value, place, "locks.key"),
                "limit" => {
                    let meaning = "how many requests may hold it at once";
                    lock.limit = self.uint(value, place, "locks.limit", meaning);
                }
                "fair_by" => lock.fair_by = self.string(value, place, "locks.fair_by"),
                _ => lock.when_taken = self.string(value, place, "locks.when_taken"),
            }
        }
        Some(lock)
    }

    pub(super) fn acl(&mut self, item: &yaml::Node, place: Place<'_>) -> Option<Acl> {
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

    // Long because it is one match over a node's fields, an arm a field, each reading
    // its value with the reader its type needs.
    pub(super) fn node(
        &mut self,
        sequence: &str,
        name: Spanned<String>,
        body: &yaml::Node,
    ) -> Node {
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
            locks: Vec::new(),
            max_failures: None,
            on_budget_exceeded: None,
            waves: Vec::new(),
            wave_wait: None,
            wave_approval: None,
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
                "locks" => {
                    let items = self.list(value, place, field, "a list of locks");
                    node.locks = items
                        .iter()
                        .filter_map(|item| self.lock(item, place))
                        .collect();
                }
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
                "max_failures" => {
                    node.max_failures =
                        self.share(value, place, field, "how many elements may fail");
                }
                "on_budget_exceeded" => node.on_budget_exceeded = self.string(value, place, field),
                "waves" => {
                    let items = self.list(
                        value,
                        place,
                        field,
                        "a list of the waves' cumulative sizes (such as [1, 10%, 50%, 100%])",
                    );
                    node.waves = items
                        .iter()
                        .filter_map(|item| {
                            self.share(item, place, field, "a wave's cumulative size")
                        })
                        .collect();
                }
                "wave_wait" => node.wave_wait = self.string(value, place, field),
                "wave_approval" => node.wave_approval = self.wave_approval(value, place),
                _ => unreachable!("field {field} is in NODE_FIELDS"),
            }
        }
        node
    }

    pub(super) fn node_arg(
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

    pub(super) fn node_set(
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

//! The checks of a node: its category, the sequence it calls, its entries, fields,
//! retries, names, repeats (`each:`), renames and the args it passes.

use super::*;

impl Checker<'_> {
    pub(super) fn node(&mut self, seq: &Sequence, node: &Node) {
        self.node_category(seq, node);
        self.called_sequences_exist(seq, node);
        self.node_entries(seq, node);
        self.node_kind_fields(seq, node);
        self.node_retries(seq, node);
        self.node_rollout(seq, node);
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
        self.node_locks(seq, node);
    }

    /// N1, N2: the category.
    pub(super) fn node_category(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn called_sequences_exist(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn node_entries(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn node_kind_fields(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn node_retries(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn node_names(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn node_repeats(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn node_renames(&mut self, seq: &Sequence, node: &Node) {
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
    pub(super) fn called_args(&mut self, seq: &Sequence, node: &Node) {
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

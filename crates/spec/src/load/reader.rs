//! Reading YAML fields with a diagnostic for each unknown field, duplicated key or
//! wrong type: the field readers every spec shape uses.

use super::*;

#[derive(Clone, Copy)]
pub(super) struct Place<'p> {
    pub(super) sequence: Option<&'p str>,
    pub(super) node: Option<&'p str>,
}

pub(super) struct Reader<'a> {
    pub(super) file: &'a Arc<PathBuf>,
    pub(super) diagnostics: &'a mut Vec<Diagnostic>,
}

/// A YAML value as JSON, scalars kept as the text written; `None` for null.
pub(super) fn json(node: &yaml::Node) -> Option<Json> {
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

impl Reader<'_> {
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site shape, all fields of a diagnostic"
    )]
    pub(super) fn push(
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

    pub(super) fn type_error(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
        expected: &str,
    ) {
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
    pub(super) fn fields<'y>(
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
                    "unknown field `{name}` in {what}{}; expected one of: {}",
                    crate::near::did_you_mean(name, known.iter().copied()),
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
    pub(super) fn named_entries<'y>(
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

    pub(super) fn is_map(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
        expected: &str,
    ) -> bool {
        match node.value {
            Value::Map(_) => true,
            Value::Null => false,
            _ => {
                self.type_error(node, place, field, expected);
                false
            }
        }
    }

    pub(super) fn list<'y>(
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

    pub(super) fn string(
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

    pub(super) fn boolean(
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

    pub(super) fn uint(
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

    /// A count (`4`) or a percentage (`10%`) of an `each:` node's elements.
    pub(super) fn share(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
        meaning: &str,
    ) -> Option<Spanned<Share>> {
        let value = match &node.value {
            Value::Null => return None,
            Value::Scalar { text, .. } => Share::parse(text),
            _ => None,
        };
        if value.is_none() {
            let expected = format!(
                "a count (such as 4) or a percentage of the elements (such as 10%): {meaning}"
            );
            self.type_error(node, place, field, &expected);
        }
        value.map(|value| Spanned::new(value, node.pos))
    }

    /// `wave_approval:`: `true`/`false`, or the list of roles that may answer.
    pub(super) fn wave_approval(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
    ) -> Option<Spanned<Vec<String>>> {
        let field = "wave_approval";
        match &node.value {
            Value::Null => None,
            Value::Seq(_) => {
                let roles = self.string_list(node, place, field, "a list of role names");
                Some(Spanned::new(
                    roles.into_iter().map(|role| role.value).collect(),
                    node.pos,
                ))
            }
            _ => {
                let on = self.boolean(node, place, field)?;
                on.value.then(|| Spanned::new(Vec::new(), on.pos))
            }
        }
    }

    /// A whole number that may be negative (a priority).
    pub(super) fn int(
        &mut self,
        node: &yaml::Node,
        place: Place<'_>,
        field: &str,
    ) -> Option<Spanned<i32>> {
        let value = match &node.value {
            Value::Null => return None,
            Value::Scalar { text, .. } => text.parse::<i32>().ok(),
            _ => None,
        };
        if value.is_none() {
            let expected = "a whole number (higher is served first in a lock's queue)";
            self.type_error(node, place, field, expected);
        }
        value.map(|value| Spanned::new(value, node.pos))
    }

    pub(super) fn string_list(
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
}

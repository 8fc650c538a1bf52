//! A YAML document as a tree of positioned nodes, built from saphyr's event parser.
//!
//! Unlike a serde deserializer this keeps, for every node, the line and column it starts
//! at, keeps scalars as the text written in the file (`yes` stays "yes", `1` stays "1"),
//! and keeps duplicated mapping keys so that the loader can warn about them.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use crate::Pos;

/// Nesting deeper than this is refused rather than risk exhausting the stack later.
const MAX_DEPTH: usize = 128;
/// Aliases may not expand a document beyond this many nodes (a "billion laughs" guard).
const MAX_NODES: usize = 10_000_000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) pos: Pos,
    pub(crate) value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// An empty value, `~` or `null`.
    Null,
    /// A scalar's text, as written for plain scalars and unescaped for quoted ones.
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    /// Entries in file order; duplicated keys are kept.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// Short description of the node's kind for "expected X, found Y" messages.
    pub(crate) fn describe(&self) -> String {
        match &self.value {
            Value::Null => "an empty value".to_owned(),
            Value::Scalar { text, .. } => {
                let mut shown: String = text.chars().take(40).collect();
                if shown.len() < text.len() {
                    shown.push('…');
                }
                format!("`{shown}`")
            }
            Value::Seq(_) => "a list".to_owned(),
            Value::Map(_) => "a map".to_owned(),
        }
    }

    /// The text of a scalar node, if it is one.
    pub(crate) fn scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// A YAML syntax error at a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) pos: Pos,
    pub(crate) message: String,
}

enum Frame {
    Seq {
        pos: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        pos: Pos,
        anchor: usize,
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
    },
}

/// Parses one YAML document. An empty file is `Ok(None)`.
// Long because it is one loop over the parser's events with the stack of open
// collections: each event kind (scalar, alias, sequence or mapping start and end) is a
// few lines that push to or pop from that stack.
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let line_count = text.lines().count().max(1);
    let pos_of = |span: &Span| Pos::clamped(span.start.line(), span.start.col(), line_count);
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut root: Option<Node> = None;
    let mut documents = 0;
    let mut n_nodes = 0usize;

    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|err| SyntaxError {
            pos: Pos::clamped(err.marker().line(), err.marker().col(), line_count),
            message: err.info().to_owned(),
        })?;
        let pos = pos_of(&span);
        let done = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => None,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(SyntaxError {
                        pos,
                        message: "a second YAML document in one file; expected one document \
                                  (a `sequences:` map) per spec file"
                            .to_owned(),
                    });
                }
                None
            }
            Event::Scalar(text, style, anchor, _tag) => {
                let plain = style == ScalarStyle::Plain;
                let value = if plain && matches!(&*text, "" | "~" | "null" | "Null" | "NULL") {
                    Value::Null
                } else {
                    Value::Scalar {
                        text: text.into_owned(),
                        plain,
                    }
                };
                Some((Node { pos, value }, anchor))
            }
            Event::Alias(anchor) => {
                let Some(node) = anchors.get(&anchor) else {
                    return Err(SyntaxError {
                        pos,
                        message: "alias to an unknown anchor".to_owned(),
                    });
                };
                n_nodes += count_nodes(node);
                if n_nodes > MAX_NODES {
                    return Err(SyntaxError {
                        pos,
                        message: format!("aliases expand the document beyond {MAX_NODES} nodes"),
                    });
                }
                Some((
                    Node {
                        pos,
                        ..node.clone()
                    },
                    0,
                ))
            }
            Event::SequenceStart(anchor, _tag) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(too_deep(pos));
                }
                stack.push(Frame::Seq {
                    pos,
                    anchor,
                    items: Vec::new(),
                });
                None
            }
            Event::MappingStart(anchor, _tag) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(too_deep(pos));
                }
                stack.push(Frame::Map {
                    pos,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                });
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { pos, anchor, items }) => Some((
                    Node {
                        pos,
                        value: Value::Seq(items),
                    },
                    anchor,
                )),
                _ => return Err(unbalanced(pos)),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map {
                    pos,
                    anchor,
                    entries,
                    ..
                }) => Some((
                    Node {
                        pos,
                        value: Value::Map(merge_keys(entries)),
                    },
                    anchor,
                )),
                _ => return Err(unbalanced(pos)),
            },
        };
        let Some((node, anchor)) = done else {
            continue;
        };
        n_nodes += 1;
        if anchor > 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(key_node) => entries.push((key_node, node)),
            },
        }
    }
    Ok(root)
}

/// Applies YAML merge keys (`<<: *defaults`): the merged map's entries are added where
/// the map does not set the key itself.
fn merge_keys(entries: Vec<(Node, Node)>) -> Vec<(Node, Node)> {
    if !entries.iter().any(|(key, _)| is_merge_key(key)) {
        return entries;
    }
    let mut own = Vec::with_capacity(entries.len());
    let mut merged = Vec::new();
    for (key, value) in entries {
        if !is_merge_key(&key) {
            own.push((key, value));
            continue;
        }
        match value.value {
            Value::Map(map) => merged.extend(map),
            Value::Seq(items) => {
                for item in items {
                    if let Value::Map(map) = item.value {
                        merged.extend(map);
                    }
                }
            }
            _ => own.push((key, value)),
        }
    }
    for (key, value) in merged {
        let present = own
            .iter()
            .any(|(own_key, _)| own_key.scalar().is_some() && own_key.scalar() == key.scalar());
        if !present {
            own.push((key, value));
        }
    }
    own
}

fn is_merge_key(key: &Node) -> bool {
    matches!(&key.value, Value::Scalar { text, plain: true } if text == "<<")
}

fn count_nodes(node: &Node) -> usize {
    match &node.value {
        Value::Null | Value::Scalar { .. } => 1,
        Value::Seq(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        Value::Map(entries) => {
            1 + entries
                .iter()
                .map(|(key, value)| count_nodes(key) + count_nodes(value))
                .sum::<usize>()
        }
    }
}

fn too_deep(pos: Pos) -> SyntaxError {
    SyntaxError {
        pos,
        message: format!("nesting deeper than {MAX_DEPTH} levels"),
    }
}

fn unbalanced(pos: Pos) -> SyntaxError {
    SyntaxError {
        pos,
        message: "unbalanced YAML structure".to_owned(),
    }
}

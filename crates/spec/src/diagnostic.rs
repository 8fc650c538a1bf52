//! Diagnostics: what is wrong, where (file, line, column, sequence, node, field), and what
//! was expected.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// A 1-based line and column in a spec file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl Pos {
    /// From the parser's 1-based line and 0-based column, kept within the file's lines
    /// (the parser reports end-of-file one line past the last).
    pub(crate) fn clamped(line: usize, col: usize, line_count: usize) -> Pos {
        let line = line.clamp(1, line_count.max(1));
        Pos {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(col + 1).unwrap_or(u32::MAX),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One finding of the linter. Fields that do not apply are `None` (`null` in JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: Option<PathBuf>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub sequence: Option<String>,
    pub node: Option<String>,
    /// The spec field, as a path such as `args.required.name`.
    pub field: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
    /// The check that found it: Spin Cycle's check numbers of specs.md (`S1`, `N3`, `G4`,
    /// ...) or a parse problem (`yaml`, `type`, `unknown-field`, ...).
    pub code: &'static str,
}

impl Diagnostic {
    pub(crate) fn sort_key(&self) -> impl Ord + '_ {
        (
            self.file.as_deref(),
            self.line,
            self.column,
            self.severity,
            self.code,
            &self.message,
        )
    }

    /// The place named in words: ``sequence `s`, node `n`, field `f` ``.
    pub fn context(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(sequence) = &self.sequence {
            parts.push(format!("sequence `{sequence}`"));
        }
        if let Some(node) = &self.node {
            parts.push(format!("node `{node}`"));
        }
        if let Some(field) = &self.field {
            parts.push(format!("field `{field}`"));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Compiler style: `file:line:col: error: sequence `s`, node `n`: message [code]`.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line, self.column) {
            (Some(file), Some(line), Some(column)) => {
                write!(f, "{}:{line}:{column}: ", file.display())?;
            }
            (Some(file), Some(line), None) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None, _) => write!(f, "{}: ", file.display())?,
            (None, ..) => {}
        }
        write!(f, "{}: ", self.severity)?;
        if let Some(context) = self.context() {
            write!(f, "{context}: ")?;
        }
        write!(f, "{} [{}]", self.message, self.code)
    }
}

//! Statements in Spindle's SQL, rendered per database.
//!
//! The concern modules write every statement once, in the subset of SQL the three
//! databases share, with PostgreSQL's numbered placeholders (`$1`, `$2`, … in any order,
//! repeated where a value is used twice) and the values bound by number. What the
//! databases spell differently is said by intent rather than in SQL text, and each
//! [`Backend`] renders it: its placeholders ([`Backend::render`]: MySQL has only `?`, taken
//! in order), a multi-row insert that skips rows whose key exists
//! ([`Statement::skip_duplicates`]), and an update of many rows from a list of values
//! ([`ValuesUpdate`]).

use std::borrow::Cow;
use std::sync::Arc;

use sqlx::{Encode, IntoArguments, Type};

use super::Backend;

/// A value bound to a statement.
#[derive(Debug, Clone)]
pub enum Param<'q> {
    Text(Cow<'q, str>),
    /// Text shared with whoever made it (a new chain's JSON, which a Job Runner is sent
    /// too): bound without a copy where the driver keeps it as it is (SQLite).
    Shared(Arc<str>),
    /// Text, or NULL.
    MaybeText(Option<Cow<'q, str>>),
    Small(i16),
    Int(i32),
    Big(i64),
    /// A 64-bit integer, or NULL.
    MaybeBig(Option<i64>),
}

impl<'q> From<&'q str> for Param<'q> {
    fn from(text: &'q str) -> Param<'q> {
        Param::Text(Cow::Borrowed(text))
    }
}

impl<'q> From<Option<&'q str>> for Param<'q> {
    fn from(text: Option<&'q str>) -> Param<'q> {
        Param::MaybeText(text.map(Cow::Borrowed))
    }
}

impl From<String> for Param<'_> {
    fn from(text: String) -> Self {
        Param::Text(Cow::Owned(text))
    }
}

impl From<i16> for Param<'_> {
    fn from(value: i16) -> Self {
        Param::Small(value)
    }
}

impl From<i32> for Param<'_> {
    fn from(value: i32) -> Self {
        Param::Int(value)
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(value: Option<i64>) -> Self {
        Param::MaybeBig(value)
    }
}

impl From<i64> for Param<'_> {
    fn from(value: i64) -> Self {
        Param::Big(value)
    }
}

/// Binding a [`Param`] to a query of `DB`: sqlx's bounds on the types of params, named
/// once (met by each backend's concrete types).
pub trait Binds<'q, DB: sqlx::Database> {
    /// Binds this param itself: owned text is moved, borrowed text bound as the
    /// reference it is.
    fn bind_into(self, query: Query<'q, DB>) -> Query<'q, DB>;
}

/// A query of sqlx's on `DB`.
pub type Query<'q, DB> = sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>;

impl<'q, DB: sqlx::Database> Binds<'q, DB> for Param<'q>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    String: for<'a> Encode<'a, DB> + Type<DB>,
    Arc<str>: for<'a> Encode<'a, DB> + Type<DB>,
    Option<String>: for<'a> Encode<'a, DB> + Type<DB>,
    i16: for<'a> Encode<'a, DB> + Type<DB>,
    i32: for<'a> Encode<'a, DB> + Type<DB>,
    i64: for<'a> Encode<'a, DB> + Type<DB>,
    Option<i64>: for<'a> Encode<'a, DB> + Type<DB>,
{
    fn bind_into(self, query: Query<'q, DB>) -> Query<'q, DB> {
        // Neither is copied: SQLite's driver keeps an owned `String` as it is and copies
        // a `&str` into an `Arc<str>`, so a stored chain's JSON (tens of megabytes at
        // 100,000 jobs) is bound owned, and borrowed text by reference (a copy here
        // raised a big create's peak by as much).
        match self {
            Param::Text(Cow::Borrowed(text)) => query.bind(text),
            Param::Text(Cow::Owned(text)) => query.bind(text),
            Param::Shared(text) => query.bind(text),
            Param::MaybeText(text) => query.bind(text.map(Cow::into_owned)),
            Param::Small(value) => query.bind(value),
            Param::Int(value) => query.bind(value),
            Param::Big(value) => query.bind(value),
            Param::MaybeBig(value) => query.bind(value),
        }
    }
}

/// A statement as a database runs it: its text with the database's placeholders, and
/// which param (by index) each placeholder takes, in order.
#[derive(Debug)]
pub struct Rendered {
    pub sql: String,
    pub order: Vec<usize>,
}

/// One statement in Spindle's SQL and its params: `$N` stands for `params[N - 1]`.
#[derive(Debug, Clone)]
pub struct Statement<'q> {
    sql: Cow<'static, str>,
    params: Vec<Param<'q>>,
    /// The key columns of an INSERT that skips rows whose key exists.
    skip_duplicates: Option<&'static str>,
    /// Sent as text, not prepared ([`Statement::unprepared`]).
    unprepared: bool,
    /// The text is the database's already, its params in the order its placeholders
    /// take them ([`Statement::rendered`]).
    rendered: bool,
}

impl<'q> Statement<'q> {
    /// A statement written out, its params bound after with [`Statement::bind`].
    pub(crate) fn new(sql: &'static str) -> Statement<'q> {
        Statement {
            sql: Cow::Borrowed(sql),
            params: Vec::new(),
            skip_duplicates: None,
            unprepared: false,
            rendered: false,
        }
    }

    /// A statement whose text `sql` is as the database runs it (rendered by
    /// [`Backend::render`], duplicates skipped), its params in the order its
    /// placeholders take them: made once for many statements of one shape (a multi-row
    /// INSERT's thousands of placeholders, [`super::InsertRows::statements`]).
    pub(crate) fn rendered(sql: String, params: Vec<Param<'q>>) -> Statement<'q> {
        Statement {
            sql: Cow::Owned(sql),
            params,
            skip_duplicates: None,
            unprepared: false,
            rendered: true,
        }
    }

    /// A statement of no params sent as text rather than prepared: one a database will
    /// not prepare (MySQL's `LOCK TABLES`).
    pub(crate) fn unprepared(sql: String) -> Statement<'q> {
        Statement {
            unprepared: true,
            ..Statement::build(sql)
        }
    }

    /// The text of an [`Statement::unprepared`] statement, or the statement as it is.
    pub(crate) fn into_unprepared(self) -> Result<String, Statement<'q>> {
        if self.unprepared && self.params.is_empty() {
            Ok(self.sql.into_owned())
        } else {
            Err(self)
        }
    }

    /// A statement put together piece by piece ([`Statement::push`],
    /// [`Statement::param`]).
    pub(crate) fn build(start: impl Into<String>) -> Statement<'q> {
        Statement {
            sql: Cow::Owned(start.into()),
            params: Vec::new(),
            skip_duplicates: None,
            unprepared: false,
            rendered: false,
        }
    }

    /// Binds the next param (`$1` first).
    pub(crate) fn bind(mut self, value: impl Into<Param<'q>>) -> Statement<'q> {
        self.params.push(value.into());
        self
    }

    /// Adds a param and answers its placeholder (`$N`), for text put together apart.
    pub(crate) fn param(&mut self, value: impl Into<Param<'q>>) -> String {
        self.params.push(value.into());
        format!("${}", self.params.len())
    }

    /// Appends text.
    pub(crate) fn push(&mut self, text: &str) -> &mut Statement<'q> {
        self.sql.to_mut().push_str(text);
        self
    }

    /// Appends a param's placeholder.
    pub(crate) fn push_param(&mut self, value: impl Into<Param<'q>>) -> &mut Statement<'q> {
        let placeholder = self.param(value);
        self.push(&placeholder)
    }

    /// Appends `(a, b), (c, d)`: one parenthesized list of placeholders per item, each
    /// list the params `row` gives.
    pub(crate) fn push_rows<T>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut row: impl FnMut(T) -> Vec<Param<'q>>,
    ) -> &mut Statement<'q> {
        let mut text = String::new();
        for (n, item) in items.into_iter().enumerate() {
            text.push_str(if n == 0 { "(" } else { ", (" });
            for (column, value) in row(item).into_iter().enumerate() {
                if column > 0 {
                    text.push_str(", ");
                }
                text.push_str(&self.param(value));
            }
            text.push(')');
        }
        self.push(&text)
    }

    /// Appends `$a, $b, …`: a comma-separated list of `values`' placeholders.
    pub(crate) fn push_list<V: Into<Param<'q>>>(
        &mut self,
        values: impl IntoIterator<Item = V>,
    ) -> &mut Statement<'q> {
        let list: Vec<String> = values.into_iter().map(|v| self.param(v)).collect();
        self.push(&list.join(", "))
    }

    /// Makes this INSERT skip the rows whose `key` (its unique columns) exists already,
    /// instead of failing; the count of rows affected is those inserted.
    pub(crate) fn skip_duplicates(mut self, key: &'static str) -> Statement<'q> {
        self.skip_duplicates = Some(key);
        self
    }

    /// The statement's text as Spindle writes it (`$N` placeholders), or as the
    /// database runs it when made so ([`Statement::rendered`]).
    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }

    /// Its params, in the order bound.
    #[cfg(test)]
    pub(crate) fn params(&self) -> &[Param<'q>] {
        &self.params
    }

    /// This SELECT with `prefix` (the database's `EXPLAIN`) before it, the same params
    /// bound.
    pub(crate) fn prefixed(&self, prefix: &str) -> Statement<'q> {
        Statement {
            sql: Cow::Owned(format!("{prefix}{}", self.sql)),
            params: self.params.clone(),
            skip_duplicates: None,
            unprepared: self.unprepared,
            rendered: self.rendered,
        }
    }

    /// The statement as `DB` runs it, its params bound.
    pub(crate) fn query<DB>(self) -> Query<'q, DB>
    where
        DB: Backend,
        DB::Arguments: IntoArguments<DB>,
        Param<'q>: Binds<'q, DB>,
    {
        if self.rendered {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(self.sql));
            for param in self.params {
                query = param.bind_into(query);
            }
            return query;
        }
        let sql = match self.skip_duplicates {
            Some(key) => Cow::Owned(DB::skip_duplicates(&self.sql, key)),
            None => self.sql,
        };
        let (sql, order) = match DB::render(&sql) {
            Some(rendered) => (Cow::Owned(rendered.sql), rendered.order),
            None => (sql, (0..self.params.len()).collect()),
        };
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        // Each param's last use takes it (moved); an earlier one (MySQL's placeholders
        // may take a param twice) a copy.
        let mut last_use = vec![usize::MAX; self.params.len()];
        for (position, &index) in order.iter().enumerate() {
            last_use[index] = position;
        }
        let mut params: Vec<Option<Param<'q>>> = self.params.into_iter().map(Some).collect();
        for (position, &index) in order.iter().enumerate() {
            let param = if last_use[index] == position {
                params[index].take()
            } else {
                params[index].clone()
            };
            if let Some(param) = param {
                query = param.bind_into(query);
            }
        }
        query
    }
}

/// An UPDATE of many rows of `table`, each from its own row of values: `set` and
/// `filter` name a row's values `v.column1`, `v.column2`, … and `join` says which row of
/// `table` a row of values updates. Rendered by [`Backend::update_from_values`].
#[derive(Debug)]
pub struct ValuesUpdate<'q> {
    pub(crate) table: &'static str,
    pub(crate) set: String,
    pub(crate) join: &'static str,
    pub(crate) filter: String,
    /// The placeholders of each row of values.
    pub(crate) rows: Vec<Vec<String>>,
    pub(crate) statement: Statement<'q>,
}

impl<'q> ValuesUpdate<'q> {
    /// An update of `table` where `join`; `values` gives each item's row of values.
    pub(crate) fn new<T>(
        table: &'static str,
        join: &'static str,
        items: impl IntoIterator<Item = T>,
        mut values: impl FnMut(T) -> Vec<Param<'q>>,
    ) -> ValuesUpdate<'q> {
        let mut statement = Statement::build(String::new());
        let rows = items
            .into_iter()
            .map(|item| {
                values(item)
                    .into_iter()
                    .map(|value| statement.param(value))
                    .collect()
            })
            .collect();
        ValuesUpdate {
            table,
            set: String::new(),
            join,
            filter: String::new(),
            rows,
            statement,
        }
    }

    /// A placeholder for a value shared by every row (for `set` or `filter`).
    pub(crate) fn param(&mut self, value: impl Into<Param<'q>>) -> String {
        self.statement.param(value)
    }

    /// The update as one statement of `DB`'s.
    pub(crate) fn statement<DB: Backend>(mut self) -> Statement<'q> {
        let sql = DB::update_from_values(&self);
        self.statement.sql = Cow::Owned(sql);
        self.statement
    }

    /// A SELECT of `columns` of the rows this update would change, locking them for the
    /// transaction where the database locks rows: what a database without
    /// `UPDATE … RETURNING` reads first.
    pub(crate) fn select_for_update<DB: Backend>(&self, columns: &str) -> Statement<'q> {
        let mut select = self.statement.clone();
        select.sql = Cow::Owned(format!(
            "SELECT {columns} FROM {} JOIN {} AS v ON {} WHERE {}{}",
            self.table,
            DB::values_table(&self.rows),
            self.join,
            self.filter,
            DB::LOCK_ROWS
        ));
        select
    }
}

/// `sql` with each `$N` outside quotes made a `?`, and the params in the order the `?`s
/// take them.
pub(crate) fn positional(sql: &str) -> Rendered {
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut chars = sql.char_indices().peekable();
    let mut quote: Option<char> = None;
    while let Some((_, c)) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' || c == '`' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '$' && chars.peek().is_some_and(|(_, d)| d.is_ascii_digit()) => {
                let mut number = 0usize;
                while let Some(&(_, d)) = chars.peek() {
                    let Some(digit) = d.to_digit(10) else { break };
                    number = number * 10 + digit as usize;
                    chars.next();
                }
                out.push('?');
                order.push(number.saturating_sub(1));
            }
            None => out.push(c),
        }
    }
    Rendered { sql: out, order }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_placeholders_become_positional_in_the_order_they_are_read() {
        let rendered = positional(
            "UPDATE t SET a = $2, b = CASE WHEN $3 < c THEN c ELSE $3 END WHERE id = $1 AND s = '$4' AND $10 > 0",
        );
        assert_eq!(
            rendered.sql,
            "UPDATE t SET a = ?, b = CASE WHEN ? < c THEN c ELSE ? END WHERE id = ? AND s = '$4' AND ? > 0"
        );
        assert_eq!(rendered.order, [1, 2, 2, 0, 9]);
    }

    #[test]
    fn rows_and_lists_number_their_params_after_those_before() {
        let mut statement = Statement::build("INSERT INTO t (a, b) VALUES ");
        statement.push_rows([("x", 1_i64), ("y", 2)], |(a, b)| vec![a.into(), b.into()]);
        statement.push(" -- ").push_list([7_i16, 8]);
        assert_eq!(
            statement.sql,
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4) -- $5, $6"
        );
        assert_eq!(statement.params.len(), 6);
    }
}

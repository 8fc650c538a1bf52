//! An INSERT of many rows given column by column ([`InsertRows`]), rendered per database
//! by [`Backend::insert_rows`]: by default multi-row `VALUES` statements of at most
//! [`PARAMS_PER_STATEMENT`] params each; PostgreSQL binds each column as one array and
//! inserts from `UNNEST`, one statement of as many params as columns whatever the count
//! of rows (a job log row of 12 columns cost about 20 µs in `VALUES` of 1,000 rows, most
//! of it binding and planning 12,000 params; `BENCHMARKS.md`, 2026-12-06). Rows the
//! caller knows are new ([`InsertRows::by_copy`]) PostgreSQL loads by `COPY … FROM STDIN`
//! in its binary format ([`InsertRows::copy_data`]): no conflict to look for, no array to
//! unpack (a history's job log, 1.65 times as fast as `INSERT … ON CONFLICT DO NOTHING`).

use std::borrow::Cow;

use super::statement::Param;
use super::{Backend, Statement};

/// Params of one multi-row `VALUES` statement at most: under SQLite's limit (32,766) and
/// MySQL's (65,535), and as many as a job log row's 12 columns over 1,000 rows.
pub(crate) const PARAMS_PER_STATEMENT: usize = 12_000;

/// One column's values, a value for each row.
#[derive(Debug, Clone)]
pub enum Values<'q> {
    Text(Vec<&'q str>),
    Small(Vec<i16>),
    Int(Vec<i32>),
    Big(Vec<i64>),
    /// 64-bit integers or NULLs.
    MaybeBig(Vec<Option<i64>>),
}

impl<'q> Values<'q> {
    fn len(&self) -> usize {
        match self {
            Values::Text(values) => values.len(),
            Values::Small(values) => values.len(),
            Values::Int(values) => values.len(),
            Values::Big(values) => values.len(),
            Values::MaybeBig(values) => values.len(),
        }
    }

    /// Row `row`'s value, as a param of a `VALUES` statement.
    fn param(&self, row: usize) -> Param<'q> {
        match self {
            Values::Text(values) => Param::Text(Cow::Borrowed(values[row])),
            Values::Small(values) => Param::Small(values[row]),
            Values::Int(values) => Param::Int(values[row]),
            Values::Big(values) => Param::Big(values[row]),
            Values::MaybeBig(values) => Param::MaybeBig(values[row]),
        }
    }

    /// Row `row`'s value as a field of PostgreSQL's binary `COPY` (its length, then its
    /// bytes in the type's binary form: text as UTF-8, integers big-endian; -1 for NULL).
    fn copy_field(&self, row: usize, out: &mut Vec<u8>) -> Result<(), String> {
        fn field(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), String> {
            let len = i32::try_from(bytes.len())
                .map_err(|_| format!("a value of {} bytes is over 2 GiB", bytes.len()))?;
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(bytes);
            Ok(())
        }
        match self {
            Values::Text(values) => field(out, values[row].as_bytes()),
            Values::Small(values) => field(out, &values[row].to_be_bytes()),
            Values::Int(values) => field(out, &values[row].to_be_bytes()),
            Values::Big(values) => field(out, &values[row].to_be_bytes()),
            Values::MaybeBig(values) => match values[row] {
                Some(value) => field(out, &value.to_be_bytes()),
                None => {
                    out.extend_from_slice(&(-1_i32).to_be_bytes());
                    Ok(())
                }
            },
        }
    }
}

/// The start of PostgreSQL's binary `COPY` data: its signature, no flags, no extension.
const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// The end of binary `COPY` data: a tuple of -1 fields.
const COPY_TRAILER: [u8; 2] = (-1_i16).to_be_bytes();

/// `INSERT INTO table (columns)` of rows given as one [`Values`] per column, in the
/// columns' order; with [`InsertRows::skip_duplicates`], rows whose key exists are
/// skipped (the count inserted is those that were not).
#[derive(Debug, Clone)]
pub struct InsertRows<'q> {
    pub(crate) table: &'static str,
    /// The columns as the statement names them, comma-separated.
    pub(crate) columns: &'static str,
    pub(crate) values: Vec<Values<'q>>,
    pub(crate) skip_duplicates: Option<&'static str>,
    /// Rows of one `VALUES` statement at most, where fewer than the params allow.
    pub(crate) rows_per_statement: Option<usize>,
    /// The rows are new ([`InsertRows::by_copy`]).
    pub(crate) by_copy: bool,
}

impl<'q> InsertRows<'q> {
    /// An insert into `table` of `columns` (as SQL names them, comma-separated), whose
    /// values are then given a column at a time, in that order.
    pub(crate) fn new(table: &'static str, columns: &'static str) -> InsertRows<'q> {
        InsertRows {
            table,
            columns,
            values: Vec::new(),
            skip_duplicates: None,
            rows_per_statement: None,
            by_copy: false,
        }
    }

    /// The rows are known to be new (the caller found none of their keys in this
    /// transaction, nor two alike among them): PostgreSQL loads them by `COPY`, whose
    /// binary data must match each column's type exactly ([`Values::Small`] for
    /// `SMALLINT`, [`Values::Int`] for `INTEGER`, [`Values::Big`] for `BIGINT`); the
    /// others insert them as without it. A key found after all fails the insert.
    pub(crate) fn by_copy(mut self) -> InsertRows<'q> {
        debug_assert!(
            self.skip_duplicates.is_none(),
            "rows skipped when stored are not known to be new"
        );
        self.by_copy = true;
        self
    }

    /// At most `rows` rows in one `VALUES` statement (rows of large values, which a
    /// database's packet limit bounds before its count of params does).
    pub(crate) fn rows_per_statement(mut self, rows: usize) -> InsertRows<'q> {
        self.rows_per_statement = Some(rows);
        self
    }

    /// The next column's values.
    pub(crate) fn column(mut self, values: Values<'q>) -> InsertRows<'q> {
        debug_assert!(
            self.values
                .first()
                .is_none_or(|first| first.len() == values.len()),
            "every column of {} has a value for each row",
            self.table
        );
        self.values.push(values);
        self
    }

    /// Skips the rows whose `key` (unique columns) exists, instead of failing.
    pub(crate) fn skip_duplicates(mut self, key: &'static str) -> InsertRows<'q> {
        debug_assert!(!self.by_copy, "rows copied are new, not skipped");
        self.skip_duplicates = Some(key);
        self
    }

    pub(crate) fn rows(&self) -> usize {
        self.values.first().map_or(0, Values::len)
    }

    /// The insert as multi-row `VALUES` statements (`Backend::insert_rows`' default),
    /// rendered for `DB`: the text of a statement of so many rows is made once and
    /// shared by every statement of as many (a job log's 1,000 rows are 12,000
    /// placeholders; made and rendered for each statement, they were a third of its
    /// time in Spindle).
    pub(crate) fn statements<DB: Backend>(&self) -> Vec<Statement<'q>> {
        let per_statement = (PARAMS_PER_STATEMENT / self.values.len().max(1))
            .min(self.rows_per_statement.unwrap_or(usize::MAX))
            .max(1);
        let mut text: Option<(usize, String)> = None;
        let rows: Vec<usize> = (0..self.rows()).collect();
        rows.chunks(per_statement)
            .map(|chunk| {
                let sql = match &text {
                    Some((rows, sql)) if *rows == chunk.len() => sql.clone(),
                    _ => {
                        let sql = self.values_sql::<DB>(chunk.len());
                        text = Some((chunk.len(), sql.clone()));
                        sql
                    }
                };
                let mut params = Vec::with_capacity(chunk.len() * self.values.len());
                for &row in chunk {
                    params.extend(self.values.iter().map(|column| column.param(row)));
                }
                Statement::rendered(sql, params)
            })
            .collect()
    }

    /// The text of an insert of `rows` rows as `DB` runs it, its params row by row.
    fn values_sql<DB: Backend>(&self, rows: usize) -> String {
        use std::fmt::Write as _;
        let columns = self.values.len();
        let mut sql = format!("INSERT INTO {} ({}) VALUES ", self.table, self.columns);
        for row in 0..rows {
            sql.push_str(if row == 0 { "(" } else { ", (" });
            for column in 0..columns {
                if column > 0 {
                    sql.push_str(", ");
                }
                write!(sql, "${}", row * columns + column + 1).expect("a String takes any text");
            }
            sql.push(')');
        }
        let sql = match self.skip_duplicates {
            Some(key) => DB::skip_duplicates(&sql, key),
            None => sql,
        };
        match DB::render(&sql) {
            Some(rendered) => {
                debug_assert!(
                    rendered
                        .order
                        .iter()
                        .enumerate()
                        .all(|(at, &param)| at == param),
                    "an insert's placeholders take its params in order"
                );
                rendered.sql
            }
            None => sql,
        }
    }

    /// PostgreSQL's `COPY` of the rows (`FORMAT binary`), and its data in pieces of about
    /// `piece` bytes (a history's batch is hundreds of megabytes; a piece is one message);
    /// an error names a value the format cannot carry.
    pub(crate) fn copy_data(&self, piece: usize) -> Result<(String, Vec<Vec<u8>>), String> {
        let statement = format!(
            "COPY {} ({}) FROM STDIN (FORMAT binary)",
            self.table, self.columns
        );
        let fields = i16::try_from(self.values.len()).expect("under 32,768 columns");
        let mut pieces = Vec::new();
        let mut data = COPY_HEADER.to_vec();
        for row in 0..self.rows() {
            data.extend_from_slice(&fields.to_be_bytes());
            for column in &self.values {
                column
                    .copy_field(row, &mut data)
                    .map_err(|err| format!("{} row {row}: {err}", self.table))?;
            }
            if data.len() >= piece {
                pieces.push(std::mem::take(&mut data));
            }
        }
        data.extend_from_slice(&COPY_TRAILER);
        pieces.push(data);
        Ok((statement, pieces))
    }

    /// The statement's text where each column is one array param unnested (PostgreSQL),
    /// `array_types` naming each [`Values`]' array type.
    pub(crate) fn unnest_sql<DB: Backend>(
        &self,
        array_type: impl Fn(&Values<'_>) -> &'static str,
    ) -> String {
        let arrays: Vec<String> = self
            .values
            .iter()
            .enumerate()
            .map(|(at, column)| format!("${}::{}", at + 1, array_type(column)))
            .collect();
        let insert = format!(
            "INSERT INTO {} ({}) SELECT * FROM UNNEST({})",
            self.table,
            self.columns,
            arrays.join(", ")
        );
        match self.skip_duplicates {
            Some(key) => DB::skip_duplicates(&insert, key),
            None => insert,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_columns(rows: usize) -> InsertRows<'static> {
        let names: Vec<&'static str> = (0..rows).map(|_| "x").collect();
        InsertRows::new("t", "a, b")
            .column(Values::Text(names))
            .column(Values::Big((0..rows as i64).collect()))
    }

    #[test]
    fn values_statements_stay_under_the_params_limit_and_keep_every_row() {
        let insert = two_columns(PARAMS_PER_STATEMENT + 3);
        let statements = insert.statements::<sqlx::Postgres>();
        // 6,000 rows of two params a statement: three statements, the last of 3 rows.
        assert_eq!(statements.len(), 3);
        assert!(
            statements[0]
                .sql()
                .starts_with("INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)")
        );
        assert!(statements[2].sql().ends_with("($5, $6)"));
    }

    #[test]
    fn statements_of_one_size_share_their_text_rendered_for_the_database() {
        let insert = InsertRows::new("t", "a, b")
            .column(Values::Text(vec!["x", "y", "z"]))
            .column(Values::Big(vec![1, 2, 3]))
            .rows_per_statement(2)
            .skip_duplicates("a");
        let statements = insert.statements::<sqlx::Sqlite>();
        let texts: Vec<&str> = statements.iter().map(|s| s.sql()).collect();
        assert_eq!(
            texts,
            [
                "INSERT INTO t (a, b) VALUES (?, ?), (?, ?) ON CONFLICT (a) DO NOTHING",
                "INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT (a) DO NOTHING",
            ]
        );
        // Params row by row, in the placeholders' order.
        let params: Vec<String> = statements
            .iter()
            .flat_map(|s| s.params().iter().map(|p| format!("{p:?}")))
            .collect();
        assert_eq!(
            params,
            [
                r#"Text("x")"#,
                "Big(1)",
                r#"Text("y")"#,
                "Big(2)",
                r#"Text("z")"#,
                "Big(3)"
            ]
        );
        let mysql = insert.statements::<sqlx::MySql>();
        assert_eq!(mysql[1].sql(), "INSERT IGNORE INTO t (a, b) VALUES (?, ?)");
    }

    #[test]
    fn an_unnest_names_one_array_a_column() {
        let insert = two_columns(3).skip_duplicates("a");
        let sql = insert.unnest_sql::<sqlx::Postgres>(|column| match column {
            Values::Text(_) => "text[]",
            _ => "int8[]",
        });
        assert_eq!(
            sql,
            "INSERT INTO t (a, b) SELECT * FROM UNNEST($1::text[], $2::int8[]) ON CONFLICT (a) DO NOTHING"
        );
    }

    #[test]
    fn copied_rows_are_postgres_binary_copy_data_in_pieces() {
        let insert = InsertRows::new("t", "a, b, c, d")
            .column(Values::Text(vec!["é", ""]))
            .column(Values::Small(vec![3, -1]))
            .column(Values::Int(vec![7, 8]))
            .column(Values::MaybeBig(vec![None, Some(258)]))
            .by_copy();
        let (statement, pieces) = insert.copy_data(usize::MAX).unwrap();
        assert_eq!(statement, "COPY t (a, b, c, d) FROM STDIN (FORMAT binary)");
        let mut expected = b"PGCOPY\n\xff\r\n\0".to_vec();
        expected.extend([0; 8]); // no flags, no header extension
        // Each row: 4 fields, then each field's length and bytes (NULL: length -1).
        expected.extend([0, 4, 0, 0, 0, 2, 0xc3, 0xa9, 0, 0, 0, 2, 0, 3]);
        expected.extend([0, 0, 0, 4, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff]);
        expected.extend([
            0, 4, 0, 0, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0, 0, 0, 4, 0, 0, 0, 8,
        ]);
        expected.extend([0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 1, 2]);
        expected.extend([0xff, 0xff]); // the end
        assert_eq!(pieces, [expected.clone()]);
        // Pieces of at least a byte: one a row, the first with the header, the end last.
        let (_, pieces) = insert.copy_data(1).unwrap();
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), expected);
        assert_eq!(pieces[2], [0xff, 0xff]);
    }
}

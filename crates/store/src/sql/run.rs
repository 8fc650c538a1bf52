//! Running a [`Statement`] and reading its rows, in code generic over a [`Backend`] with
//! no other bound: sqlx's bounds on a database's types (binding params, decoding
//! columns, executing on a connection) are named once here and met by each backend's
//! concrete types, through the three running methods every `Backend` impl takes from
//! [`runs_statements`].

use std::future::Future;
use std::pin::Pin;

use sqlx::{ColumnIndex, Decode, Executor, IntoArguments, Pool, Type};

use super::Backend;
use super::statement::{Binds, Param, Statement};

/// A future as sqlx answers it (the type of `futures::future::BoxFuture`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a [`Statement`] runs: on a connection of a pool's, in a transaction, or on a
/// connection held for a session's state (MySQL's table locks: `partitions::mysql`).
pub(crate) enum On<'a, 't, DB: Backend> {
    Pool(&'a Pool<DB>),
    Transaction(&'a mut sqlx::Transaction<'t, DB>),
    Connection(&'a mut DB::Connection),
}

impl<'a, DB: Backend> From<&'a Pool<DB>> for On<'a, '_, DB> {
    fn from(pool: &'a Pool<DB>) -> Self {
        On::Pool(pool)
    }
}

impl<'a, 't, DB: Backend> From<&'a mut sqlx::Transaction<'t, DB>> for On<'a, 't, DB> {
    fn from(tx: &'a mut sqlx::Transaction<'t, DB>) -> Self {
        On::Transaction(tx)
    }
}

/// Runs `$run` (a [`Backend`] method) on the connection `$on` stands for.
macro_rules! on_connection {
    ($on:expr, $statement:expr, $run:ident) => {
        match $on.into() {
            On::Pool(pool) => DB::$run(&mut *pool.acquire().await?, $statement).await,
            On::Transaction(tx) => DB::$run(&mut **tx, $statement).await,
            On::Connection(conn) => DB::$run(conn, $statement).await,
        }
    };
    // A read: explained first, on the same connection, within `plans::explained`.
    ($on:expr, $statement:expr, $run:ident, explained) => {
        match $on.into() {
            On::Pool(pool) => {
                let mut conn = pool.acquire().await?;
                explain::<DB>(&mut conn, &$statement).await?;
                DB::$run(&mut *conn, $statement).await
            }
            On::Transaction(tx) => {
                explain::<DB>(&mut **tx, &$statement).await?;
                DB::$run(&mut **tx, $statement).await
            }
            On::Connection(conn) => {
                explain::<DB>(&mut *conn, &$statement).await?;
                DB::$run(conn, $statement).await
            }
        }
    };
}

/// Records the database's plan of `statement` when the calling task wants it
/// ([`crate::plans::explained`]).
async fn explain<DB: Backend>(
    conn: &mut DB::Connection,
    statement: &Statement<'_>,
) -> Result<(), sqlx::Error> {
    if !crate::plans::wanted(statement.sql()) {
        return Ok(());
    }
    let rows = DB::fetch_all(conn, statement.prefixed(DB::EXPLAIN)).await?;
    let mut plan = Vec::with_capacity(rows.len());
    let mut full_scans = Vec::new();
    for row in &rows {
        let (line, whole) = DB::plan_line(row)?;
        plan.push(line);
        if let Some(table) = whole.filter(|table| crate::plans::TABLES.contains(&table.as_str()))
            && !full_scans.contains(&table)
        {
            full_scans.push(table);
        }
    }
    crate::plans::record(statement.sql(), plan, full_scans);
    Ok(())
}

/// Running a statement: what the concern modules call, with no bounds but [`Backend`]
/// (each backend runs it through [`run_on`], where sqlx's bounds are met by its
/// concrete types).
impl<'q> Statement<'q> {
    /// Every row the statement answers.
    pub(crate) async fn fetch_all<'a, 't: 'a, DB: Backend>(
        self,
        on: impl Into<On<'a, 't, DB>>,
    ) -> Result<Vec<DB::Row>, sqlx::Error> {
        on_connection!(on, self, fetch_all, explained)
    }

    /// The first row the statement answers, if any.
    pub(crate) async fn fetch_optional<'a, 't: 'a, DB: Backend>(
        self,
        on: impl Into<On<'a, 't, DB>>,
    ) -> Result<Option<DB::Row>, sqlx::Error> {
        on_connection!(on, self, fetch_optional, explained)
    }

    /// The first row the statement answers; none is [`sqlx::Error::RowNotFound`].
    pub(crate) async fn fetch_one<'a, 't: 'a, DB: Backend>(
        self,
        on: impl Into<On<'a, 't, DB>>,
    ) -> Result<DB::Row, sqlx::Error> {
        self.fetch_optional(on)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }

    /// Runs the statement for what it changes.
    pub(crate) async fn execute<'a, 't: 'a, DB: Backend>(
        self,
        on: impl Into<On<'a, 't, DB>>,
    ) -> Result<DB::QueryResult, sqlx::Error> {
        on_connection!(on, self, execute)
    }
}

impl<'q> super::InsertRows<'q> {
    /// Inserts the rows (as [`Backend::insert_rows`] renders them); the count inserted.
    pub(crate) async fn execute<'a, 't: 'a, DB: Backend>(
        self,
        on: impl Into<On<'a, 't, DB>>,
    ) -> Result<u64, sqlx::Error> {
        if self.rows() == 0 {
            return Ok(0);
        }
        on_connection!(on, self, insert_rows)
    }
}

/// How a statement runs on a connection of `DB`, for a backend whose types meet sqlx's
/// bounds: each [`Backend`] impl's `fetch_all`, `fetch_optional` and `execute` are these,
/// one function each of sqlx's of the same name.
pub(crate) mod run_on {
    use super::*;

    macro_rules! run_on {
        ($($run:ident -> $answer:ty;)*) => {$(
            pub(crate) fn $run<'e, 'q: 'e, DB>(
                conn: &'e mut DB::Connection,
                statement: Statement<'q>,
            ) -> BoxFuture<'e, Result<$answer, sqlx::Error>>
            where
                DB: Backend,
                for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
                DB::Arguments: IntoArguments<DB>,
                Param<'q>: Binds<'q, DB>,
            {
                match statement.into_unprepared() {
                    Ok(sql) => Box::pin(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).$run(conn)),
                    Err(statement) => Box::pin(statement.query::<DB>().$run(conn)),
                }
            }
        )*};
    }

    run_on! {
        fetch_all -> Vec<DB::Row>;
        fetch_optional -> Option<DB::Row>;
        execute -> DB::QueryResult;
    }
}

/// The [`Backend`] methods that run a statement, each [`run_on`]'s function: one line
/// in each backend's impl.
macro_rules! runs_statements {
    () => {
        fn fetch_all<'e, 'q: 'e>(
            conn: &'e mut Self::Connection,
            statement: $crate::sql::Statement<'q>,
        ) -> $crate::sql::BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>> {
            $crate::sql::run_on::fetch_all::<Self>(conn, statement)
        }

        fn fetch_optional<'e, 'q: 'e>(
            conn: &'e mut Self::Connection,
            statement: $crate::sql::Statement<'q>,
        ) -> $crate::sql::BoxFuture<'e, Result<Option<Self::Row>, sqlx::Error>> {
            $crate::sql::run_on::fetch_optional::<Self>(conn, statement)
        }

        fn execute<'e, 'q: 'e>(
            conn: &'e mut Self::Connection,
            statement: $crate::sql::Statement<'q>,
        ) -> $crate::sql::BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>> {
            $crate::sql::run_on::execute::<Self>(conn, statement)
        }
    };
}
pub(crate) use runs_statements;

/// A row's columns read by name, as the concern modules read them: the types Spindle
/// stores, each decoded by the row's database ([`Backend`] asks this of its rows).
pub trait Columns {
    fn small(&self, name: &str) -> Result<i16, sqlx::Error>;
    fn int(&self, name: &str) -> Result<i32, sqlx::Error>;
    fn big(&self, name: &str) -> Result<i64, sqlx::Error>;
    fn maybe_big(&self, name: &str) -> Result<Option<i64>, sqlx::Error>;
    fn text(&self, name: &str) -> Result<String, sqlx::Error>;
    fn maybe_text(&self, name: &str) -> Result<Option<String>, sqlx::Error>;

    /// The column `name` as a `T`.
    fn read<T: Column>(&self, name: &str) -> Result<T, sqlx::Error>
    where
        Self: Sized,
    {
        T::read(self, name)
    }
}

impl<R> Columns for R
where
    R: sqlx::Row,
    for<'a> &'a str: ColumnIndex<R>,
    String: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i16: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i32: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    i64: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: for<'r> Decode<'r, R::Database> + Type<R::Database>,
    Option<i64>: for<'r> Decode<'r, R::Database> + Type<R::Database>,
{
    fn small(&self, name: &str) -> Result<i16, sqlx::Error> {
        self.try_get(name)
    }
    fn int(&self, name: &str) -> Result<i32, sqlx::Error> {
        self.try_get(name)
    }
    fn big(&self, name: &str) -> Result<i64, sqlx::Error> {
        self.try_get(name)
    }
    fn maybe_big(&self, name: &str) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(name)
    }
    fn text(&self, name: &str) -> Result<String, sqlx::Error> {
        self.try_get(name)
    }
    fn maybe_text(&self, name: &str) -> Result<Option<String>, sqlx::Error> {
        self.try_get(name)
    }
}

/// A type a column is read as ([`Columns::read`]).
pub trait Column: Sized {
    fn read(row: &impl Columns, name: &str) -> Result<Self, sqlx::Error>;
}

macro_rules! column {
    ($($ty:ty => $method:ident),* $(,)?) => {
        $(impl Column for $ty {
            fn read(row: &impl Columns, name: &str) -> Result<Self, sqlx::Error> {
                row.$method(name)
            }
        })*
    };
}

column!(
    i16 => small,
    i32 => int,
    i64 => big,
    Option<i64> => maybe_big,
    String => text,
    Option<String> => maybe_text,
);

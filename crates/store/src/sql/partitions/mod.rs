//! The month partitions of the four tables a request's history fills (`requests`,
//! `request_archives`, `request_args`, `job_log`): each a range of request ids, the ids
//! an xid makes in one calendar month (UTC), so that retention removes a month wholly
//! past it by dropping its partitions rather than deleting its rows one by one. The
//! months are made ahead ([`SqlStore::prepare_partitions`], at connect and every
//! background round) and for the months an import brings. Retention drops the oldest
//! month that ended before its cut-off once all its requests finished before it, the
//! `_before` partition (what was stored before the tables were partitioned) among them.
//!
//! Each database's dialect in its module: PostgreSQL's declarative partitions
//! ([`postgres`], migration 0105) are made and dropped in a transaction; MySQL's ranges
//! ([`mysql`], migration 0106) by DDL under its table locks. SQLite has none
//! ([`MonthPartitions::None`]): nothing here runs.

use std::collections::HashSet;
use std::sync::Mutex;

use chrono::{Datelike, TimeZone};

use super::run::On;
use super::*;

mod mysql;
mod postgres;

/// How a backend's request tables are partitioned by month ([`Backend::MONTH_PARTITIONS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonthPartitions {
    /// Not at all (SQLite): retention removes row by row.
    None,
    /// PostgreSQL's declarative partitions: a partition a month, `_before` from
    /// MINVALUE, a default one for ids no range holds (migration 0105).
    Postgres,
    /// MySQL's `RANGE COLUMNS` partitions: contiguous ranges, each from the one before
    /// it, `_before` first and `_default` to MAXVALUE last (migration 0106).
    Mysql,
}

impl MonthPartitions {
    /// Whether the request tables are partitioned by month.
    pub const fn partitioned(self) -> bool {
        !matches!(self, MonthPartitions::None)
    }
}

/// The tables partitioned by month, children (no foreign key to them) first.
const TABLES: [&str; 4] = ["job_log", "request_args", "request_archives", "requests"];

/// One calendar month of request ids: from the smallest xid of its first second to the
/// smallest of the next month's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Month {
    /// `m` and the year and month, `m202612`: the partitions are `<table>_<suffix>`.
    pub(crate) suffix: String,
    pub(crate) lo: String,
    pub(crate) hi: String,
}

impl Month {
    /// The month `year`-`month` (1–12).
    pub(crate) fn new(year: i32, month: u32) -> Month {
        let (next_year, next_month) = if month == 12 {
            (year + 1, 1)
        } else {
            (year, month + 1)
        };
        Month {
            suffix: format!("m{year:04}{month:02}"),
            lo: xid_floor(year, month),
            hi: xid_floor(next_year, next_month),
        }
    }

    /// The month of `at`, and the `ahead` after it.
    pub(crate) fn and_next(at: DateTime<Utc>, ahead: u32) -> Vec<Month> {
        (0..=ahead)
            .map(|n| {
                let months = at.year() * 12 + at.month0() as i32 + n as i32;
                Month::new(months.div_euclid(12), months.rem_euclid(12) as u32 + 1)
            })
            .collect()
    }

    /// The month whose range holds `id`, where `id` is an xid made between 2000 and a
    /// year from `now` (any other id is kept in the default partitions).
    pub(crate) fn of_id(id: &str, now: DateTime<Utc>) -> Option<Month> {
        let made: DateTime<Utc> = id.parse::<xid::Id>().ok()?.time().into();
        (made.year() >= 2000 && made < now + chrono::Duration::days(365))
            .then(|| Month::new(made.year(), made.month()))
    }

    /// Whether `suffix` names a month partition (`m202612`).
    fn is_suffix(suffix: &str) -> bool {
        suffix.strip_prefix('m').is_some_and(|digits| {
            digits.len() == 6
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (1..=12).contains(&digits[4..].parse::<u32>().unwrap_or(0))
        })
    }

    /// When the month's ids end (the next month's first second).
    pub(crate) fn end(&self) -> DateTime<Utc> {
        let id: xid::Id = self.hi.parse().unwrap_or(xid::Id([0; 12]));
        id.time().into()
    }

    /// The month that begins where this one's range ends.
    fn next(&self) -> Month {
        Month::and_next(self.end(), 0).remove(0)
    }
}

/// A value as a partition's bound says it: `'…'` quoted (a quote in it doubled).
fn unquoted(value: &str) -> Option<String> {
    value
        .strip_prefix('\'')
        .and_then(|value| value.strip_suffix('\''))
        .map(|value| value.replace("''", "'"))
}

/// The smallest xid made in the first second of `year`-`month`: its four bytes of
/// seconds, then zeros.
fn xid_floor(year: i32, month: u32) -> String {
    let seconds = Utc
        .with_ymd_and_hms(year, month, 1, 0, 0, 0)
        .single()
        .map_or(0, |at| u32::try_from(at.timestamp()).unwrap_or(u32::MAX));
    let mut raw = [0u8; 12];
    raw[..4].copy_from_slice(&seconds.to_be_bytes());
    xid::Id(raw).to_string()
}

/// The table a partition belongs to: `requests` of `requests_m202612`,
/// `requests_before` or `requests_default`, and any other name as it is.
pub(crate) fn partitioned_table(name: &str) -> &str {
    if let Some(table) = name
        .strip_suffix("_default")
        .or_else(|| name.strip_suffix("_before"))
    {
        return table;
    }
    match name.rsplit_once('_') {
        Some((table, suffix)) if Month::is_suffix(suffix) => table,
        _ => name,
    }
}

/// The months this store has seen made, or seen it need not or cannot make (another
/// partition holds their ids), so that a write asks the database about a month once.
#[derive(Debug, Default)]
pub(crate) struct KnownMonths(Mutex<HashSet<String>>);

impl KnownMonths {
    fn knows(&self, suffix: &str) -> bool {
        self.lock().contains(suffix)
    }

    fn learn(&self, suffix: &str) {
        self.lock().insert(suffix.to_owned());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<DB: Backend> SqlStore<DB> {
    /// Makes the partitions of `now`'s month and the next two where they are not yet;
    /// the number of months made.
    pub(crate) async fn prepare_partitions(&self, now: DateTime<Utc>) -> Result<u32, Error> {
        self.make_months(Month::and_next(now, 2)).await
    }

    /// Makes the partitions of the months of `ids` (xids) not made yet.
    pub(crate) async fn make_months_of<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> Result<u32, Error> {
        if !DB::MONTH_PARTITIONS.partitioned() {
            return Ok(0);
        }
        let now = Utc::now();
        let mut months: Vec<Month> = Vec::new();
        for id in ids {
            if let Some(month) = Month::of_id(id, now)
                && !months.contains(&month)
            {
                months.push(month);
            }
        }
        self.make_months(months).await
    }

    async fn make_months(&self, months: Vec<Month>) -> Result<u32, Error> {
        let months: Vec<Month> = months
            .into_iter()
            .filter(|month| !self.months.knows(&month.suffix))
            .collect();
        if months.is_empty() {
            return Ok(0);
        }
        match DB::MONTH_PARTITIONS {
            MonthPartitions::None => Ok(0),
            MonthPartitions::Postgres => self.make_postgres_months(months).await,
            MonthPartitions::Mysql => self.make_mysql_months(months).await,
        }
    }

    /// In retention's transaction (which holds its lock): drops the oldest month (or
    /// `_before` partition) that ended before `before` and whose requests all finished
    /// before it, with its rows of the other tables; what it removed, or None when none
    /// is such.
    pub(crate) async fn drop_month(
        &self,
        tx: &mut sqlx::Transaction<'_, DB>,
        before: DateTime<Utc>,
    ) -> Result<Option<Removed>, Error> {
        match DB::MONTH_PARTITIONS {
            MonthPartitions::None => Ok(None),
            MonthPartitions::Postgres => Self::drop_postgres_month(tx, before).await,
            // DDL ends a MySQL transaction: the month goes on a connection of its own,
            // while `tx` keeps retention's lock.
            MonthPartitions::Mysql => self.drop_mysql_month(before).await,
        }
    }

    /// The first of `months` (oldest first) whose requests all finished before `before`.
    async fn droppable(
        conn: &mut DB::Connection,
        months: Vec<Month>,
        before: DateTime<Utc>,
    ) -> Result<Option<Month>, Error> {
        for month in months {
            if month.end() <= before && !Self::month_unfinished(conn, &month, before).await? {
                return Ok(Some(month));
            }
        }
        Ok(None)
    }

    /// Deletes the month's rows of the request tables not partitioned, by id range.
    async fn delete_month_rows(conn: &mut DB::Connection, month: &Month) -> Result<(), Error> {
        for table in REQUEST_TABLES
            .into_iter()
            .filter(|table| !TABLES.contains(table))
        {
            Statement::build(format!(
                "DELETE FROM {table} WHERE request_id >= $1 AND request_id < $2"
            ))
            .bind(month.lo.as_str())
            .bind(month.hi.as_str())
            .execute(On::<DB>::Connection(&mut *conn))
            .await?;
        }
        Ok(())
    }

    /// Whether a request of `month` is unfinished or finished at or after `before`:
    /// three probes of indexes (its states', its finish times'), so that the check under
    /// the tables' locks reads no month whole (28 ms for 42,000 requests read whole);
    /// three statements, as MySQL's `LOCK TABLES` lets a statement name a table once.
    async fn month_unfinished(
        conn: &mut DB::Connection,
        month: &Month,
        before: DateTime<Utc>,
    ) -> Result<bool, Error> {
        let finished = [State::Complete, State::Fail, State::Stopped];
        let unfinished = State::ALL
            .into_iter()
            .filter(|state| !finished.contains(state));
        let in_month = |condition: &str| {
            Statement::build(format!(
                "SELECT 1 AS one FROM requests WHERE request_id >= $1 AND request_id < $2 AND {condition}"
            ))
            .bind(month.lo.as_str())
            .bind(month.hi.as_str())
        };
        let mut by_state = in_month("state IN (");
        by_state
            .push_list(unfinished.map(state_value))
            .push(") LIMIT 1");
        let mut late = in_month("finished_at >= ");
        late.push_param(micros(before)).push(" LIMIT 1");
        let open = in_month("finished_at IS NULL LIMIT 1");
        for probe in [by_state, late, open] {
            if probe
                .fetch_optional(On::<DB>::Connection(&mut *conn))
                .await?
                .is_some()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn count_in(conn: &mut DB::Connection, table: &str, month: &Month) -> Result<u64, Error> {
        let n: i64 = Statement::build(format!(
            "SELECT COUNT(*) AS n FROM {table} WHERE request_id >= $1 AND request_id < $2"
        ))
        .bind(month.lo.as_str())
        .bind(month.hi.as_str())
        .fetch_one(On::<DB>::Connection(conn))
        .await?
        .read("n")?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

/// Says that `month` was dropped, how long its tables' locks took to get and how long
/// they were held (the writes of requests wait meanwhile).
fn log_drop(month: &Month, removed: &Removed, waited: Duration, held: Duration) {
    tracing::info!(
        month = %month.suffix,
        requests = removed.requests,
        waited_ms = waited.as_millis() as u64,
        held_ms = held.as_millis() as u64,
        "retention: dropped a month's partitions"
    );
}

/// A request of `month` changed between the check and the lock.
fn month_changed(month: &Month) -> Error {
    Error::Conflict(format!(
        "a request of month {} changed while retention was removing the month; \
         it is kept, and looked at again next round",
        month.suffix
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_is_the_range_of_the_xids_made_in_it() {
        let december = Month::new(2026, 12);
        assert_eq!(december.suffix, "m202612");
        let made_in = |at: DateTime<Utc>| {
            let mut raw = [0xffu8; 12];
            raw[..4].copy_from_slice(&(at.timestamp() as u32).to_be_bytes());
            xid::Id(raw).to_string()
        };
        let first = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        let last = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap();
        for at in [first, last] {
            let id = made_in(at);
            assert!(
                december.lo <= id && id < december.hi,
                "{id} in {december:?}"
            );
            assert_eq!(Month::of_id(&id, first), Some(december.clone()));
        }
        assert!(made_in(first - chrono::Duration::seconds(1)) < december.lo);
        assert_eq!(december.hi, Month::new(2027, 1).lo);
        assert_eq!(
            december.end(),
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        );
        let new_id = xid::new().to_string();
        assert_eq!(
            Month::of_id(&new_id, Utc::now()),
            Month::and_next(Utc::now(), 0).pop()
        );
    }

    #[test]
    fn other_ids_have_no_month() {
        let now = Utc.with_ymd_and_hms(2026, 12, 6, 0, 0, 0).unwrap();
        // Not xids, and an xid of an implausible time (the bench's `hist…` ids).
        for id in [
            "h000600",
            "req-1",
            "",
            "zzzzzzzzzzzzzzzzzzzz",
            "hist0000000000000001",
        ] {
            assert_eq!(Month::of_id(id, now), None, "{id}");
        }
    }

    #[test]
    fn months_ahead_cross_the_year() {
        let at = Utc.with_ymd_and_hms(2026, 11, 30, 23, 0, 0).unwrap();
        let suffixes: Vec<String> = Month::and_next(at, 2)
            .into_iter()
            .map(|m| m.suffix)
            .collect();
        assert_eq!(suffixes, ["m202611", "m202612", "m202701"]);
        assert_eq!(Month::new(2026, 12).next(), Month::new(2027, 1));
    }

    #[test]
    fn a_partition_is_named_after_its_table() {
        assert_eq!(partitioned_table("requests_m202612"), "requests");
        assert_eq!(partitioned_table("request_args_default"), "request_args");
        assert_eq!(partitioned_table("job_log_before"), "job_log");
        assert_eq!(partitioned_table("job_log"), "job_log");
        assert_eq!(partitioned_table("requests_m2026"), "requests_m2026");
    }
}

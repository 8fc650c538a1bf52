//! PostgreSQL's month partitions of the four tables a request's history fills
//! (`requests`, `request_archives`, `request_args`, `job_log`; migration 0105): each a
//! range of request ids, the ids an xid makes in one calendar month (UTC), so that
//! retention removes a month wholly past it by dropping its partitions rather than
//! deleting its rows one by one. The months are made ahead ([`SqlStore::prepare_partitions`],
//! at connect and every background round) and for the months an import brings; a month
//! whose ids the default partition holds already, or that the `_before` partition of
//! what was stored before 0105 covers, is not made. Retention drops the `_before`
//! partition too, once it is wholly past. On the other backends
//! (`Backend::MONTH_PARTITIONS` false) nothing here runs.

use std::collections::HashSet;
use std::sync::Mutex;

use chrono::{Datelike, TimeZone};

use super::*;

/// The tables partitioned by month, children (no foreign key to them) first.
const TABLES: [&str; 4] = ["job_log", "request_args", "request_archives", "requests"];

/// Serializes the making of partitions among Request Managers sharing a schema.
const MAKING_LOCK: &str = "SELECT pg_advisory_xact_lock(1268791545, hashtext(current_schema()))";

/// How long dropping or making a month waits for its tables' locks before giving up
/// (to try again next round): never long enough to hold up the writes queued behind it.
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '1s'";

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

    /// The partition of `requests` named `name` with the bound PostgreSQL says it has
    /// (`FOR VALUES FROM ('…') TO ('…')`, `FROM (MINVALUE)` for `_before`): None for the
    /// default partition.
    fn of_partition(name: &str, bound: &str) -> Option<Month> {
        let suffix = name.strip_prefix("requests_")?;
        let (lo, hi) = bound
            .strip_prefix("FOR VALUES FROM (")?
            .strip_suffix(')')?
            .split_once(") TO (")?;
        let quoted = |value: &str| {
            value
                .strip_prefix('\'')
                .and_then(|value| value.strip_suffix('\''))
                .map(str::to_owned)
        };
        Some(Month {
            suffix: suffix.to_owned(),
            lo: if lo == "MINVALUE" {
                String::new()
            } else {
                quoted(lo)?
            },
            hi: quoted(hi)?,
        })
    }

    /// When the month's ids end (the next month's first second).
    pub(crate) fn end(&self) -> DateTime<Utc> {
        let id: xid::Id = self.hi.parse().unwrap_or(xid::Id([0; 12]));
        id.time().into()
    }
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

/// The months this store has seen made, or seen it cannot make (the default or a
/// `_before` partition holds their ids), so that a write asks the database about a
/// month once.
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
    /// PostgreSQL: makes the partitions of `now`'s month and the next two where they are
    /// not yet; the number of months made.
    pub(crate) async fn prepare_partitions(&self, now: DateTime<Utc>) -> Result<u32, Error> {
        self.make_months(Month::and_next(now, 2)).await
    }

    /// PostgreSQL: makes the partitions of the months of `ids` (xids) not made yet.
    pub(crate) async fn make_months_of<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> Result<u32, Error> {
        if !DB::MONTH_PARTITIONS {
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
        if !DB::MONTH_PARTITIONS {
            return Ok(0);
        }
        let mut made = 0;
        for month in months {
            if self.months.knows(&month.suffix) {
                continue;
            }
            let mut tx = self.pool.begin().await?;
            Statement::new(MAKING_LOCK).execute(&mut tx).await?;
            let exists = Statement::new(
                "SELECT 1 AS one FROM pg_class WHERE relname = $1 \
                 AND relnamespace = current_schema()::regnamespace",
            )
            .bind(format!("requests_{}", month.suffix))
            .fetch_optional(&mut tx)
            .await?
            .is_some();
            if exists {
                self.months.learn(&month.suffix);
                continue;
            }
            if self.default_holds(&mut tx, &month).await? {
                self.months.learn(&month.suffix);
                continue;
            }
            Statement::new(LOCK_TIMEOUT).execute(&mut tx).await?;
            // False where the range is another partition's (`_before`'s).
            let made_now: i32 =
                Statement::new("SELECT spindle_month_partitions($1, $2, $3)::INT AS made")
                    .bind(month.suffix.as_str())
                    .bind(month.lo.as_str())
                    .bind(month.hi.as_str())
                    .fetch_one(&mut tx)
                    .await?
                    .read("made")?;
            let made_now = made_now == 1;
            tx.commit().await?;
            self.months.learn(&month.suffix);
            made += u32::from(made_now);
        }
        Ok(made)
    }

    /// Whether a default partition holds ids of `month` (a month of ids stored before
    /// its partitions could be made: it stays in the default ones).
    async fn default_holds(
        &self,
        tx: &mut sqlx::Transaction<'_, DB>,
        month: &Month,
    ) -> Result<bool, Error> {
        for table in TABLES {
            let held = Statement::build(format!(
                "SELECT 1 AS one FROM {table}_default WHERE request_id >= $1 AND request_id < $2 LIMIT 1"
            ))
            .bind(month.lo.as_str())
            .bind(month.hi.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            if held.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// PostgreSQL, in retention's transaction: drops the oldest month (or `_before`
    /// partition) that ended before `before` and whose requests all finished before it,
    /// with its rows of the other tables; what it removed, or None when none is such.
    pub(crate) async fn drop_month(
        tx: &mut sqlx::Transaction<'_, DB>,
        before: DateTime<Utc>,
    ) -> Result<Option<Removed>, Error> {
        if !DB::MONTH_PARTITIONS {
            return Ok(None);
        }
        let rows = Statement::new(
            "SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound \
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = 'requests'::regclass",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut months = Vec::new();
        for row in &rows {
            let (name, bound): (String, String) = (row.read("name")?, row.read("bound")?);
            if let Some(month) = Month::of_partition(&name, &bound)
                && month.end() <= before
            {
                months.push(month);
            }
        }
        months.sort_by(|a, b| a.lo.cmp(&b.lo));
        for month in months {
            if Self::month_unfinished(tx, &month, before).await? {
                continue;
            }
            let removed = Removed {
                requests: Self::count_in(tx, "requests", &month).await?,
                job_log_entries: Self::count_in(tx, "job_log", &month).await?,
                job_runners: 0,
                months: 1,
            };
            // The month's rows of the other tables, by id range.
            for table in REQUEST_TABLES
                .into_iter()
                .filter(|table| !TABLES.contains(table))
            {
                Statement::build(format!(
                    "DELETE FROM {table} WHERE request_id >= $1 AND request_id < $2"
                ))
                .bind(month.lo.as_str())
                .bind(month.hi.as_str())
                .execute(&mut *tx)
                .await?;
            }
            Statement::new(LOCK_TIMEOUT).execute(&mut *tx).await?;
            Statement::new(
                "LOCK TABLE requests, request_archives, request_args, job_log IN ACCESS EXCLUSIVE MODE",
            )
            .execute(&mut *tx)
            .await?;
            // Locked, nothing of the month changes; it was checked before the lock so
            // as not to hold the writes up while reading it. A request of it that
            // changed meanwhile (retried) undoes the transaction, the other tables'
            // rows with it: the next round sees the month as it is.
            if Self::month_unfinished(tx, &month, before).await? {
                return Err(Error::Conflict(format!(
                    "a request of month {} changed while retention was removing the month; \
                     it is kept, and looked at again next round",
                    month.suffix
                )));
            }
            for table in TABLES {
                let partition = format!("{table}_{}", month.suffix);
                if table == "requests" {
                    // Detached first: other tables' keys refer to it (none of its rows).
                    Statement::build(format!("ALTER TABLE requests DETACH PARTITION {partition}"))
                        .execute(&mut *tx)
                        .await?;
                }
                Statement::build(format!("DROP TABLE {partition}"))
                    .execute(&mut *tx)
                    .await?;
            }
            return Ok(Some(removed));
        }
        Ok(None)
    }

    /// Whether a request of `month` is unfinished or finished at or after `before`:
    /// three probes of indexes (its states', its finish times'), so that the check under
    /// the tables' locks reads no month whole (28 ms for 42,000 requests read whole).
    async fn month_unfinished(
        tx: &mut sqlx::Transaction<'_, DB>,
        month: &Month,
        before: DateTime<Utc>,
    ) -> Result<bool, Error> {
        let finished = [State::Complete, State::Fail, State::Stopped];
        let unfinished = State::ALL
            .into_iter()
            .filter(|state| !finished.contains(state));
        let mut query = Statement::build(
            "SELECT 1 AS one FROM requests WHERE request_id >= $1 AND request_id < $2 AND state IN (",
        )
        .bind(month.lo.as_str())
        .bind(month.hi.as_str());
        query
            .push_list(unfinished.map(state_value))
            .push(") UNION ALL SELECT 1 AS one FROM requests WHERE request_id >= $1 AND request_id < $2 AND finished_at >= ")
            .push_param(micros(before))
            .push(" UNION ALL SELECT 1 AS one FROM requests WHERE request_id >= $1 AND request_id < $2 AND finished_at IS NULL LIMIT 1");
        Ok(query.fetch_optional(&mut *tx).await?.is_some())
    }

    async fn count_in(
        tx: &mut sqlx::Transaction<'_, DB>,
        table: &str,
        month: &Month,
    ) -> Result<u64, Error> {
        let n: i64 = Statement::build(format!(
            "SELECT COUNT(*) AS n FROM {table} WHERE request_id >= $1 AND request_id < $2"
        ))
        .bind(month.lo.as_str())
        .bind(month.hi.as_str())
        .fetch_one(&mut *tx)
        .await?
        .read("n")?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
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
    }

    #[test]
    fn a_partition_s_range_is_read_from_its_bound() {
        let december = Month::new(2026, 12);
        let bound = format!("FOR VALUES FROM ('{}') TO ('{}')", december.lo, december.hi);
        assert_eq!(
            Month::of_partition("requests_m202612", &bound),
            Some(december)
        );
        let before = Month::of_partition(
            "requests_before",
            "FOR VALUES FROM (MINVALUE) TO ('dcrep000000000000000')",
        )
        .unwrap();
        assert_eq!((before.suffix.as_str(), before.lo.as_str()), ("before", ""));
        assert_eq!(
            before.end(),
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(Month::of_partition("requests_default", "DEFAULT"), None);
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

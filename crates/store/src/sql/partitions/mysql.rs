//! MySQL's month partitions (migration 0106): `PARTITION BY RANGE COLUMNS (request_id)`,
//! whose ranges are contiguous, each from where the one before it ends: `_before` first
//! (what was stored before 0106, and the rest of that month), a partition a month, and
//! `_default` to MAXVALUE last. A month is made by splitting `_default`
//! (`REORGANIZE PARTITION`, which moves its rows, none but ids from the future), the
//! months from the last one made to the latest asked for in one statement, so the
//! ranges stay a month each. An older month (an import's, or this one on a database
//! partitioned since it began) is in the first partition's range: made by splitting it
//! while it holds no row (a fresh database, an import's first batch), else its rows
//! stay in it. The first partition's range reaches down to the smallest id: it is
//! checked and dropped as such.
//!
//! MySQL ends a transaction at every DDL statement, so a month is dropped on a
//! connection of its own under `LOCK TABLES … WRITE` of every request table (taken
//! within 1 s or not at all; MySQL and MariaDB keep them through the `ALTER`s), the
//! month checked again under them, its other rows deleted and its partitions dropped,
//! the requests' last. The connection is closed after, its locks and session settings
//! with it.

use super::*;

/// Serializes the making of partitions among Request Managers sharing a database (a
/// named lock, the connection's while it lives).
const MAKING_LOCK: &str = "SELECT GET_LOCK(CONCAT('spindle_partitions.', DATABASE()), 10) AS got";

/// How long a month's DDL or table locks wait for the tables' metadata locks, held by
/// every transaction that touched them, before giving up (to try again next round).
const LOCK_TIMEOUT: &str = "SET SESSION lock_wait_timeout = 1";

impl Month {
    /// The ranges of `table`'s partitions from their names and bounds in order (as
    /// `information_schema.PARTITIONS` says them: `'…'`, and `MAXVALUE` for
    /// `_default`, which is left out): each from where the one before ends, the first
    /// from the smallest id.
    fn of_mysql_partitions(table: &str, partitions: &[(String, String)]) -> Option<Vec<Month>> {
        let mut lo = String::new();
        let mut months = Vec::new();
        for (name, bound) in partitions {
            if bound == "MAXVALUE" {
                continue;
            }
            let hi = unquoted(bound)?;
            months.push(Month {
                suffix: name.strip_prefix(table)?.strip_prefix('_')?.to_owned(),
                lo: std::mem::replace(&mut lo, hi.clone()),
                hi,
            });
        }
        Some(months)
    }

    /// The month whose range begins at `floor` (a month's first xid).
    fn beginning_at(floor: &str) -> Month {
        let id: xid::Id = floor.parse().unwrap_or(xid::Id([0; 12]));
        Month::and_next(id.time().into(), 0).remove(0)
    }

    /// The months from the one beginning at `from` to the one that ends at or after
    /// `to`: none when `to` is not after `from`.
    fn tiling(from: &str, to: &str) -> Vec<Month> {
        let mut months = Vec::new();
        let mut month = Month::beginning_at(from);
        while month.lo.as_str() < to {
            let next = month.next();
            months.push(month);
            month = next;
        }
        months
    }
}

/// An xid bound written into DDL: only base32hex's digits and letters, so nothing else
/// reaches the statement's text.
fn bound_literal(id: &str) -> Result<String, Error> {
    if id
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'v').contains(&b))
    {
        Ok(format!("'{id}'"))
    } else {
        Err(Error::Invalid(format!(
            "a month partition's bound {id:?} is not an xid"
        )))
    }
}

impl<DB: Backend> SqlStore<DB> {
    /// The partitions of `table` in order, as ranges (`_default` left out).
    async fn mysql_ranges(conn: &mut DB::Connection, table: &str) -> Result<Vec<Month>, Error> {
        let rows = Statement::new(
            "SELECT PARTITION_NAME AS name, PARTITION_DESCRIPTION AS bound \
             FROM information_schema.PARTITIONS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = $1 AND PARTITION_NAME IS NOT NULL \
             ORDER BY PARTITION_ORDINAL_POSITION",
        )
        .bind(table)
        .fetch_all(On::<DB>::Connection(conn))
        .await?;
        let mut partitions = Vec::with_capacity(rows.len());
        for row in &rows {
            partitions.push((row.read::<String>("name")?, row.read::<String>("bound")?));
        }
        Month::of_mysql_partitions(table, &partitions)
            .filter(|months| !months.is_empty())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "table {table} is not partitioned by month as migration 0106 leaves it: {partitions:?}"
                ))
            })
    }

    /// How many rows InnoDB's statistics say the partition of `month` of `table` holds.
    async fn mysql_partition_rows(
        conn: &mut DB::Connection,
        table: &str,
        month: &Month,
    ) -> Result<u64, Error> {
        let rows: Option<i64> = Statement::new(
            "SELECT CAST(TABLE_ROWS AS SIGNED) AS n FROM information_schema.PARTITIONS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = $1 AND PARTITION_NAME = $2",
        )
        .bind(table)
        .bind(format!("{table}_{}", month.suffix))
        .fetch_optional(On::<DB>::Connection(conn))
        .await?
        .map(|row| row.read::<Option<i64>>("n"))
        .transpose()?
        .flatten();
        Ok(rows.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
    }

    /// A connection of its own, its session's lock wait short: closed when dropped, so
    /// that no lock or setting of it goes back to the pool.
    async fn mysql_ddl_connection(&self) -> Result<DB::Connection, Error> {
        let mut conn = self.pool.acquire().await?.detach();
        Statement::new(LOCK_TIMEOUT)
            .execute(On::<DB>::Connection(&mut conn))
            .await?;
        Ok(conn)
    }

    pub(super) async fn make_mysql_months(&self, months: Vec<Month>) -> Result<u32, Error> {
        let mut conn = self.mysql_ddl_connection().await?;
        let got: Option<i64> = Statement::new(MAKING_LOCK)
            .fetch_one(On::<DB>::Connection(&mut conn))
            .await?
            .read("got")?;
        if got != Some(1) {
            // Another Request Manager is making them; the next round looks again.
            return Ok(0);
        }
        let made = Self::make_mysql_months_below(&mut conn, &months).await?
            + Self::make_mysql_months_above(&mut conn, &months).await?;
        // Every month asked for is now in a range: its own, or one it cannot have.
        for month in &months {
            self.months.learn(&month.suffix);
        }
        Ok(made)
    }

    /// The months asked for beyond the last one made, and those between: `_default`
    /// split (it holds no row but ids from the future, moved).
    async fn make_mysql_months_above(
        conn: &mut DB::Connection,
        months: &[Month],
    ) -> Result<u32, Error> {
        let Some(latest) = months.iter().max_by(|a, b| a.hi.cmp(&b.hi)) else {
            return Ok(0);
        };
        let mut made = 0;
        for table in TABLES {
            let ranges = Self::mysql_ranges(conn, table).await?;
            let Some(last) = ranges.last() else {
                continue;
            };
            let new = Month::tiling(&last.hi, &latest.hi);
            if new.is_empty() {
                continue;
            }
            let mut parts = Self::mysql_parts(table, &new)?;
            parts.push(format!(
                "PARTITION {table}_default VALUES LESS THAN (MAXVALUE)"
            ));
            Statement::build(format!(
                "ALTER TABLE {table} REORGANIZE PARTITION {table}_default INTO ({})",
                parts.join(", ")
            ))
            .execute(On::<DB>::Connection(&mut *conn))
            .await?;
            if table == "requests" {
                made = u32::try_from(new.len()).unwrap_or(u32::MAX);
            }
        }
        Ok(made)
    }

    /// The months asked for within the first partition's range (an import's, or this
    /// month's on a database partitioned since it began): made by splitting that
    /// partition, from the oldest of them to its end, only while it holds no row in any
    /// of the four tables (a fresh database, an import's first batch); otherwise they
    /// stay in it, as their rows do (splitting would copy them).
    async fn make_mysql_months_below(
        conn: &mut DB::Connection,
        months: &[Month],
    ) -> Result<u32, Error> {
        let first = Self::mysql_ranges(conn, "requests").await?.remove(0);
        let Some(oldest) = months
            .iter()
            .filter(|month| month.hi <= first.hi && month.suffix != first.suffix)
            .min_by(|a, b| a.lo.cmp(&b.lo))
        else {
            return Ok(0);
        };
        let new = Month::tiling(&oldest.lo, &first.hi);
        if new.last().is_none_or(|last| last.hi != first.hi) {
            return Ok(0);
        }
        for table in TABLES {
            let ranges = Self::mysql_ranges(conn, table).await?;
            let held = Statement::build(format!(
                "SELECT 1 AS one FROM {table} PARTITION ({table}_{}) LIMIT 1",
                first.suffix
            ))
            .fetch_optional(On::<DB>::Connection(&mut *conn))
            .await?;
            if ranges[0] != first || held.is_some() {
                return Ok(0);
            }
        }
        for table in TABLES {
            let mut parts = vec![format!(
                "PARTITION {table}_before VALUES LESS THAN ({})",
                bound_literal(&oldest.lo)?
            )];
            parts.extend(Self::mysql_parts(table, &new)?);
            Statement::build(format!(
                "ALTER TABLE {table} REORGANIZE PARTITION {table}_{} INTO ({})",
                first.suffix,
                parts.join(", ")
            ))
            .execute(On::<DB>::Connection(&mut *conn))
            .await?;
        }
        Ok(u32::try_from(new.len()).unwrap_or(u32::MAX))
    }

    /// `PARTITION <table>_<month> VALUES LESS THAN ('<its end>')` of each month.
    fn mysql_parts(table: &str, months: &[Month]) -> Result<Vec<String>, Error> {
        months
            .iter()
            .map(|month| {
                Ok(format!(
                    "PARTITION {table}_{} VALUES LESS THAN ({})",
                    month.suffix,
                    bound_literal(&month.hi)?
                ))
            })
            .collect()
    }

    /// On a connection of its own (retention's transaction keeps its lock): the oldest
    /// droppable month found, the request tables locked, the month checked again, its
    /// rows of the other tables deleted, its partitions dropped.
    pub(super) async fn drop_mysql_month(
        &self,
        before: DateTime<Utc>,
    ) -> Result<Option<Removed>, Error> {
        let mut conn = self.mysql_ddl_connection().await?;
        let months = Self::mysql_ranges(&mut conn, "requests").await?;
        let Some(month) = Self::droppable(&mut conn, months, before).await? else {
            return Ok(None);
        };
        // Counted before the locks; the check under them says that nothing of it changed
        // since. The job log's rows are InnoDB's estimate of the partition's: counting
        // them reads the month's job log whole (a second at 1.4 million rows under
        // load), and retention yields nine times as long as each step took.
        let removed = Removed {
            requests: Self::count_in(&mut conn, "requests", &month).await?,
            job_log_entries: Self::mysql_partition_rows(&mut conn, "job_log", &month).await?,
            job_runners: 0,
            months: 1,
        };
        let locks: Vec<String> = REQUEST_TABLES
            .iter()
            .map(|table| format!("{table} WRITE"))
            .collect();
        let asked = std::time::Instant::now();
        Statement::unprepared(format!("LOCK TABLES {}", locks.join(", ")))
            .execute(On::<DB>::Connection(&mut conn))
            .await?;
        let locked = std::time::Instant::now();
        // Locked, nothing of the month changes; it was checked before the locks so as
        // not to hold the writes up while reading it. A request of it retried meanwhile
        // keeps the month whole: the next round sees it as it is.
        let dropped = async {
            if Self::month_unfinished(&mut conn, &month, before).await? {
                return Err(month_changed(&month));
            }
            Self::delete_month_rows(&mut conn, &month).await?;
            for table in TABLES {
                // A drop cut off halfway left the others' partitions: the next round
                // drops what is left of the month.
                if Self::mysql_ranges(&mut conn, table)
                    .await?
                    .iter()
                    .any(|range| range.suffix == month.suffix)
                {
                    Statement::build(format!(
                        "ALTER TABLE {table} DROP PARTITION {table}_{}",
                        month.suffix
                    ))
                    .execute(On::<DB>::Connection(&mut conn))
                    .await?;
                }
            }
            Ok(Some(removed))
        }
        .await;
        let held = locked.elapsed();
        Statement::unprepared("UNLOCK TABLES".to_owned())
            .execute(On::<DB>::Connection(&mut conn))
            .await?;
        if let Ok(Some(removed)) = &dropped {
            log_drop(&month, removed, locked - asked, held);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_begin_where_the_one_before_ends() {
        let (december, january) = (Month::new(2026, 12), Month::new(2027, 1));
        let partitions = [
            ("requests_before".to_owned(), format!("'{}'", december.lo)),
            ("requests_m202612".to_owned(), format!("'{}'", december.hi)),
            ("requests_m202701".to_owned(), format!("'{}'", january.hi)),
            ("requests_default".to_owned(), "MAXVALUE".to_owned()),
        ];
        let months = Month::of_mysql_partitions("requests", &partitions).unwrap();
        assert_eq!(months.len(), 3);
        assert_eq!(
            (months[0].suffix.as_str(), months[0].lo.as_str()),
            ("before", "")
        );
        assert_eq!(months[0].hi, december.lo);
        assert_eq!(months[1], december);
        assert_eq!(months[2], january);
        assert_eq!(Month::beginning_at(&december.hi), january);
        assert_eq!(
            Month::tiling(&december.lo, &january.hi),
            [december.clone(), january.clone()]
        );
        assert_eq!(Month::tiling(&january.lo, &december.hi), []);
        assert_eq!(
            Month::of_mysql_partitions("job_log", &partitions[..1]),
            None,
            "another table's partitions"
        );
    }

    #[test]
    fn only_an_xid_is_written_into_a_bound() {
        let december = Month::new(2026, 12);
        assert_eq!(
            bound_literal(&december.lo).unwrap(),
            format!("'{}'", december.lo)
        );
        for bad in ["a'b", "x) , PARTITION p", "ABC", "w"] {
            assert!(bound_literal(bad).is_err(), "{bad}");
        }
    }
}

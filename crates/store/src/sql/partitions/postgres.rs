//! PostgreSQL's month partitions (migration 0105): declarative, a partition a month from
//! the month's first id to the next's, `_before` from MINVALUE (what was stored before
//! 0105), and a default partition for ids no range holds. A month is made in a
//! transaction by `spindle_month_partitions`, never for a month whose ids the default
//! partition holds already or that `_before` covers; it is dropped in retention's
//! transaction, under the four tables' locks.

use super::*;

/// Serializes the making of partitions among Request Managers sharing a schema.
const MAKING_LOCK: &str = "SELECT pg_advisory_xact_lock(1268791545, hashtext(current_schema()))";

/// How long dropping or making a month waits for its tables' locks before giving up
/// (to try again next round): never long enough to hold up the writes queued behind it.
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '1s'";

impl Month {
    /// The partition of `requests` named `name` with the bound PostgreSQL says it has
    /// (`FOR VALUES FROM ('…') TO ('…')`, `FROM (MINVALUE)` for `_before`): None for the
    /// default partition.
    fn of_postgres_partition(name: &str, bound: &str) -> Option<Month> {
        let suffix = name.strip_prefix("requests_")?;
        let (lo, hi) = bound
            .strip_prefix("FOR VALUES FROM (")?
            .strip_suffix(')')?
            .split_once(") TO (")?;
        Some(Month {
            suffix: suffix.to_owned(),
            lo: if lo == "MINVALUE" {
                String::new()
            } else {
                unquoted(lo)?
            },
            hi: unquoted(hi)?,
        })
    }
}

impl<DB: Backend> SqlStore<DB> {
    pub(super) async fn make_postgres_months(&self, months: Vec<Month>) -> Result<u32, Error> {
        let mut made = 0;
        for month in months {
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
            if Self::default_holds(&mut tx, &month).await? {
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

    /// In retention's transaction: the month's other rows deleted, the four tables
    /// locked (1 s at most), the month checked again, its partitions dropped.
    pub(super) async fn drop_postgres_month(
        tx: &mut sqlx::Transaction<'_, DB>,
        before: DateTime<Utc>,
    ) -> Result<Option<Removed>, Error> {
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
            months.extend(Month::of_postgres_partition(&name, &bound));
        }
        months.sort_by(|a, b| a.lo.cmp(&b.lo));
        let Some(month) = Self::droppable(tx, months, before).await? else {
            return Ok(None);
        };
        let removed = Removed {
            requests: Self::count_in(tx, "requests", &month).await?,
            job_log_entries: Self::count_in(tx, "job_log", &month).await?,
            job_runners: 0,
            months: 1,
        };
        Self::delete_month_rows(tx, &month).await?;
        Statement::new(LOCK_TIMEOUT).execute(&mut *tx).await?;
        let asked = std::time::Instant::now();
        Statement::new(
            "LOCK TABLE requests, request_archives, request_args, job_log IN ACCESS EXCLUSIVE MODE",
        )
        .execute(&mut *tx)
        .await?;
        let locked = std::time::Instant::now();
        // Locked, nothing of the month changes; it was checked before the lock so as not
        // to hold the writes up while reading it. A request of it that changed meanwhile
        // (retried) undoes the transaction, the other tables' rows with it: the next
        // round sees the month as it is.
        if Self::month_unfinished(tx, &month, before).await? {
            return Err(month_changed(&month));
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
        // Held until the commit that follows at once.
        log_drop(&month, &removed, locked - asked, locked.elapsed());
        Ok(Some(removed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_s_range_is_read_from_its_bound() {
        let december = Month::new(2026, 12);
        let bound = format!("FOR VALUES FROM ('{}') TO ('{}')", december.lo, december.hi);
        assert_eq!(
            Month::of_postgres_partition("requests_m202612", &bound),
            Some(december)
        );
        let before = Month::of_postgres_partition(
            "requests_before",
            "FOR VALUES FROM (MINVALUE) TO ('dcrep000000000000000')",
        )
        .unwrap();
        assert_eq!((before.suffix.as_str(), before.lo.as_str()), ("before", ""));
        assert_eq!(
            before.end(),
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(
            Month::of_postgres_partition("requests_default", "DEFAULT"),
            None
        );
    }
}

-- MySQL's request tables are partitioned by month from this migration on (PostgreSQL's
-- since 0105); SQLite has no partitions, and nothing changes here.
SELECT 1;

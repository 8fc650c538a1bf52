-- MySQL's request tables are partitioned by month from this migration on; PostgreSQL's
-- are since 0105, and nothing changes here.
SELECT 1;

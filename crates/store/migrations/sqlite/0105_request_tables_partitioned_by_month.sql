-- PostgreSQL's request tables are partitioned by month from this migration on; SQLite
-- has no partitions, its retention removes rows one by one, and nothing changes here.
SELECT 1;

-- PostgreSQL's request tables are partitioned by month from this migration on. InnoDB
-- keeps no foreign key on a partitioned table, and these tables' keys guard every
-- write: MySQL's retention removes rows one by one, and nothing changes here.
DO 0;

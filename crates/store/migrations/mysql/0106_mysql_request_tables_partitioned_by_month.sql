-- The four tables a request's history fills are partitioned by month of request id, as
-- PostgreSQL's are since 0105 (see its comments): `PARTITION BY RANGE COLUMNS
-- (request_id)`, an xid's first four bytes being its creation second, so that retention
-- drops a month wholly past it rather than deleting its rows one by one
-- (store/src/sql/partitions/mysql.rs). MySQL's ranges are contiguous: each table begins
-- with `<table>_before`, every id before next month's first (what is stored now, and
-- the rest of this month), and ends with `<table>_default` to MAXVALUE; the store makes
-- the months between by splitting `_default` (at connect and every background round).
--
-- InnoDB keeps no foreign key on a partitioned table, nor one that refers to a
-- partitioned table: the three that point at `requests` go (the store writes a
-- request's archive and args in the transaction that creates it, and a suspended chain
-- in one that has read the request's row locked; retention removes them all by id).
-- Partitioning an existing table copies it (writes to it wait meanwhile, reads go
-- on): an upgrade takes as long as MySQL takes to copy the history (BENCHMARKS.md,
-- session 38).
--
-- MySQL runs DDL outside transactions: every step is taken only where it is not yet
-- done, so a migration cut off halfway runs again (see 0001).

SET @spindle_step := (
    SELECT IF(COUNT(*) = 0, 'DO 0', 'ALTER TABLE request_archives DROP FOREIGN KEY request_archives_request')
    FROM information_schema.TABLE_CONSTRAINTS
    WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'request_archives'
      AND CONSTRAINT_NAME = 'request_archives_request' AND CONSTRAINT_TYPE = 'FOREIGN KEY'
);
PREPARE spindle_step FROM @spindle_step;
EXECUTE spindle_step;
DEALLOCATE PREPARE spindle_step;

SET @spindle_step := (
    SELECT IF(COUNT(*) = 0, 'DO 0', 'ALTER TABLE request_args DROP FOREIGN KEY request_args_request')
    FROM information_schema.TABLE_CONSTRAINTS
    WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'request_args'
      AND CONSTRAINT_NAME = 'request_args_request' AND CONSTRAINT_TYPE = 'FOREIGN KEY'
);
PREPARE spindle_step FROM @spindle_step;
EXECUTE spindle_step;
DEALLOCATE PREPARE spindle_step;

SET @spindle_step := (
    SELECT IF(COUNT(*) = 0, 'DO 0', 'ALTER TABLE suspended_job_chains DROP FOREIGN KEY suspended_job_chains_request')
    FROM information_schema.TABLE_CONSTRAINTS
    WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'suspended_job_chains'
      AND CONSTRAINT_NAME = 'suspended_job_chains_request' AND CONSTRAINT_TYPE = 'FOREIGN KEY'
);
PREPARE spindle_step FROM @spindle_step;
EXECUTE spindle_step;
DEALLOCATE PREPARE spindle_step;

-- The smallest xid of next month's first second (UTC): its 32 bits of seconds and three
-- zero bits in seven base32hex digits, then thirteen zeros (as partitions' xid_floor).
SET @spindle_next_month := CONCAT(
    LOWER(LPAD(CONV(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00',
        DATE_ADD(LAST_DAY(UTC_DATE()), INTERVAL 1 DAY)) * 8, 10, 32), 7, '0')),
    REPEAT('0', 13));

SET @spindle_step := (
    SELECT IF(COUNT(*) = 0,
              CONCAT('ALTER TABLE requests PARTITION BY RANGE COLUMNS (request_id) (',
                     'PARTITION requests_before VALUES LESS THAN (''', @spindle_next_month, '''), ',
                     'PARTITION requests_default VALUES LESS THAN (MAXVALUE))'),
              'DO 0')
    FROM information_schema.PARTITIONS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'requests' AND PARTITION_NAME IS NOT NULL
);
PREPARE spindle_step FROM @spindle_step;
EXECUTE spindle_step;
DEALLOCATE PREPARE spindle_step;

SET @spindle_step := (
    SELECT IF(COUNT(*) = 0,
              CONCAT('ALTER TABLE request_archives PARTITION BY RANGE COLUMNS (request_id) (',
                     'PARTITION request_archives_before VALUES LESS THAN (''', @spindle_next_month, '''), ',
                     'PARTITION request_archives_default VALUES LESS THAN (MAXVALUE))'),
              'DO 0')
    FROM information_schema.PARTITIONS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'request_archives' AND PARTITION_NAME IS NOT NULL
);
PREPARE spindle_step FROM @spindle_step;
EXECUTE spindle_step;
DEALLOCATE PREPARE spindle_step;

SET @spindle_step := (
    SELECT IF(COUNT(*) = 0,
              CONCAT('ALTER TABLE request_args PARTITION BY RANGE COLUMNS (request_id) (',
                     'PARTITION request_args_before VALUES LESS THAN (''', @spindle_next_month, '''), ',
                     'PARTITION request_args_default VALUES LESS THAN (MAXVALUE))'),
              'DO 0')
    FROM information_schema.PARTITIONS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'request_args' AND PARTITION_NAME IS NOT NULL
);
PREPARE spindle_step FROM @spindle_step;
EXECUTE spindle_step;
DEALLOCATE PREPARE spindle_step;

SET @spindle_step := (
    SELECT IF(COUNT(*) = 0,
              CONCAT('ALTER TABLE job_log PARTITION BY RANGE COLUMNS (request_id) (',
                     'PARTITION job_log_before VALUES LESS THAN (''', @spindle_next_month, '''), ',
                     'PARTITION job_log_default VALUES LESS THAN (MAXVALUE))'),
              'DO 0')
    FROM information_schema.PARTITIONS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'job_log' AND PARTITION_NAME IS NOT NULL
);
PREPARE spindle_step FROM @spindle_step;
EXECUTE spindle_step;
DEALLOCATE PREPARE spindle_step;

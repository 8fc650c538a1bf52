-- Live job output (a Spindle extension): chunks of a try's stdout (stream 0) or stderr
-- (stream 1) as the Job Runner sent them while the try ran. seq numbers a request's chunks
-- in the order they were stored (the cursor of GET .../output?after=); the key makes a
-- re-sent chunk a no-op. Past the per-try cap, chunks between the head and the tail are
-- deleted (byte_offset and byte_len show the gap).
CREATE TABLE job_output (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id  TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    try         INTEGER NOT NULL,
    stream      SMALLINT NOT NULL,
    byte_offset BIGINT NOT NULL,
    byte_len    BIGINT NOT NULL,
    data        TEXT NOT NULL
);
CREATE UNIQUE INDEX job_output_by_try ON job_output (request_id, job_id, try, stream, byte_offset);
CREATE INDEX job_output_by_request ON job_output (request_id, seq);

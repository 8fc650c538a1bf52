-- Locks held by jobs (issue #34): a job or sequence node's `locks:` and the job pools of
-- the specs' `pools:` are claims of one job of a request (`job_id`: the job that takes
-- them), queued and counted as a request's own claims are (`job_id` empty).
ALTER TABLE request_locks ADD COLUMN job_id TEXT NOT NULL DEFAULT '';
ALTER TABLE request_locks DROP CONSTRAINT request_locks_pkey;
ALTER TABLE request_locks ADD PRIMARY KEY (request_id, job_id, name, lock_key);

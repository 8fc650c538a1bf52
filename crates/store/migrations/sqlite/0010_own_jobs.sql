-- A request's own jobs (not the grapher's begin and end wrappers), counted when it is
-- created: what people are shown. 0 for a request stored before (not known).
ALTER TABLE requests ADD COLUMN own_jobs INTEGER NOT NULL DEFAULT 0;

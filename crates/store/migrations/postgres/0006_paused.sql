-- Spindle's pause (issue #16): a paused request starts no new job until it is resumed.
-- A flag beside the state, so that Spin Cycle's states keep their meaning; kept across
-- hand-overs, restarts and recoveries.
ALTER TABLE requests ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;

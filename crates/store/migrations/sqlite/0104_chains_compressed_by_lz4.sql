-- PostgreSQL's chains are compressed by lz4 from this migration on; SQLite stores a
-- value as it is, and nothing changes here.
SELECT 1;

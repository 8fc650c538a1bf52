-- PostgreSQL's chains are compressed by lz4 from this migration on; InnoDB does not
-- compress a row's columns unless its table is made so, and nothing changes here.
DO 0;

-- A B-tree entry holds at most about 2.7 KB, and arg values (lists of hosts) are often
-- longer: index the MD5 of the value instead; the search compares the hash, then the value.
DROP INDEX request_args_by_value;
CREATE INDEX request_args_by_value_hash ON request_args (name, md5(value));

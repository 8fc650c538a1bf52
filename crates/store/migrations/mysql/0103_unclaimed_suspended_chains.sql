-- PostgreSQL and SQLite get a partial index of the unclaimed suspended chains in the
-- claim's order (issue #51). MariaDB and MySQL have no partial index: the claim's
-- `rm_host IS NULL` is a range of suspended_by_claim (rm_host, suspended_at,
-- request_id), already in the claim's order. Nothing to change; the number is kept so
-- that one number is one change on every backend.
DO 0;

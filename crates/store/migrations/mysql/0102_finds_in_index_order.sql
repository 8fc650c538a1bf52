-- A page of find is ordered by (created_at DESC, request_id): the indexes by type, by
-- user and by state name the id as the other backends' do (InnoDB appends the primary
-- key to a secondary index anyway, ascending), so that the first page of a filter is
-- read in index order on every backend (issue #51). Run again (a migration cut off
-- halfway), it builds the same indexes again.
ALTER TABLE requests
    DROP INDEX requests_by_type,
    ADD INDEX requests_by_type (type, created_at DESC, request_id),
    DROP INDEX requests_by_user,
    ADD INDEX requests_by_user (user_name, created_at DESC, request_id),
    DROP INDEX requests_by_state,
    ADD INDEX requests_by_state (state, created_at DESC, request_id);

-- A page of find is ordered by (created_at DESC, request_id): with the id in the index
-- by type, by user and by state, the first page of a filter is read in index order and
-- stops after it, instead of sorting every request of that type, user or state (a third
-- of a history of millions is one type; issue #51).
DROP INDEX requests_by_type;
CREATE INDEX requests_by_type ON requests (type, created_at DESC, request_id);
DROP INDEX requests_by_user;
CREATE INDEX requests_by_user ON requests (user_name, created_at DESC, request_id);
DROP INDEX requests_by_state;
CREATE INDEX requests_by_state ON requests (state, created_at DESC, request_id);

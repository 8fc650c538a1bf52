-- A request's started tries are of no use once it has finished (COMPLETE 3, FAIL 4,
-- STOPPED 6): forgotten by the UPDATE that ends it, so that a finish is one statement.
CREATE TRIGGER requests_end_forgets_tries AFTER UPDATE OF state ON requests
WHEN NEW.state IN (3, 4, 6) AND OLD.state <> NEW.state
BEGIN
    DELETE FROM job_tries WHERE request_id = NEW.request_id;
END;

-- Spec history (issue #16): every set of spec files a Request Manager loaded, stored once
-- by its version (a hash of the files), and the version each request was built from.
CREATE TABLE spec_versions (
    version    TEXT PRIMARY KEY,
    files      TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
ALTER TABLE requests ADD COLUMN spec_version TEXT;

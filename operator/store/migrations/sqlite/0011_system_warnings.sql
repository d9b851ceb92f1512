-- Operational warnings raised by any process (a runner pod that could not
-- fetch a runbook, say) and shown by every API replica's /health until they
-- are cleared or expire. `id` is the warning's identity (e.g.
-- `runbook:<url>`): raising it again refreshes it instead of adding a row.
CREATE TABLE system_warnings (
    id         TEXT PRIMARY KEY,
    category   TEXT NOT NULL,
    message    TEXT NOT NULL,
    details    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX system_warnings_expires_idx ON system_warnings (expires_at);

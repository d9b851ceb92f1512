-- The judge's scores of finished sessions: every attempt is kept (a
-- re-score adds one), the latest completed one is the session's score.
-- At most one attempt of a session runs at a time.
CREATE TABLE session_scores (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    status       TEXT NOT NULL,
    execution_id TEXT,
    score        INTEGER,
    outcome      TEXT,
    failure_tags TEXT,
    assessment   TEXT,
    tool_report  TEXT,
    error        TEXT,
    created_at   TEXT NOT NULL,
    completed_at TEXT,
    UNIQUE (session_id, attempt)
);
CREATE UNIQUE INDEX session_scores_one_running ON session_scores (session_id)
    WHERE status = 'in_progress';

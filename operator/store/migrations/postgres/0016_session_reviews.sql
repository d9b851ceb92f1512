-- A person's review of each finished session: where it stands, who has it,
-- the rating and notes; every step kept in review_events (the audit log).
ALTER TABLE alert_sessions ADD COLUMN review_status TEXT;
ALTER TABLE alert_sessions ADD COLUMN review_assignee TEXT;
ALTER TABLE alert_sessions ADD COLUMN review_rating TEXT;
ALTER TABLE alert_sessions ADD COLUMN review_action_taken TEXT;
ALTER TABLE alert_sessions ADD COLUMN review_feedback TEXT;
ALTER TABLE alert_sessions ADD COLUMN reviewed_at TIMESTAMPTZ;
-- Sessions that finished before reviews existed enter the queue (cancelled
-- ones need no review).
UPDATE alert_sessions SET review_status = 'needs_review'
    WHERE status IN ('completed', 'failed', 'timed_out');
UPDATE alert_sessions SET review_status = 'reviewed'
    WHERE status = 'cancelled';
CREATE INDEX alert_sessions_review ON alert_sessions (review_status, completed_at);
CREATE TABLE review_events (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    from_status  TEXT,
    to_status    TEXT NOT NULL,
    assignee     TEXT,
    rating       TEXT,
    action_taken TEXT,
    feedback     TEXT,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX review_events_session ON review_events (session_id, created_at);

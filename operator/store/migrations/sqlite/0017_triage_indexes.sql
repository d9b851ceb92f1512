-- The triage page and the session list at scale (the store's bench_triage
-- example, 100,000 sessions): each list is a page in the default order plus
-- a COUNT of its matches. SQLite's DESC already puts NULLs last, so the
-- index of 0001 serves the default order.
-- Counts of the triage groups (investigating statuses, review statuses) of
-- listed sessions from the index alone; pages of one status in order.
CREATE INDEX alert_sessions_status_live_idx
    ON alert_sessions (status, deleted_at, created_at DESC, id DESC);
CREATE INDEX alert_sessions_review_live_idx
    ON alert_sessions (review_status, deleted_at, created_at DESC, id DESC);
-- The score range filters.
CREATE INDEX alert_sessions_score_idx ON alert_sessions (score, deleted_at);
-- The failure tag filter reads each session's tags (json_each): from this
-- index rather than from the whole table.
CREATE INDEX alert_sessions_failure_tags_idx ON alert_sessions (score_failure_tags, deleted_at);

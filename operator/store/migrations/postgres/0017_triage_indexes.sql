-- The triage page and the session list at scale (the store's bench_triage
-- example, 100,000 sessions): each list is a page in the default order plus
-- a COUNT of its matches.
-- The default order (newest first) as the list writes it, NULLS LAST: the
-- index of 0001 (created_at DESC, i.e. NULLS FIRST) cannot serve it, so
-- every page sorted all its matches.
CREATE INDEX alert_sessions_newest_idx ON alert_sessions (created_at DESC NULLS LAST, id DESC);
-- Counts of the triage groups (investigating statuses, review statuses) of
-- listed sessions from the index alone; pages of a rare status in order.
CREATE INDEX alert_sessions_status_live_idx
    ON alert_sessions (status, deleted_at, created_at DESC NULLS LAST, id DESC);
CREATE INDEX alert_sessions_review_live_idx
    ON alert_sessions (review_status, deleted_at, created_at DESC NULLS LAST, id DESC);
-- The score range and failure tag filters (`score_failure_tags ? tag`).
CREATE INDEX alert_sessions_score_idx ON alert_sessions (score, deleted_at);
CREATE INDEX alert_sessions_failure_tags_idx ON alert_sessions USING GIN (score_failure_tags);

-- The process running a scoring attempt (local mode: its pod id), so that
-- the process closes what it left running when it starts again.
ALTER TABLE session_scores ADD COLUMN owner TEXT;
-- The session's score as lists show and filter it, kept with the attempts:
-- the latest attempt's status, the latest completed attempt's score and tags.
ALTER TABLE alert_sessions ADD COLUMN score_status TEXT;
ALTER TABLE alert_sessions ADD COLUMN score INTEGER;
ALTER TABLE alert_sessions ADD COLUMN score_failure_tags TEXT;

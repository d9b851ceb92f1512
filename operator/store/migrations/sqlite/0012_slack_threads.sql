-- The Slack thread of each notification key (an Alertmanager fingerprint, or
-- a session id) per channel: the first message opens it, later ones reply in
-- it. The first writer wins a race (primary key).
CREATE TABLE slack_threads (
    thread_key TEXT NOT NULL,
    channel TEXT NOT NULL,
    ts TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (thread_key, channel)
);

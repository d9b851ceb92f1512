-- Investigation memories: short lessons a reflector writes after a session
-- is scored, recalled into the prompts of later investigations of the same
-- scope (a namespace[/project] in cluster mode, a project in local mode).
-- The Postgres migration of the same number defines the same logical schema.
--
-- Full text lives in tables of its own (`*_fts`, the backend's machinery:
-- here FTS5, there a tsvector per record), kept by triggers that fire only
-- when the text is written. FTS5 with the unicode61 tokenizer (no stemming,
-- diacritics kept, as Postgres keeps them) splits on every character that
-- is not a letter or a digit and lowercases, as the Postgres side does.
-- The FTS tables are contentless (the text is read from the record) and
-- keyed by an INTEGER PRIMARY KEY of their own (`*_fts_keys`): VACUUM may
-- renumber the implicit rowids of a table without one.
CREATE TABLE memories (
    id                 TEXT PRIMARY KEY,
    scope              TEXT NOT NULL,
    content            TEXT NOT NULL,
    category           TEXT NOT NULL,
    valence            TEXT NOT NULL,
    confidence         DOUBLE PRECISION NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    seen_count         INTEGER NOT NULL DEFAULT 1,
    alert_type         TEXT,
    chain_id           TEXT,
    -- No foreign key: retention deletes sessions, a memory outlives them.
    source_session_id  TEXT,
    deprecated         BOOLEAN NOT NULL DEFAULT FALSE,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL,
    last_reinforced_at TEXT NOT NULL,
    -- Little-endian f32s; last, so that reading the other columns never
    -- reads the overflow pages of a long one.
    embedding          BLOB
);
-- Recall's candidates (most recently reinforced first) and the list.
CREATE INDEX memories_recent_idx ON memories (scope, deprecated, last_reinforced_at DESC, id);
-- Recall's candidates by meaning: the most recently reinforced live
-- memories with an embedding.
CREATE INDEX memories_embedded_idx ON memories (scope, last_reinforced_at DESC, id)
    WHERE deprecated = FALSE AND embedding IS NOT NULL;
-- What a session taught (its review's effects).
CREATE INDEX memories_source_idx ON memories (source_session_id);

-- The words of each memory's content. A memory's key orders memories as
-- recall wants them, most recently reinforced first: the milliseconds from
-- its `last_reinforced_at` to 2200-01-01 times 2^20, plus the first free
-- slot of that millisecond (in the order written); a reinforcement moves
-- it. Full text then reads the most recently reinforced matches first (in
-- the order of its keys, the order it reads fastest) and stops at the
-- candidates it needs, however common the words.
CREATE TABLE memories_fts_keys (
    key       INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts_keys (key, memory_id) VALUES (
        coalesce((SELECT max(key) + 1 FROM memories_fts_keys
                  WHERE key >= (7258118400000 - CAST(unixepoch(new.last_reinforced_at, 'subsec') * 1000 AS INTEGER)) * 1048576
                    AND key < (7258118400000 - CAST(unixepoch(new.last_reinforced_at, 'subsec') * 1000 AS INTEGER)) * 1048576 + 1048576),
                 (7258118400000 - CAST(unixepoch(new.last_reinforced_at, 'subsec') * 1000 AS INTEGER)) * 1048576),
        new.id);
    INSERT INTO memories_fts (rowid, content)
        SELECT key, new.content FROM memories_fts_keys WHERE memory_id = new.id;
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, last_reinforced_at ON memories BEGIN
    DELETE FROM memories_fts
        WHERE rowid = (SELECT key FROM memories_fts_keys WHERE memory_id = old.id);
    UPDATE memories_fts_keys SET key =
        coalesce((SELECT max(key) + 1 FROM memories_fts_keys
                  WHERE key >= (7258118400000 - CAST(unixepoch(new.last_reinforced_at, 'subsec') * 1000 AS INTEGER)) * 1048576
                    AND key < (7258118400000 - CAST(unixepoch(new.last_reinforced_at, 'subsec') * 1000 AS INTEGER)) * 1048576 + 1048576),
                 (7258118400000 - CAST(unixepoch(new.last_reinforced_at, 'subsec') * 1000 AS INTEGER)) * 1048576)
        WHERE memory_id = new.id AND new.last_reinforced_at IS NOT old.last_reinforced_at;
    INSERT INTO memories_fts (rowid, content)
        SELECT key, new.content FROM memories_fts_keys WHERE memory_id = new.id;
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts
        WHERE rowid = (SELECT key FROM memories_fts_keys WHERE memory_id = old.id);
    DELETE FROM memories_fts_keys WHERE memory_id = old.id;
END;

-- Which memories were put into which session's prompt, in order.
CREATE TABLE memory_injections (
    session_id  TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    memory_id   TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    injected_at TEXT NOT NULL,
    PRIMARY KEY (session_id, memory_id)
);
CREATE INDEX memory_injections_memory_idx ON memory_injections (memory_id);

-- Recall of memories learned from sessions rated accurate looks up each
-- session's rating: from this index alone (recall names it: without
-- statistics the planner would read each session's row, whose rating comes
-- after its large texts).
CREATE INDEX alert_sessions_rating_idx ON alert_sessions (id, review_rating);

-- The memory scope of a session; the search over past sessions reads a
-- scope's sessions newest first.
ALTER TABLE alert_sessions ADD COLUMN memory_scope TEXT;
CREATE INDEX alert_sessions_memory_scope_idx ON alert_sessions (memory_scope, created_at DESC, id)
    WHERE memory_scope IS NOT NULL;

-- The words of each session: its alert and final analysis (their first
-- 100,000 characters, as on Postgres), written when the session is created
-- and again when it ends (the final analysis).
CREATE TABLE session_fts_keys (
    key        INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE session_fts USING fts5 (
    body, content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER session_fts_insert AFTER INSERT ON alert_sessions BEGIN
    INSERT INTO session_fts_keys (session_id) VALUES (new.id);
    INSERT INTO session_fts (rowid, body)
        SELECT key, substr(new.alert_type || ' ' || new.alert_data || ' ' ||
                           coalesce(new.final_analysis, ''), 1, 100000)
        FROM session_fts_keys WHERE session_id = new.id;
END;
CREATE TRIGGER session_fts_update
    AFTER UPDATE OF alert_type, alert_data, final_analysis ON alert_sessions BEGIN
    DELETE FROM session_fts
        WHERE rowid = (SELECT key FROM session_fts_keys WHERE session_id = old.id);
    INSERT INTO session_fts (rowid, body)
        SELECT key, substr(new.alert_type || ' ' || new.alert_data || ' ' ||
                           coalesce(new.final_analysis, ''), 1, 100000)
        FROM session_fts_keys WHERE session_id = new.id;
END;
CREATE TRIGGER session_fts_delete AFTER DELETE ON alert_sessions BEGIN
    DELETE FROM session_fts
        WHERE rowid = (SELECT key FROM session_fts_keys WHERE session_id = old.id);
    DELETE FROM session_fts_keys WHERE session_id = old.id;
END;
-- Sessions stored before this migration.
INSERT INTO session_fts_keys (session_id) SELECT id FROM alert_sessions ORDER BY created_at, id;
INSERT INTO session_fts (rowid, body)
    SELECT k.key, substr(s.alert_type || ' ' || s.alert_data || ' ' ||
                         coalesce(s.final_analysis, ''), 1, 100000)
    FROM session_fts_keys k JOIN alert_sessions s ON s.id = k.session_id;

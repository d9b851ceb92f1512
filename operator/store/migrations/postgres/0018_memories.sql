-- Investigation memories: short lessons a reflector writes after a session
-- is scored, recalled into the prompts of later investigations of the same
-- scope (a namespace[/project] in cluster mode, a project in local mode).
-- The SQLite migration of the same number defines the same logical schema.
--
-- Full text lives in tables of its own (`*_fts`, the backend's machinery:
-- here a tsvector per record, there FTS5), kept by triggers that fire only
-- when the text is written, so the frequent other updates of a record
-- (a running session's progress, a memory's reinforcement) leave them
-- alone. Both split on every character that is not a letter or a digit and
-- lowercase, without stemming or stop words: here the text is rewritten to
-- words separated by spaces before the 'simple' configuration reads it
-- (whose parser would otherwise keep host names, paths, versions and
-- hyphenated words whole), so that a word matches the same records as with
-- SQLite's unicode61 tokenizer.
CREATE TABLE memories (
    id                 TEXT PRIMARY KEY,
    scope              TEXT NOT NULL,
    content            TEXT NOT NULL,
    category           TEXT NOT NULL,
    valence            TEXT NOT NULL,
    confidence         DOUBLE PRECISION NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    seen_count         BIGINT NOT NULL DEFAULT 1,
    alert_type         TEXT,
    chain_id           TEXT,
    -- No foreign key: retention deletes sessions, a memory outlives them.
    source_session_id  TEXT,
    deprecated         BOOLEAN NOT NULL DEFAULT FALSE,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL,
    last_reinforced_at TIMESTAMPTZ NOT NULL,
    -- Little-endian f32s.
    embedding          BYTEA
);
-- An embedding long enough to leave the row (about 2 KB: 512 dimensions and
-- more) is stored out of line uncompressed: floats do not compress.
ALTER TABLE memories ALTER COLUMN embedding SET STORAGE EXTERNAL;
-- Recall's candidates (most recently reinforced first) and the list.
CREATE INDEX memories_recent_idx ON memories (scope, deprecated, last_reinforced_at DESC, id);
-- Recall's candidates by meaning: the most recently reinforced live
-- memories with an embedding.
CREATE INDEX memories_embedded_idx ON memories (scope, last_reinforced_at DESC, id)
    WHERE deprecated = FALSE AND embedding IS NOT NULL;
-- What a session taught (its review's effects).
CREATE INDEX memories_source_idx ON memories (source_session_id);

-- The words of each memory's content.
CREATE TABLE memories_fts (
    memory_id TEXT PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    words     tsvector NOT NULL
);
CREATE INDEX memories_fts_words_idx ON memories_fts USING GIN (words);
CREATE FUNCTION memories_fts_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memories_fts (memory_id, words)
    VALUES (NEW.id, to_tsvector('simple', regexp_replace(NEW.content, '[^[:alnum:]]+', ' ', 'g')))
    ON CONFLICT (memory_id) DO UPDATE SET words = excluded.words;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_fts_write AFTER INSERT OR UPDATE OF content ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_fts_words();

-- Which memories were put into which session's prompt, in order.
CREATE TABLE memory_injections (
    session_id  TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    memory_id   TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    position    BIGINT NOT NULL,
    injected_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session_id, memory_id)
);
CREATE INDEX memory_injections_memory_idx ON memory_injections (memory_id);

-- Recall of memories learned from sessions rated accurate looks up each
-- session's rating: from this index alone.
CREATE INDEX alert_sessions_rating_idx ON alert_sessions (id, review_rating);

-- The memory scope of a session; the search over past sessions reads a
-- scope's sessions newest first.
ALTER TABLE alert_sessions ADD COLUMN memory_scope TEXT;
CREATE INDEX alert_sessions_memory_scope_idx ON alert_sessions (memory_scope, created_at DESC, id)
    WHERE memory_scope IS NOT NULL;

-- The words of each session: its alert and final analysis (their first
-- 100,000 characters: a tsvector holds at most 1 MB), written when the
-- session is created and again when it ends (the final analysis).
CREATE TABLE session_fts (
    session_id TEXT PRIMARY KEY REFERENCES alert_sessions (id) ON DELETE CASCADE,
    words      tsvector NOT NULL
);
CREATE INDEX session_fts_words_idx ON session_fts USING GIN (words);
CREATE FUNCTION session_fts_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO session_fts (session_id, words)
    VALUES (NEW.id, to_tsvector('simple', regexp_replace(
        substr(NEW.alert_type || ' ' || NEW.alert_data || ' ' || coalesce(NEW.final_analysis, ''),
               1, 100000),
        '[^[:alnum:]]+', ' ', 'g')))
    ON CONFLICT (session_id) DO UPDATE SET words = excluded.words;
    RETURN NULL;
END
$$;
CREATE TRIGGER session_fts_write
    AFTER INSERT OR UPDATE OF alert_type, alert_data, final_analysis ON alert_sessions
    FOR EACH ROW EXECUTE FUNCTION session_fts_words();
-- Sessions stored before this migration.
INSERT INTO session_fts (session_id, words)
    SELECT id, to_tsvector('simple', regexp_replace(
        substr(alert_type || ' ' || alert_data || ' ' || coalesce(final_analysis, ''), 1, 100000),
        '[^[:alnum:]]+', ' ', 'g'))
    FROM alert_sessions;

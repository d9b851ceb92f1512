-- What investigations cost: the same logical schema as the Postgres
-- migration of this number (estimates per interaction, usage per session
-- and model kept by a trigger on each stored interaction).
ALTER TABLE llm_interactions ADD COLUMN cached_input_tokens INTEGER;
ALTER TABLE llm_interactions ADD COLUMN cost_usd REAL;

CREATE TABLE session_usage (
    session_id          TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    calls               INTEGER NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    thinking_tokens     INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    total_tokens        INTEGER NOT NULL,
    cost_usd            REAL NOT NULL,
    unpriced_calls      INTEGER NOT NULL,
    PRIMARY KEY (session_id, provider, model)
);
CREATE TABLE usage_totals (
    provider     TEXT NOT NULL,
    model        TEXT NOT NULL,
    chain_id     TEXT NOT NULL,
    calls        INTEGER NOT NULL,
    total_tokens INTEGER NOT NULL,
    cost_usd     REAL NOT NULL,
    PRIMARY KEY (provider, model, chain_id)
);

CREATE TRIGGER llm_interactions_usage AFTER INSERT ON llm_interactions
BEGIN
    INSERT INTO session_usage (session_id, provider, model, calls, input_tokens, output_tokens,
                               thinking_tokens, cached_input_tokens, total_tokens, cost_usd,
                               unpriced_calls)
    VALUES (NEW.session_id, NEW.provider, NEW.model, 1, coalesce(NEW.input_tokens, 0),
            coalesce(NEW.output_tokens, 0), coalesce(NEW.thinking_tokens, 0),
            coalesce(NEW.cached_input_tokens, 0), coalesce(NEW.total_tokens, 0),
            coalesce(NEW.cost_usd, 0),
            CASE WHEN NEW.cost_usd IS NULL AND coalesce(NEW.total_tokens, 0) > 0 THEN 1 ELSE 0 END)
    ON CONFLICT (session_id, provider, model) DO UPDATE SET
        calls = calls + 1,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        thinking_tokens = thinking_tokens + excluded.thinking_tokens,
        cached_input_tokens = cached_input_tokens + excluded.cached_input_tokens,
        total_tokens = total_tokens + excluded.total_tokens,
        cost_usd = cost_usd + excluded.cost_usd,
        unpriced_calls = unpriced_calls + excluded.unpriced_calls;
    INSERT INTO usage_totals (provider, model, chain_id, calls, total_tokens, cost_usd)
    SELECT NEW.provider, NEW.model, s.chain_id, 1, coalesce(NEW.total_tokens, 0),
           coalesce(NEW.cost_usd, 0)
    FROM alert_sessions s WHERE s.id = NEW.session_id
    ON CONFLICT (provider, model, chain_id) DO UPDATE SET
        calls = calls + 1,
        total_tokens = total_tokens + excluded.total_tokens,
        cost_usd = cost_usd + excluded.cost_usd;
END;

INSERT INTO session_usage
SELECT session_id, provider, model, count(*), coalesce(sum(input_tokens), 0),
       coalesce(sum(output_tokens), 0), coalesce(sum(thinking_tokens), 0), 0,
       coalesce(sum(total_tokens), 0), 0,
       sum(CASE WHEN coalesce(total_tokens, 0) > 0 THEN 1 ELSE 0 END)
FROM llm_interactions WHERE true GROUP BY session_id, provider, model;
INSERT INTO usage_totals
SELECT i.provider, i.model, s.chain_id, count(*), coalesce(sum(i.total_tokens), 0), 0
FROM llm_interactions i JOIN alert_sessions s ON s.id = i.session_id
WHERE true GROUP BY i.provider, i.model, s.chain_id;

ALTER TABLE alert_sessions ADD COLUMN end_reason TEXT;
ALTER TABLE alert_sessions ADD COLUMN hold_reason TEXT;
CREATE INDEX alert_sessions_scope_created_idx ON alert_sessions (memory_scope, created_at);

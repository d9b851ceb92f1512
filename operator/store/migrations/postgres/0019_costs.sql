-- What investigations cost. Each LLM interaction keeps the estimate made
-- when it was recorded (a later price change does not rewrite history) and
-- the prompt tokens the provider read from its cache. NULL cost: no
-- estimate (estimates off, or a model without a price).
ALTER TABLE llm_interactions ADD COLUMN cached_input_tokens BIGINT;
ALTER TABLE llm_interactions ADD COLUMN cost_usd DOUBLE PRECISION;

-- Usage per session and model, kept by the insert of each interaction (a
-- retried insert that stores nothing adds nothing): the session lists, the
-- usage page and the budgets read these few rows instead of every call.
-- `unpriced_calls` counts calls that used tokens but have no estimate: the
-- session's cost is then partial.
CREATE TABLE session_usage (
    session_id          TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    calls               BIGINT NOT NULL,
    input_tokens        BIGINT NOT NULL,
    output_tokens       BIGINT NOT NULL,
    thinking_tokens     BIGINT NOT NULL,
    cached_input_tokens BIGINT NOT NULL,
    total_tokens        BIGINT NOT NULL,
    cost_usd            DOUBLE PRECISION NOT NULL,
    unpriced_calls      BIGINT NOT NULL,
    PRIMARY KEY (session_id, provider, model)
);
-- What every model cost each chain since the first call, never lowered by
-- retention (the metric `tarsy_llm_cost_usd_total` reads it).
CREATE TABLE usage_totals (
    provider     TEXT NOT NULL,
    model        TEXT NOT NULL,
    chain_id     TEXT NOT NULL,
    calls        BIGINT NOT NULL,
    total_tokens BIGINT NOT NULL,
    cost_usd     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (provider, model, chain_id)
);

CREATE FUNCTION session_usage_add() RETURNS trigger LANGUAGE plpgsql AS $$
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
        calls = session_usage.calls + 1,
        input_tokens = session_usage.input_tokens + excluded.input_tokens,
        output_tokens = session_usage.output_tokens + excluded.output_tokens,
        thinking_tokens = session_usage.thinking_tokens + excluded.thinking_tokens,
        cached_input_tokens = session_usage.cached_input_tokens + excluded.cached_input_tokens,
        total_tokens = session_usage.total_tokens + excluded.total_tokens,
        cost_usd = session_usage.cost_usd + excluded.cost_usd,
        unpriced_calls = session_usage.unpriced_calls + excluded.unpriced_calls;
    INSERT INTO usage_totals (provider, model, chain_id, calls, total_tokens, cost_usd)
    SELECT NEW.provider, NEW.model, s.chain_id, 1, coalesce(NEW.total_tokens, 0),
           coalesce(NEW.cost_usd, 0)
    FROM alert_sessions s WHERE s.id = NEW.session_id
    ON CONFLICT (provider, model, chain_id) DO UPDATE SET
        calls = usage_totals.calls + 1,
        total_tokens = usage_totals.total_tokens + excluded.total_tokens,
        cost_usd = usage_totals.cost_usd + excluded.cost_usd;
    RETURN NULL;
END
$$;
CREATE TRIGGER llm_interactions_usage AFTER INSERT ON llm_interactions
    FOR EACH ROW EXECUTE FUNCTION session_usage_add();

-- The calls recorded before this migration: tokens, no estimate.
INSERT INTO session_usage
SELECT session_id, provider, model, count(*), coalesce(sum(input_tokens), 0),
       coalesce(sum(output_tokens), 0), coalesce(sum(thinking_tokens), 0), 0,
       coalesce(sum(total_tokens), 0), 0,
       count(*) FILTER (WHERE coalesce(total_tokens, 0) > 0)
FROM llm_interactions GROUP BY session_id, provider, model;
INSERT INTO usage_totals
SELECT i.provider, i.model, s.chain_id, count(*), coalesce(sum(i.total_tokens), 0), 0
FROM llm_interactions i JOIN alert_sessions s ON s.id = i.session_id
GROUP BY i.provider, i.model, s.chain_id;

-- Why a session that ran its course ended early (`budget_exhausted`).
ALTER TABLE alert_sessions ADD COLUMN end_reason TEXT;

-- Why a pending session waits (its scope's daily budget is spent); cleared
-- when it starts.
ALTER TABLE alert_sessions ADD COLUMN hold_reason TEXT;
-- A scope's spend of the day: its sessions created since midnight.
CREATE INDEX alert_sessions_scope_created_idx ON alert_sessions (memory_scope, created_at);

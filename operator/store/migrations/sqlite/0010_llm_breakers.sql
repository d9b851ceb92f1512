-- Circuit breakers of LLM providers, shared by every process that calls them
-- (each runner pod of a cluster, local mode across restarts): failures seen
-- by one execution open the circuit for the next. `scope` separates
-- providers of the same name configured apart (a cluster's namespaces).
CREATE TABLE llm_breakers (
    scope                TEXT NOT NULL,
    provider             TEXT NOT NULL,
    consecutive_failures INTEGER NOT NULL,
    open_until           TEXT,
    updated_at           TEXT NOT NULL,
    PRIMARY KEY (scope, provider)
);

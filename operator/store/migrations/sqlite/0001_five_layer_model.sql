-- The five-layer data model (session -> stage -> agent execution -> timeline,
-- messages, interactions), WebSocket catch-up events and follow-up chats.
-- The Postgres migration of the same number defines the same logical schema;
-- here JSON and timestamps (RFC 3339, UTC) are TEXT and ids of events never
-- repeat (AUTOINCREMENT), so catch-up by id stays correct after deletions.
-- Enumerations are stored as their lowercase wire strings.

CREATE TABLE alert_sessions (
    id                      TEXT PRIMARY KEY,
    alert_data              TEXT NOT NULL,
    alert_type              TEXT NOT NULL,
    chain_id                TEXT NOT NULL,
    status                  TEXT NOT NULL,
    author                  TEXT,
    runbook_url             TEXT,
    mcp_selection           TEXT,
    final_analysis          TEXT,
    executive_summary       TEXT,
    executive_summary_error TEXT,
    error_message           TEXT,
    current_stage_index     INTEGER,
    current_stage_id        TEXT,
    pod_id                  TEXT,
    created_at              TEXT NOT NULL,
    started_at              TEXT,
    completed_at            TEXT,
    last_interaction_at     TEXT,
    deleted_at              TEXT
);
-- Claim queue: pending sessions in creation order.
CREATE INDEX alert_sessions_pending_idx ON alert_sessions (created_at, id)
    WHERE status = 'pending' AND deleted_at IS NULL;
-- Session list (newest first), status filters and counts.
CREATE INDEX alert_sessions_created_idx ON alert_sessions (created_at DESC, id DESC);
CREATE INDEX alert_sessions_status_idx ON alert_sessions (status, last_interaction_at);
-- Retention: completion age and soft-deletion age.
CREATE INDEX alert_sessions_completed_idx ON alert_sessions (completed_at) WHERE deleted_at IS NULL;
CREATE INDEX alert_sessions_deleted_idx ON alert_sessions (deleted_at) WHERE deleted_at IS NOT NULL;

CREATE TABLE chats (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL UNIQUE REFERENCES alert_sessions (id) ON DELETE CASCADE,
    created_by          TEXT,
    pod_id              TEXT,
    created_at          TEXT NOT NULL,
    last_interaction_at TEXT
);

CREATE TABLE chat_user_messages (
    id         TEXT PRIMARY KEY,
    chat_id    TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    content    TEXT NOT NULL,
    author     TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX chat_user_messages_chat_idx ON chat_user_messages (chat_id, created_at);

CREATE TABLE stages (
    id                   TEXT PRIMARY KEY,
    session_id           TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    stage_name           TEXT NOT NULL,
    stage_index          INTEGER NOT NULL,
    expected_agent_count INTEGER NOT NULL,
    parallel_type        TEXT,
    success_policy       TEXT,
    chat_id              TEXT REFERENCES chats (id) ON DELETE CASCADE,
    chat_user_message_id TEXT REFERENCES chat_user_messages (id) ON DELETE SET NULL,
    status               TEXT NOT NULL,
    error_message        TEXT,
    created_at           TEXT NOT NULL,
    started_at           TEXT,
    completed_at         TEXT,
    UNIQUE (session_id, stage_index)
);
CREATE INDEX stages_chat_idx ON stages (chat_id, status) WHERE chat_id IS NOT NULL;

CREATE TABLE agent_executions (
    id                 TEXT PRIMARY KEY,
    stage_id           TEXT NOT NULL REFERENCES stages (id) ON DELETE CASCADE,
    session_id         TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    agent_name         TEXT NOT NULL,
    agent_index        INTEGER NOT NULL,
    kind               TEXT NOT NULL,
    iteration_strategy TEXT NOT NULL,
    llm_provider       TEXT,
    status             TEXT NOT NULL,
    error_message      TEXT,
    created_at         TEXT NOT NULL,
    started_at         TEXT,
    completed_at       TEXT,
    UNIQUE (stage_id, agent_index)
);
CREATE INDEX agent_executions_session_idx ON agent_executions (session_id, created_at);

CREATE TABLE timeline_events (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    stage_id        TEXT REFERENCES stages (id) ON DELETE CASCADE,
    execution_id    TEXT REFERENCES agent_executions (id) ON DELETE CASCADE,
    sequence_number INTEGER NOT NULL,
    event_type      TEXT NOT NULL,
    status          TEXT NOT NULL,
    content         TEXT NOT NULL,
    metadata        TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX timeline_events_session_idx ON timeline_events (session_id, created_at, sequence_number);
CREATE INDEX timeline_events_execution_idx ON timeline_events (execution_id, sequence_number)
    WHERE execution_id IS NOT NULL;
CREATE INDEX timeline_events_stage_idx ON timeline_events (stage_id) WHERE stage_id IS NOT NULL;

CREATE TABLE messages (
    id              TEXT PRIMARY KEY,
    session_id      TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    stage_id        TEXT NOT NULL REFERENCES stages (id) ON DELETE CASCADE,
    execution_id    TEXT NOT NULL REFERENCES agent_executions (id) ON DELETE CASCADE,
    sequence_number INTEGER NOT NULL,
    role            TEXT NOT NULL,
    content         TEXT NOT NULL,
    tool_calls      TEXT NOT NULL,
    tool_call_id    TEXT,
    tool_name       TEXT,
    created_at      TEXT NOT NULL,
    UNIQUE (execution_id, sequence_number)
);
CREATE INDEX messages_session_idx ON messages (session_id);

CREATE TABLE llm_interactions (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    stage_id         TEXT REFERENCES stages (id) ON DELETE CASCADE,
    execution_id     TEXT REFERENCES agent_executions (id) ON DELETE CASCADE,
    interaction_type TEXT NOT NULL,
    provider         TEXT NOT NULL,
    model            TEXT NOT NULL,
    last_message_id  TEXT,
    llm_request      TEXT NOT NULL,
    llm_response     TEXT NOT NULL,
    thinking_content TEXT,
    response_text    TEXT NOT NULL,
    input_tokens     INTEGER,
    output_tokens    INTEGER,
    total_tokens     INTEGER,
    thinking_tokens  INTEGER,
    duration_ms      INTEGER NOT NULL,
    error_message    TEXT,
    created_at       TEXT NOT NULL
);
CREATE INDEX llm_interactions_session_idx ON llm_interactions (session_id, created_at);
CREATE INDEX llm_interactions_execution_idx ON llm_interactions (execution_id) WHERE execution_id IS NOT NULL;

CREATE TABLE mcp_interactions (
    id               TEXT PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES alert_sessions (id) ON DELETE CASCADE,
    stage_id         TEXT REFERENCES stages (id) ON DELETE CASCADE,
    execution_id     TEXT REFERENCES agent_executions (id) ON DELETE CASCADE,
    interaction_type TEXT NOT NULL,
    server_name      TEXT NOT NULL,
    tool_name        TEXT NOT NULL,
    tool_arguments   TEXT NOT NULL,
    tool_result      TEXT NOT NULL,
    available_tools  TEXT NOT NULL,
    duration_ms      INTEGER NOT NULL,
    error_message    TEXT,
    created_at       TEXT NOT NULL
);
CREATE INDEX mcp_interactions_session_idx ON mcp_interactions (session_id, created_at);
CREATE INDEX mcp_interactions_execution_idx ON mcp_interactions (execution_id) WHERE execution_id IS NOT NULL;

-- Persistent WebSocket events, kept for catch-up. No foreign key: events are
-- transient distribution records; purges delete them explicitly.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    channel    TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX events_channel_idx ON events (channel, id);
CREATE INDEX events_session_idx ON events (session_id);
CREATE INDEX events_created_idx ON events (created_at);

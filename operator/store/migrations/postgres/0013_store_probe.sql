-- One row the health check writes, so that /health notices a database that
-- answers reads but cannot take writes (a full disk, a read-only replica).
CREATE TABLE store_probe (
    id          INTEGER PRIMARY KEY,
    written_at  TIMESTAMPTZ NOT NULL
);

-- The durable scheduler's schema on PostgreSQL, version 2: schema.sql's tables, typed.
-- Created by refsched/durable/postgres.py inside one transaction, in the store's own schema
-- (the `schema` URL parameter, "refsched" by default), so several stores share one database.

-- meta keeps values of several types (counts, the clock, the format's name): JSON values.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value JSONB NOT NULL
);

CREATE TABLE IF NOT EXISTS task (
    id               TEXT PRIMARY KEY,
    generation       BIGINT NOT NULL,
    seq              BIGINT NOT NULL,
    state            TEXT NOT NULL,
    fn               TEXT NOT NULL,
    args             TEXT NOT NULL,
    remaining_deps   BIGINT NOT NULL,
    blocked_by       TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    attempt          BIGINT NOT NULL DEFAULT 0,
    holder           TEXT,
    deadline         DOUBLE PRECISION,
    lease_seconds    DOUBLE PRECISION,
    ended_attempt    BIGINT,
    result           TEXT,
    error            TEXT,
    traceback        TEXT,
    became_ready_at  DOUBLE PRECISION,
    claimed_at       DOUBLE PRECISION,
    ended_at         DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS task_ready ON task (seq) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS task_running ON task (seq) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS task_blocked_by ON task (blocked_by) WHERE state = 'blocked';

CREATE TABLE IF NOT EXISTS dep (
    task TEXT NOT NULL,
    dep  TEXT NOT NULL,
    PRIMARY KEY (task, dep)
);
CREATE INDEX IF NOT EXISTS dep_dependents ON dep (dep, task);

-- Rows are numbered in commit order: every write transaction holds the store's lock.
CREATE TABLE IF NOT EXISTS step (
    n      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action TEXT NOT NULL,
    params TEXT NOT NULL,
    at     DOUBLE PRECISION NOT NULL
);

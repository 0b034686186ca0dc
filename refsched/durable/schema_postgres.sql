-- The durable scheduler's schema on PostgreSQL, version 7: schema.sql's tables, typed.
-- Created by refsched/durable/postgres.py inside one transaction, in the store's own schema
-- (the `schema` URL parameter, "refsched" by default), so several stores share one database.
--
-- Written out beside schema.sql rather than derived from it: the tables, columns and indexes
-- are the same (a column added to one is added to the other, and the durable tests run every
-- transition on both stores), but each line's type is its dialect's own and not a plain
-- renaming: SQLite's meta.value has no type (it keeps ints, floats and text as given) where
-- PostgreSQL needs JSONB, counters are BIGINT where SQLite's INTEGER is already 64 bits while
-- cancel_requested stays a 32-bit flag, and step.n is an identity column where SQLite numbers
-- an INTEGER PRIMARY KEY itself. A store already created keeps the types it was created with,
-- so a rewrite that changed one would need a migration.

-- meta keeps values of several types (counts, the clock, the format's name): JSON values.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value JSONB NOT NULL
);

-- The counters of stats(): summed over the shards, each step adding to its server process's.
CREATE TABLE IF NOT EXISTS counter (
    name  TEXT NOT NULL,
    shard INTEGER NOT NULL,
    n     BIGINT NOT NULL,
    PRIMARY KEY (name, shard)
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
    ended_at         DOUBLE PRECISION,
    due              DOUBLE PRECISION NOT NULL DEFAULT 0,
    priority         BIGINT NOT NULL DEFAULT 0,
    claim_key        DOUBLE PRECISION NOT NULL DEFAULT 0,
    claim_due        DOUBLE PRECISION NOT NULL DEFAULT 0,
    optional_deps    INTEGER NOT NULL DEFAULT 0,
    provenance       TEXT,
    task_type        TEXT,
    tenant           TEXT,
    retried          INTEGER NOT NULL DEFAULT 0,
    first_claimed_at DOUBLE PRECISION,
    expiries         BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS task_claim ON task (claim_key DESC, claim_due, seq)
    WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS task_due ON task (due) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS task_running ON task (seq) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS task_blocked_by ON task (blocked_by) WHERE state = 'blocked';

CREATE TABLE IF NOT EXISTS dep (
    task     TEXT NOT NULL,
    dep      TEXT NOT NULL,
    optional INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task, dep)
);
CREATE INDEX IF NOT EXISTS dep_dependents ON dep (dep, task);

CREATE TABLE IF NOT EXISTS input_summary (
    task       TEXT NOT NULL,
    dep        TEXT NOT NULL,
    generation BIGINT NOT NULL,
    state      TEXT NOT NULL,
    result     TEXT,
    error      TEXT,
    blocked_by TEXT,
    PRIMARY KEY (task, dep)
);

-- Rows are numbered in commit order: every write transaction holds the store's lock.
CREATE TABLE IF NOT EXISTS step (
    n      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action TEXT NOT NULL,
    params TEXT NOT NULL,
    at     DOUBLE PRECISION NOT NULL
);

-- The slot rows of max_concurrency: free (task NULL) or held by one running version.
CREATE TABLE IF NOT EXISTS run_slot (
    n          BIGINT PRIMARY KEY,
    task       TEXT,
    generation BIGINT
);
CREATE INDEX IF NOT EXISTS run_slot_task ON run_slot (task);

CREATE TABLE IF NOT EXISTS schedule (
    name       TEXT PRIMARY KEY,
    fn         TEXT NOT NULL,
    args       TEXT NOT NULL,
    every      DOUBLE PRECISION,
    cron       TEXT,
    timezone   TEXT NOT NULL,
    start_at   DOUBLE PRECISION NOT NULL,
    overlap    TEXT NOT NULL,
    catchup    DOUBLE PRECISION,
    priority   BIGINT NOT NULL,
    paused     INTEGER NOT NULL DEFAULT 0,
    next_slot  DOUBLE PRECISION,
    held_slot  DOUBLE PRECISION,
    unlisted   BIGINT NOT NULL DEFAULT 0,
    open_from  DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE IF NOT EXISTS slot (
    schedule   TEXT NOT NULL,
    at         DOUBLE PRECISION NOT NULL,
    decision   TEXT NOT NULL,
    task       TEXT,
    decided_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (schedule, at)
);

CREATE TABLE IF NOT EXISTS past_version (
    task_type        TEXT,
    tenant           TEXT,
    seq              BIGINT NOT NULL,
    retried          INTEGER NOT NULL,
    state            TEXT NOT NULL,
    attempt          BIGINT NOT NULL,
    ended_attempt    BIGINT,
    expiries         BIGINT NOT NULL,
    became_ready_at  DOUBLE PRECISION,
    first_claimed_at DOUBLE PRECISION,
    ended_at         DOUBLE PRECISION
);

CREATE TABLE IF NOT EXISTS refusal (
    task_type TEXT NOT NULL,
    tenant    TEXT NOT NULL,
    kind      TEXT NOT NULL,
    n         BIGINT NOT NULL,
    PRIMARY KEY (task_type, tenant, kind)
);

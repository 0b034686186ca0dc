-- The durable scheduler's schema, version 7: spec/DurableScheduler.tla's variables as rows.
-- Created by the code that reads it (refsched/durable/store.py), inside one transaction.
-- Version 2 added task.traceback; version 3 the due times and priorities of docs/time.md
-- (task.due, priority, claim_key, claim_due and the index task_claim in place of task_ready);
-- version 4 the edge kinds of docs/semantics.md (dep.optional, task.optional_deps) and the
-- input summaries of claimed versions (the table input_summary); version 5 the provenance
-- of dead versions (task.provenance); version 6 the signals of docs/durable.md (task.task_type,
-- tenant, retried, first_claimed_at, expiries and the tables past_version and refusal);
-- version 7 the table counter in place of meta's counters, and the table run_slot.
-- MIGRATIONS in store.py brings an older store up to date.
-- schema_postgres.sql is the same tables in PostgreSQL's types: change both together.

-- One row per setting and per scalar spec variable: format (what this file is),
-- schema_version, max_concurrency, max_attempts, clock ('wall' | 'virtual'), now (the virtual
-- clock's reading), record (1: every accepted step is appended to step), aging (seconds per
-- priority level of the claim key; 0 = strict priority), started, closed, next_seq.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value NOT NULL
);

-- The store-wide counters of stats(): a counter's value is the sum of its rows. A step adds
-- to the row of its shard (an upsert): one shard here, where one writer runs at a time;
-- PostgreSQL's steps add to the shard of their server process, so that two steps counting at
-- once do not wait for each other's row (docs/durable.md, "Counters").
CREATE TABLE IF NOT EXISTS counter (
    name  TEXT NOT NULL,
    shard INTEGER NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (name, shard)
);

-- One row per task id: its current version (the spec's variables at index t).
CREATE TABLE IF NOT EXISTS task (
    id               TEXT PRIMARY KEY,
    generation       INTEGER NOT NULL,  -- >= 1
    seq              INTEGER NOT NULL,  -- the ready order
    state            TEXT NOT NULL,     -- pending ready running succeeded failed blocked cancelled
    fn               TEXT NOT NULL,     -- 'module:function'
    args             TEXT NOT NULL,     -- JSON object of keyword arguments
    remaining_deps   INTEGER NOT NULL,  -- == deps whose version has not succeeded, while waiting
    blocked_by       TEXT,              -- the dep that blocked it, when blocked
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,  -- claims of this version: the fencing token
    holder           TEXT,              -- the worker whose lease is live, else NULL
    deadline         REAL,              -- the live lease's end, on the store's clock
    lease_seconds    REAL,              -- what a heartbeat extends the lease by
    ended_attempt    INTEGER,           -- the attempt whose report ended the version, if one did
    result           TEXT,              -- JSON given to complete()
    error            TEXT,              -- what fail() was given, or why the store failed it
    traceback        TEXT,              -- the formatted traceback of the exception fail() was given
    became_ready_at  REAL,              -- store clock: ready since
    claimed_at       REAL,              -- store clock: the current attempt's claim
    ended_at         REAL,              -- store clock: the version's end
    due              REAL NOT NULL DEFAULT 0,     -- store clock: claimable from then on
    priority         INTEGER NOT NULL DEFAULT 0,  -- higher first
    -- The claim order of docs/time.md, fixed when the version is made: claim_key descending,
    -- then claim_due, then seq. With aging A: claim_key = priority * A - due, claim_due = 0;
    -- with strict priority: claim_key = priority, claim_due = due.
    claim_key        REAL NOT NULL DEFAULT 0,
    claim_due        REAL NOT NULL DEFAULT 0,
    optional_deps    INTEGER NOT NULL DEFAULT 0,  -- == its dep rows with optional = 1
    -- JSON, set once when the version fails, is cancelled or is blocked, in that transaction:
    -- {root, generation, end, path, actor, reason, time} (docs/durable.md, Provenance);
    -- NULL while it is not dead. A failed version keeps its own (its blocked dependents
    -- extend it); info() shows it for blocked and cancelled versions.
    provenance       TEXT,
    -- Signals (docs/durable.md, Signals), written by the steps that write the row anyway:
    task_type        TEXT,              -- the version's task type, as submit() was given it
    tenant           TEXT,              -- JSON of the version's tenant (a str or an int)
    retried          INTEGER NOT NULL DEFAULT 0,  -- 1: the version was made by retry()
    first_claimed_at REAL,              -- store clock: the version's first claim
    expiries         INTEGER NOT NULL DEFAULT 0   -- leases of this version expired
);
-- The claim order, one index scan; and the ready versions by due time (the next one due).
CREATE INDEX IF NOT EXISTS task_claim ON task (claim_key DESC, claim_due, seq)
    WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS task_due ON task (due) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS task_running ON task (seq) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS task_blocked_by ON task (blocked_by) WHERE state = 'blocked';

-- One row per dependency edge of a current version: task depends on dep. A required edge
-- (optional = 0) is settled once dep's version succeeded, an optional one (optional = 1) once
-- it ended in any way; only a required edge carries blocking (spec: optional).
CREATE TABLE IF NOT EXISTS dep (
    task     TEXT NOT NULL,
    dep      TEXT NOT NULL,
    optional INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task, dep)
);
CREATE INDEX IF NOT EXISTS dep_dependents ON dep (dep, task);

-- The input summary of a claimed version with optional edges: how each of its optional deps
-- had ended when the version was claimed (written by the Claim that took it, never after).
CREATE TABLE IF NOT EXISTS input_summary (
    task       TEXT NOT NULL,
    dep        TEXT NOT NULL,
    generation INTEGER NOT NULL,  -- the dep's version that ended
    state      TEXT NOT NULL,     -- succeeded failed blocked cancelled
    result     TEXT,              -- JSON given to its complete(), when it succeeded
    error      TEXT,              -- what its fail() was given, when it failed
    blocked_by TEXT,              -- the dep that blocked it, when blocked
    PRIMARY KEY (task, dep)
);

-- The history: every accepted spec step, appended by the transaction that takes it, so the
-- commit order is the order of the rows (only when meta.record = 1).
CREATE TABLE IF NOT EXISTS step (
    n      INTEGER PRIMARY KEY,
    action TEXT NOT NULL,
    params TEXT NOT NULL,  -- JSON object
    at     REAL NOT NULL   -- store clock
);

-- The slot rows of max_concurrency (docs/durable.md, "Writers without one lock"): each is free
-- (task NULL) or held by one running version, numbered 1 .. max_concurrency and made when
-- first needed. PostgreSQL's claims take them; SQLite's single writer counts the running
-- versions instead and leaves this table empty.
CREATE TABLE IF NOT EXISTS run_slot (
    n          INTEGER PRIMARY KEY,
    task       TEXT,
    generation INTEGER
);
CREATE INDEX IF NOT EXISTS run_slot_task ON run_slot (task);

-- One row per recurring schedule (refsched/durable/schedules.py, docs/time.md): its timing, its
-- policy, and spec/Schedule.tla's variables: the next undecided slot, the held slot, paused.
CREATE TABLE IF NOT EXISTS schedule (
    name       TEXT PRIMARY KEY,
    fn         TEXT NOT NULL,
    args       TEXT NOT NULL,
    every      REAL,              -- seconds between slots, or NULL for a cron timing
    cron       TEXT,              -- a five-field cron expression, or NULL
    timezone   TEXT NOT NULL,     -- the IANA zone the cron expression is read in
    start_at   REAL NOT NULL,     -- store clock: no slot before it
    overlap    TEXT NOT NULL,     -- skip buffer_one allow
    catchup    REAL,              -- seconds: an older slot is missed (NULL: none is)
    priority   INTEGER NOT NULL,  -- of each run's version
    paused     INTEGER NOT NULL DEFAULT 0,
    next_slot  REAL,              -- the next slot neither decided nor held (NULL: no more)
    held_slot  REAL,              -- buffer_one: the slot kept until no run is unfinished
    unlisted   INTEGER NOT NULL DEFAULT 0,  -- slots missed or skipped in one jump, not listed
    open_from  REAL,              -- every run of a slot before it is known finished
    created_at REAL NOT NULL      -- store clock
);

-- One row per decided slot: run (with its run's task id), skipped or missed.
CREATE TABLE IF NOT EXISTS slot (
    schedule   TEXT NOT NULL,
    at         REAL NOT NULL,     -- the slot, on the store's clock
    decision   TEXT NOT NULL,
    task       TEXT,              -- the run's task id, for run
    decided_at REAL NOT NULL,     -- store clock
    PRIMARY KEY (schedule, at)
);

-- Signals: one row per version taken out of the task table (replaced by a resubmission, or
-- given a new version by retry()), with its signal columns as they were; inserted by that
-- step, never changed.
CREATE TABLE IF NOT EXISTS past_version (
    task_type        TEXT,
    tenant           TEXT,
    seq              INTEGER NOT NULL,
    retried          INTEGER NOT NULL,
    state            TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    ended_attempt    INTEGER,
    expiries         INTEGER NOT NULL,
    became_ready_at  REAL,
    first_claimed_at REAL,
    ended_at         REAL
);

-- Signals of the calls that change no version (a report refused by fencing or repeated, a
-- graph configuration error), per partition: task_type '' for none, tenant 'null' for none.
-- Written only on those paths.
CREATE TABLE IF NOT EXISTS refusal (
    task_type TEXT NOT NULL,
    tenant    TEXT NOT NULL,
    kind      TEXT NOT NULL,  -- a counter of refsched.dag.signals.COUNTERS
    n         INTEGER NOT NULL,
    PRIMARY KEY (task_type, tenant, kind)
);

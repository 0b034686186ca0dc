"""The common paths of the spec's steps as server-side functions of a PostgreSQL store: Submit
(and SubmitOptional) of a batch of versions with or without deps (a submit is a batch of one),
Claim of ready versions, and Complete with its fan-in (one report, or a batch of them). Each
call is one round trip and one transaction, so the store's lock is held while the server works,
never while a client is descheduled between two of its statements.

Each function mirrors a path of refsched/durable/scheduler.py statement for statement (same
rows, counters, history rows and notification); whatever else a call meets (an error to
report, a lease to expire, a stale report) it leaves to that code, having changed nothing:
Submit and a batch return NULL, Claim a row marked fallback, Complete false.

Arguments every function takes first: the store's lock key, whether the clock is virtual,
the notification channel, whether the store records its history, and max_concurrency.
Installed by refsched/durable/postgres.py (``PostgresStore.prepare``): the comment on
:data:`STAMPED` names the digest of :data:`SQL`, and a store whose functions carry another
digest gets these in their place. The text is a module, not a data file, so that the mutants of
``refsched.verify.mutants`` patch it as they patch the scheduler's own code.
"""

#: The function whose comment names the digest of the functions installed.
STAMPED = "refsched_claim(bigint, boolean, text, boolean, bigint, text, bigint, float8)"

SQL = r"""
-- (PL/pgSQL throughout: its statements' plans are kept for the session, where an SQL
-- function's are made again on each call.)
-- The steps taken for every version (claim, complete, the claimable check) run with
-- enable_seqscan off: a plan kept for the session may have been made on statistics of a store
-- with few rows (run_slot has one page; no version ran when task was analysed), and would then
-- read the slot rows whole for each version, and the table past every version claimed so far
-- to find a ready one: costs that grow with the queue and the versions running.
CREATE OR REPLACE FUNCTION refsched_now(p_virtual boolean) RETURNS float8
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_virtual THEN
        RETURN (SELECT (value #>> '{}')::float8 FROM meta WHERE key = 'now');
    END IF;
    RETURN extract(epoch FROM clock_timestamp())::float8;
END
$$;

-- A counter of stats(): add to its row of this server process's shard (Tx.count).
DROP FUNCTION IF EXISTS refsched_count(text, bigint);
CREATE OR REPLACE FUNCTION refsched_count(p_name text, p_n bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counter (name, shard, n) VALUES (p_name, pg_backend_pid() % 256, p_n)
        ON CONFLICT (name, shard) DO UPDATE SET n = counter.n + excluded.n;
END
$$;

CREATE OR REPLACE FUNCTION refsched_meta_add(p_key text, p_n bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE meta SET value = to_jsonb((value #>> '{}')::numeric + p_n) WHERE key = p_key;
END
$$;

-- Whether a claim would now take a step: a lease past its deadline or a version running
-- without one, or an eligible version (ready and due) and a free slot, the scheduler started
-- and not closed
-- (DurableScheduler._claimable asks the same of its claim check).
CREATE OR REPLACE FUNCTION refsched_claimable(p_virtual boolean, p_max bigint) RETURNS boolean
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
DECLARE
    now_ float8 := refsched_now(p_virtual);
BEGIN
    RETURN EXISTS (SELECT 1 FROM task WHERE state = 'running'
                   AND (holder IS NULL OR deadline < now_))
        OR ((SELECT CAST(value AS integer) FROM meta WHERE key = 'started') <> 0
            AND (SELECT CAST(value AS integer) FROM meta WHERE key = 'closed') = 0
            AND EXISTS (SELECT 1 FROM task WHERE state = 'ready' AND due <= now_)
            AND (SELECT count(*) FROM task WHERE state = 'running') < p_max);
END
$$;

-- The listening sessions of the idle workers (PostgresStore.wait_for_work): a row from the
-- first wait after a claim that took work, until the next such claim. A transaction that
-- notifies commits under a database-wide lock, so a step notifies only while a row is here:
-- on a busy store no step waits for that lock.
CREATE TABLE IF NOT EXISTS idle_listener (pid integer PRIMARY KEY);

-- A step that may have made a version claimable wakes the idle workers, if there are any and
-- one now is. Read after the store's lock was granted, so a worker that went idle first is
-- seen (refsched_idle says why).
CREATE OR REPLACE FUNCTION refsched_wake(p_virtual boolean, p_channel text, p_max bigint)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM idle_listener) AND refsched_claimable(p_virtual, p_max) THEN
        PERFORM pg_notify(p_channel, '');
    END IF;
END
$$;

-- A worker's listening session goes idle: its row, written under the store's lock taken
-- exclusively, so every step either committed before (what it left is what this returns: true
-- if a claim could take a step now, or within p_within seconds as a version comes due) or
-- takes the lock after this commits and sees the row. Rows of sessions that ended are removed.
-- The lock is waited for p_within seconds at most, 0.1 s at least (a worker's first waits are
-- of a few ms, and a lock queued behind steps in flight takes that long; a client stopped
-- inside a step holds it for good): then SQLSTATE 55P03, and nothing written.
CREATE OR REPLACE FUNCTION refsched_idle(p_lock bigint, p_virtual boolean, p_max bigint,
        p_within float8) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('lock_timeout', greatest(100, ceil(p_within * 1000))::bigint || 'ms', true);
    PERFORM pg_advisory_xact_lock(p_lock);
    DELETE FROM idle_listener
     WHERE pid NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL);
    INSERT INTO idle_listener (pid) VALUES (pg_backend_pid()) ON CONFLICT DO NOTHING;
    RETURN refsched_claimable(p_virtual, p_max)
        OR ((SELECT CAST(value AS integer) FROM meta WHERE key = 'started') <> 0
            AND (SELECT CAST(value AS integer) FROM meta WHERE key = 'closed') = 0
            AND COALESCE((SELECT MIN(due) FROM task WHERE state = 'ready')
                         <= refsched_now(p_virtual) + p_within, false)
            AND p_max > (SELECT count(*) FROM task WHERE state = 'running'));
END
$$;

-- The one-version submit of earlier stores: a submit is a batch of one (refsched_submit_many).
DROP FUNCTION IF EXISTS refsched_submit(bigint, boolean, text, boolean, bigint, text, text, text);
DROP FUNCTION IF EXISTS refsched_submit(bigint, boolean, text, boolean, bigint, text, text, text,
                                        float8, float8, bigint, float8);

-- Submit(t, D) / SubmitOptional(t, D, O) of each item of a batch, in order, as
-- DurableScheduler._submit_in takes them one after another in one transaction: item i is
-- p_ids[i] ... p_priorities[i]; its edges are the run of p_edge_items equal to i (in item
-- order), to p_edge_deps, optional where p_edge_optional. The new generations, in order; NULL,
-- having changed nothing, when an item meets what the caller's code does itself: the scheduler
-- closed, an id running, after start an unknown dep or a cycle (errors to raise), a dead
-- required dep (Settle); under the shared lock, an id that has a version.
--
-- A batch of new ids after start (the common case: each id once, none stored) takes the
-- store's lock SHARED (spec/DurableRowLocks.tla's submit; docs/durable.md, "Writers without
-- one lock"), so it runs beside claims and completes: its dependencies' rows FOR SHARE, in id
-- order, before it reads their states, so a report of one waits until this commits (and its
-- fan-in then sees the new edges) or this waits for the report and reads the state it left.
-- A batch of new ids closes no cycle: after start every edge names a known id, so none ends
-- at one. Any other batch takes the lock exclusively. Either way meta's next_seq row is
-- locked first and kept to the commit: submits draw seq numbers one at a time, in commit
-- order.
CREATE OR REPLACE FUNCTION refsched_submit_many(p_lock bigint, p_virtual boolean,
        p_channel text, p_record boolean, p_max bigint, p_aging float8, p_ids text[],
        p_fns text[], p_args text[], p_run_ats float8[], p_delays float8[],
        p_priorities bigint[], p_edge_items bigint[], p_edge_deps text[],
        p_edge_optional boolean[]) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    now_ float8;
    started_ boolean;
    seq_ bigint;
    e integer := 1;
    t text;
    deps_ text[];
    opts_ text[];
    old_generation bigint;
    old_state text;
    old_optional bigint;
    d_ text;
    dep_state text;
    remaining bigint;
    due_ float8;
    generations bigint[] := '{}';
    ready boolean := false;
    ready_later boolean := false;
    shared_ boolean;
    locked_ready boolean := false;
    -- Local copies: a local array is kept expanded, so that its i-th element is found at once
    -- (in a parameter's flat form, each subscript of a text[] walks from its start).
    ids_ text[] := p_ids;
    fns_ text[] := p_fns;
    args_ text[] := p_args;
    edge_items bigint[] := p_edge_items;
    edge_deps text[] := p_edge_deps;
    edge_optional boolean[] := p_edge_optional;
BEGIN
    -- Looked at before the lock; started never changes back, and an id found stored under
    -- the shared lock hands the batch to the client's code.
    shared_ := (SELECT CAST(value AS integer) FROM meta WHERE key = 'started') <> 0
               AND (SELECT count(DISTINCT x) FROM unnest(ids_) AS x) = cardinality(ids_);
    -- Each id by its key (refsched_claim says why not `id = ANY (ids_)`).
    FOR i IN 1 .. CASE WHEN shared_ THEN cardinality(ids_) ELSE 0 END LOOP
        IF EXISTS (SELECT 1 FROM task WHERE id = ids_[i]) THEN
            shared_ := false;
            EXIT;
        END IF;
    END LOOP;
    IF shared_ THEN
        PERFORM pg_advisory_xact_lock_shared(p_lock);
        IF p_record THEN
            PERFORM pg_advisory_xact_lock(p_lock # 1);  -- the history lock
        END IF;
    ELSE
        PERFORM pg_advisory_xact_lock(p_lock);
    END IF;
    now_ := refsched_now(p_virtual);
    IF (SELECT CAST(value AS integer) FROM meta WHERE key = 'closed') <> 0 THEN
        RETURN NULL;
    END IF;
    started_ := (SELECT CAST(value AS integer) FROM meta WHERE key = 'started') <> 0;
    SELECT CAST(value AS bigint) INTO seq_ FROM meta WHERE key = 'next_seq' FOR UPDATE;
    -- Under the shared lock, every dep's row FOR SHARE, in id order, each by its key. A ready
    -- dep locked here is passed over by the claims meanwhile (SKIP LOCKED): the commit wakes
    -- the idle workers for it.
    FOR d_ IN SELECT DISTINCT x FROM unnest(CASE WHEN shared_ THEN edge_deps END) AS x
               ORDER BY x LOOP
        SELECT state INTO dep_state FROM task WHERE id = d_ FOR SHARE;
        locked_ready := locked_ready OR dep_state IS NOT DISTINCT FROM 'ready';
    END LOOP;
    -- A block of its own: an item left to the client rolls back the items before it.
    BEGIN
        FOR i IN 1 .. coalesce(cardinality(ids_), 0) LOOP
            t := ids_[i];
            deps_ := '{}';
            opts_ := '{}';
            WHILE e <= cardinality(edge_items) AND edge_items[e] = i LOOP
                deps_ := deps_ || edge_deps[e];
                IF edge_optional[e] THEN
                    opts_ := opts_ || edge_deps[e];
                END IF;
                e := e + 1;
            END LOOP;
            SELECT generation, state, optional_deps INTO old_generation, old_state, old_optional
                FROM task WHERE id = t;
            IF old_state = 'running' OR (shared_ AND FOUND) THEN
                RAISE SQLSTATE 'RSB01';  -- running; stored meanwhile
            END IF;
            remaining := 0;
            -- Each dep by its key, one at a time: the plan of a join is made once per session,
            -- when the table may have been small, and would scan it for every item.
            FOREACH d_ IN ARRAY deps_ LOOP
                SELECT state INTO dep_state FROM task WHERE id = d_;
                IF started_ AND NOT FOUND THEN
                    RAISE SQLSTATE 'RSB01';  -- an unknown dep
                END IF;
                IF d_ <> ALL (opts_) AND dep_state IN ('failed', 'blocked', 'cancelled') THEN
                    RAISE SQLSTATE 'RSB01';  -- a dead required dep: Settle
                END IF;
                -- Not settled (spec: ~Settles): a required dep until it succeeded, an optional
                -- one until it ended; one with no version always.
                IF (d_ = ANY (opts_)
                    AND (dep_state IS NULL OR dep_state IN ('pending', 'ready', 'running')))
                   OR (d_ <> ALL (opts_) AND dep_state IS DISTINCT FROM 'succeeded') THEN
                    remaining := remaining + 1;
                END IF;
            END LOOP;
            IF started_ AND NOT shared_ AND cardinality(deps_) > 0 AND EXISTS (
                    WITH RECURSIVE reach(id) AS (
                        SELECT unnest(deps_)
                        UNION SELECT dep.dep FROM dep JOIN reach ON dep.task = reach.id)
                    SELECT 1 FROM reach WHERE reach.id = t) THEN
                RAISE SQLSTATE 'RSB01';  -- a cycle through t
            END IF;
            due_ := CASE WHEN p_run_ats[i] IS NOT NULL THEN greatest(p_run_ats[i], now_)
                         ELSE now_ + coalesce(p_delays[i], 0) END;
            IF old_state = 'succeeded' THEN
                -- The replaced success no longer counts for the waiting dependents.
                UPDATE task SET remaining_deps = remaining_deps + 1, state = 'pending'
                    WHERE state IN ('pending', 'ready')
                      AND id IN (SELECT task FROM dep WHERE dep = t);
            ELSIF old_state IN ('failed', 'blocked', 'cancelled') THEN
                -- The replaced end no longer settles the optional edges of waiting dependents.
                UPDATE task SET remaining_deps = remaining_deps + 1, state = 'pending'
                    WHERE state IN ('pending', 'ready') AND optional_deps > 0
                      AND id IN (SELECT task FROM dep WHERE dep = t AND optional <> 0);
            END IF;
            IF old_state IS NOT NULL THEN
                INSERT INTO past_version (task_type, tenant, seq, retried, state, attempt,
                                          ended_attempt, expiries, became_ready_at,
                                          first_claimed_at, ended_at)
                    SELECT task_type, tenant, seq, retried, state, attempt, ended_attempt,
                           expiries, became_ready_at, first_claimed_at, ended_at
                      FROM task WHERE id = t;
                DELETE FROM task WHERE id = t;
                DELETE FROM dep WHERE task = t;
            END IF;
            IF old_optional > 0 THEN
                DELETE FROM input_summary WHERE task = t;
            END IF;
            INSERT INTO task (id, generation, seq, state, fn, args, remaining_deps,
                              became_ready_at, due, priority, claim_key, claim_due,
                              optional_deps)
                VALUES (t, coalesce(old_generation, 0) + 1, seq_,
                        CASE WHEN remaining > 0 THEN 'pending' ELSE 'ready' END, fns_[i],
                        args_[i], remaining, CASE WHEN remaining = 0 THEN now_ END, due_,
                        p_priorities[i],
                        CASE WHEN p_aging IS NULL THEN p_priorities[i]
                             ELSE p_priorities[i] * p_aging - due_ END,
                        CASE WHEN p_aging IS NULL THEN due_ ELSE 0 END, cardinality(opts_));
            seq_ := seq_ + 1;
            IF cardinality(deps_) > 0 THEN
                INSERT INTO dep (task, dep, optional)
                    SELECT t, x.d, CASE WHEN x.d = ANY (opts_) THEN 1 ELSE 0 END
                      FROM unnest(deps_) AS x(d);
            END IF;
            IF p_record THEN
                -- D and O in code point order, as the client's sorted() writes them
                INSERT INTO step (action, params, at)
                    SELECT CASE WHEN cardinality(opts_) > 0 THEN 'SubmitOptional'
                                ELSE 'Submit' END,
                           CASE WHEN cardinality(opts_) > 0
                                THEN json_build_object('t', t, 'D', d_json, 'O', o_json,
                                                       'p', p_priorities[i], 'd', delay_)
                                ELSE json_build_object('t', t, 'D', d_json,
                                                       'p', p_priorities[i], 'd', delay_)
                           END::text, now_
                      FROM (SELECT (SELECT coalesce(json_agg(x ORDER BY x COLLATE "C"), '[]')
                                      FROM unnest(deps_) AS x) AS d_json,
                                   (SELECT coalesce(json_agg(x ORDER BY x COLLATE "C"), '[]')
                                      FROM unnest(opts_) AS x) AS o_json,
                                   CASE WHEN p_run_ats[i] IS NOT NULL THEN due_ - now_
                                        ELSE coalesce(p_delays[i], 0) END AS delay_) AS params;
            END IF;
            generations[i] := coalesce(old_generation, 0) + 1;
            IF remaining = 0 THEN
                ready := true;
                ready_later := ready_later OR due_ > now_;
            END IF;
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'RSB01' THEN
        RETURN NULL;
    END;
    PERFORM refsched_meta_add('next_seq', cardinality(generations));
    PERFORM refsched_count('submitted', cardinality(generations));
    IF ready_later THEN
        -- One not yet due: the idle workers read the next due time again.
        IF EXISTS (SELECT 1 FROM idle_listener) THEN
            PERFORM pg_notify(p_channel, '');
        END IF;
    ELSIF ready OR locked_ready THEN
        PERFORM refsched_wake(p_virtual, p_channel, p_max);
    END IF;
    RETURN generations;
END
$$;

-- The picks of a claim, each read in its index's order and never gathered and sorted: a
-- plan is made once per session, and one made while the planner counted a handful of ready
-- versions (a store not analysed since its submits) read and sorted every ready version to
-- take eight (4.7 ms at 2,880 ready, 0.07 ms in the index's order). The settings hold for
-- these statements only: the claim's own last sort has no index to read.
-- Up to p_want free slot rows that no other claim holds, by number.
CREATE OR REPLACE FUNCTION refsched_free_slots(p_want bigint) RETURNS bigint[]
LANGUAGE plpgsql SET enable_bitmapscan = off SET enable_sort = off AS $$
BEGIN
    RETURN (SELECT coalesce(array_agg(n ORDER BY n), '{}')
              FROM (SELECT n FROM run_slot WHERE task IS NULL ORDER BY n LIMIT p_want
                    FOR UPDATE SKIP LOCKED) AS free);
END
$$;

-- Up to p_want versions ready and due at p_now in the claim order of docs/time.md, each
-- locked, those another claim holds passed over (the spec's ClaimPassingOver).
CREATE OR REPLACE FUNCTION refsched_first_ready(p_now float8, p_want bigint) RETURNS text[]
LANGUAGE plpgsql SET enable_bitmapscan = off SET enable_sort = off AS $$
BEGIN
    RETURN (SELECT array_agg(id)
              FROM (SELECT id FROM task WHERE state = 'ready' AND due <= p_now
                     ORDER BY claim_key DESC, claim_due, seq LIMIT p_want
                    FOR UPDATE SKIP LOCKED) AS ready);
END
$$;

-- Claim(w, k): one row with o_fallback when the scheduler is not started or a lease is due to
-- expire (the caller's code expires, re-claims, or raises); otherwise a row per eligible
-- version taken (ready and due), in the claim order of docs/time.md, each with a slot row of
-- max_concurrency's, and no row when there is nothing to take.
-- Under the store's lock SHARED (spec/DurableRowLocks.tla, docs/durable.md "Writers without
-- one lock"): claims and completes run at once, each holding the rows it decides on. A slot
-- row is free (task NULL) or held by one running version; a first claim takes a free one FOR
-- UPDATE SKIP LOCKED, or makes one numbered at most max_concurrency, so no more versions run
-- than there are slot rows numbered 1 .. max_concurrency. The version is the first claimable
-- FOR UPDATE SKIP LOCKED: one another claim holds is passed over (the spec's ClaimPassingOver).
-- Recording its history, a step also takes the history lock: recorded steps run one at a
-- time, so the step rows are numbered in commit order.
CREATE OR REPLACE FUNCTION refsched_claim(p_lock bigint, p_virtual boolean, p_channel text,
        p_record boolean, p_max bigint, p_worker text, p_want bigint,
        p_lease float8)
RETURNS TABLE (o_fallback boolean, o_seq bigint, o_id text, o_generation bigint, o_fn text,
               o_args text, o_deadline float8)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    now_ float8;
    slots bigint[];
    taken bigint;
    chosen text[];
    with_inputs boolean := false;
    has_inputs boolean;
    seqs bigint[] := '{}';
    generations bigint[] := '{}';
    fns text[] := '{}';
    arg_texts text[] := '{}';
    keys float8[] := '{}';
    key_dues float8[] := '{}';
    seq_ bigint;
    generation_ bigint;
    fn_ text;
    args_ text;
    key_ float8;
    key_due_ float8;
BEGIN
    -- Looked at before the lock, as the client looked before calling: a claimer that lost the
    -- race for what woke it sees the winner's commit here, and does not queue for the lock.
    IF (SELECT CAST(value AS integer) FROM meta WHERE key = 'started') <> 0
            AND NOT refsched_claimable(p_virtual, p_max) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(p_lock);
    IF p_record THEN
        PERFORM pg_advisory_xact_lock(p_lock # 1);  -- the history lock
    END IF;
    now_ := refsched_now(p_virtual);
    IF (SELECT CAST(value AS integer) FROM meta WHERE key = 'started') = 0
            OR EXISTS (SELECT 1 FROM task WHERE state = 'running'
                       AND (holder IS NULL OR deadline < now_)) THEN
        RETURN QUERY SELECT true, NULL::bigint, NULL::text, NULL::bigint, NULL::text,
                            NULL::text, NULL::float8;
        RETURN;
    END IF;
    IF (SELECT CAST(value AS integer) FROM meta WHERE key = 'closed') <> 0 THEN
        RETURN;
    END IF;
    -- The slot rows: free ones no other claim holds, then new ones while fewer than
    -- max_concurrency exist (a number another claim is making is waited for, then left).
    slots := refsched_free_slots(p_want);
    IF cardinality(slots) < p_want AND (SELECT count(*) FROM run_slot) < p_max THEN
        WITH made AS (
            INSERT INTO run_slot (n)
                SELECT g FROM generate_series(1, p_max) AS g
                 WHERE NOT EXISTS (SELECT 1 FROM run_slot WHERE n = g)
                 LIMIT p_want - cardinality(slots)
            ON CONFLICT (n) DO NOTHING RETURNING n)
        SELECT slots || coalesce(array_agg(n ORDER BY n), '{}') INTO slots FROM made;
    END IF;
    IF cardinality(slots) = 0 THEN
        RETURN;
    END IF;
    chosen := refsched_first_ready(now_, cardinality(slots));
    taken := coalesce(cardinality(chosen), 0);
    IF taken = 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(id ORDER BY id COLLATE "C") INTO chosen FROM unnest(chosen) AS x(id);
    -- Each version taken by its key, one statement each: a plan of `id = ANY (chosen)` is
    -- made once per session, and made while the table was small (a worker that started on an
    -- empty store) it reads every version for every claim.
    FOR i IN 1 .. taken LOOP
        UPDATE task SET state = 'running', attempt = 1, holder = p_worker,
               deadline = now_ + p_lease, lease_seconds = p_lease, claimed_at = now_,
               first_claimed_at = now_
         WHERE id = chosen[i]
        RETURNING seq, generation, fn, args, claim_key, claim_due, optional_deps > 0
             INTO seq_, generation_, fn_, args_, key_, key_due_, has_inputs;
        -- It holds one slot row (the spec's SlotsFit).
        UPDATE run_slot SET task = chosen[i], generation = generation_ WHERE n = slots[i];
        with_inputs := with_inputs OR has_inputs;
        seqs := seqs || seq_;
        generations := generations || generation_;
        fns := fns || fn_;
        arg_texts := arg_texts || args_;
        keys := keys || key_;
        key_dues := key_dues || key_due_;
    END LOOP;
    IF with_inputs THEN
        -- The input summaries, fixed now (DurableScheduler._keep_inputs writes the same rows).
        INSERT INTO input_summary (task, dep, generation, state, result, error, blocked_by)
            SELECT dep.task, d.id, d.generation, d.state,
                   CASE WHEN d.state = 'succeeded' THEN d.result END,
                   CASE WHEN d.state = 'failed' THEN d.error END, d.blocked_by
              FROM dep JOIN task d ON d.id = dep.dep
             WHERE dep.task = ANY (chosen) AND dep.optional <> 0
                   AND d.state IN ('succeeded', 'failed', 'blocked', 'cancelled');
    END IF;
    RETURN QUERY
        SELECT false, x.seq, x.id, x.generation, x.fn, x.args, now_ + p_lease
          FROM unnest(seqs, chosen, generations, fns, arg_texts, keys, key_dues)
               AS x(seq, id, generation, fn, args, key, key_due)
         ORDER BY x.key DESC, x.key_due, x.seq;
    PERFORM refsched_count('claimed', taken);
    IF p_record THEN
        -- chosen in code point order, as the client's sorted() writes it
        INSERT INTO step (action, params, at)
            VALUES ('Claim', json_build_object('w', p_worker, 'k', taken,
                                               'chosen', to_json(chosen))::text, now_);
    END IF;
    PERFORM refsched_wake(p_virtual, p_channel, p_max);
END
$$;

-- Fan-in of p_task's success: each pending dependent has one dep fewer to wait for, an update
-- of its row under the row's lock (READ COMMITTED re-reads the row once the lock is held, so
-- two completes of its deps at once count down twice). The dependents are taken one by one in
-- id order, so that two completes that share dependents never wait for each other in a cycle,
-- each found by its key: a join's plan is made once per session, and made while the tables
-- had no statistics yet (after a bulk submit), it scanned every version for every report.
CREATE OR REPLACE FUNCTION refsched_fan_in(p_task text, p_now float8) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    d_ text;
BEGIN
    FOR d_ IN SELECT task FROM dep WHERE dep = p_task ORDER BY task LOOP
        UPDATE task SET remaining_deps = remaining_deps - 1,
               became_ready_at = CASE WHEN remaining_deps = 1 THEN p_now
                                      ELSE became_ready_at END,
               state = CASE WHEN remaining_deps = 1 THEN 'ready' ELSE state END
         WHERE id = d_ AND state = 'pending';
    END LOOP;
END
$$;

-- Complete(w, t, g, a): false, having changed nothing, unless the lease is the version's live
-- one (the caller's code then answers a repeated report or refuses a stale one).
CREATE OR REPLACE FUNCTION refsched_complete(p_lock bigint, p_virtual boolean,
        p_channel text, p_record boolean, p_max bigint, p_task text, p_generation bigint,
        p_attempt bigint, p_worker text, p_result text) RETURNS boolean
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    now_ float8;
BEGIN
    -- Under the store's lock shared, as refsched_claim (which says why).
    PERFORM pg_advisory_xact_lock_shared(p_lock);
    IF p_record THEN
        PERFORM pg_advisory_xact_lock(p_lock # 1);  -- the history lock
    END IF;
    now_ := refsched_now(p_virtual);
    -- The fence, in the statement that takes the row's lock: the row changes only while this
    -- lease is the version's live one, as the row is once the lock is held. The row is found
    -- by its key: written `state = 'running'`, the condition would let the planner read it
    -- through task_running, every running version's entry, an index it costs as nearly free
    -- when its statistics were taken while few versions ran (state is never NULL).
    UPDATE task SET state = 'succeeded', holder = NULL, deadline = NULL,
           ended_attempt = p_attempt, ended_at = now_, result = p_result, error = NULL
     WHERE id = p_task AND generation = p_generation AND attempt = p_attempt
           AND state IS NOT DISTINCT FROM 'running' AND holder = p_worker;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- Its slot row is free.
    UPDATE run_slot SET task = NULL, generation = NULL
     WHERE task = p_task AND generation = p_generation;
    IF p_record THEN
        INSERT INTO step (action, params, at)
            VALUES ('Complete', json_build_object('w', p_worker, 't', p_task, 'g', p_generation,
                                                  'a', p_attempt)::text, now_);
    END IF;
    PERFORM refsched_fan_in(p_task, now_);
    PERFORM refsched_count('succeeded', 1);
    PERFORM refsched_wake(p_virtual, p_channel, p_max);
    RETURN true;
END
$$;
-- Complete of each report of a batch, in order, as DurableScheduler._report_batch takes them
-- one after another in one transaction: report i is the lease <<p_tasks[i], p_generations[i],
-- p_attempts[i]>> of p_workers[i], with p_results[i]. True once every one was accepted; false,
-- having changed nothing, when one lease is not its version's live one (a stale report or a
-- repeat: the caller's transaction answers each).
CREATE OR REPLACE FUNCTION refsched_complete_many(p_lock bigint, p_virtual boolean,
        p_channel text, p_record boolean, p_max bigint, p_tasks text[], p_generations bigint[],
        p_attempts bigint[], p_workers text[], p_results text[]) RETURNS boolean
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    now_ float8;
    t text;
    n bigint := coalesce(cardinality(p_tasks), 0);
    -- Local copies, kept expanded (refsched_submit_many says why).
    tasks_ text[] := p_tasks;
    workers_ text[] := p_workers;
    results_ text[] := p_results;
BEGIN
    -- Under the store's lock shared, as refsched_claim (which says why).
    PERFORM pg_advisory_xact_lock_shared(p_lock);
    IF p_record THEN
        PERFORM pg_advisory_xact_lock(p_lock # 1);  -- the history lock
    END IF;
    now_ := refsched_now(p_virtual);
    -- A block of its own: a report left to the client rolls back the reports before it.
    BEGIN
        FOR i IN 1 .. n LOOP
            t := tasks_[i];
            -- The fence, on each report's own row, found by its key (refsched_complete says
            -- why not `state = 'running'`): it changes only while that lease is live.
            UPDATE task SET state = 'succeeded', holder = NULL, deadline = NULL,
                   ended_attempt = p_attempts[i], ended_at = now_, result = results_[i],
                   error = NULL
             WHERE id = t AND generation = p_generations[i] AND attempt = p_attempts[i]
                   AND state IS NOT DISTINCT FROM 'running' AND holder = workers_[i];
            IF NOT FOUND THEN
                RAISE SQLSTATE 'RSB02';  -- stale or repeated: the client's transaction
            END IF;
            UPDATE run_slot SET task = NULL, generation = NULL
             WHERE task = t AND generation = p_generations[i];
            IF p_record THEN
                INSERT INTO step (action, params, at)
                    VALUES ('Complete', json_build_object('w', workers_[i], 't', t,
                                                          'g', p_generations[i],
                                                          'a', p_attempts[i])::text, now_);
            END IF;
            PERFORM refsched_fan_in(t, now_);
        END LOOP;
    EXCEPTION WHEN SQLSTATE 'RSB02' THEN
        RETURN false;
    END;
    PERFORM refsched_count('succeeded', n);
    PERFORM refsched_wake(p_virtual, p_channel, p_max);
    RETURN true;
END
$$;
"""

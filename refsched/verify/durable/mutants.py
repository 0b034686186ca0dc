"""The mutation catalogue of the durable scheduler: seeded bugs of ``refsched/durable/`` and of
the schedule engine it decides slots with (``refsched/schedule.py``).

Each is a source patch that the verification layers must kill (:mod:`refsched.verify.mutants` runs
them; docs/mutants.md has the last run). ``MODULES`` names the files they patch.
"""

from __future__ import annotations

from refsched.verify.mutant import Mutant
from refsched.verify.mutant import mutant as _m

MODULES = {"durable": "refsched.durable.scheduler", "durable_store": "refsched.durable.store",
           "durable_postgres": "refsched.durable.postgres",
           "durable_steps": "refsched.durable.steps_postgres",
           "durable_schedules": "refsched.durable.schedules", "schedule": "refsched.schedule",
           "durable_worker": "refsched.durable.worker"}
"""The files this catalogue patches: a key (a mutant's ``file``) to its module."""

_D, _DS, _DP, _DF = "durable", "durable_store", "durable_postgres", "durable_steps"
_SC, _E = "durable_schedules", "schedule"
_DW = "durable_worker"

CATALOGUE: tuple[Mutant, ...] = (
    # -- DurableScheduler: fencing ---------------------------------------------------------------
    _m("durable_complete_ignores_attempt", _D,
       "a report is fenced by generation and worker only: a stale attempt of the same worker "
       "ends the version its re-claim holds",
       """"AND generation = ? AND attempt = ? AND state = 'running' AND \"""",
       """"AND generation = ? AND ? > 0 AND state = 'running' AND \""""),
    _m("durable_complete_ignores_holder", _D,
       "a report is accepted without a live lease: an expired attempt not yet re-claimed "
       "still ends the version",
       """"holder = ?", (state, lease.attempt, now, result, error, t,""",
       """"? IS NOT NULL", (state, lease.attempt, now, result, error, t,"""),
    _m("durable_stale_report_answered_as_repeat", _D,
       "a report of a stale attempt of an ended version is answered as a repeat, not refused",
       """        if (generation == lease.generation and ended_attempt == lease.attempt
                and state in _TERMINAL):""",
       """        if (generation == lease.generation and ended_attempt is not None
                and state in _TERMINAL):"""),
    _m("durable_heartbeat_revives_lost_lease", _D,
       "a heartbeat of an expired lease extends it instead of raising LeaseLostError",
       """                and state == "running" and holder == lease.worker):
            raise LeaseLostError""",
       """                and state == "running"):
            raise LeaseLostError"""),
    _m("durable_heartbeat_half_extension", _D,
       "a heartbeat extends the lease by half its length",
       """(tx.now() + seconds,""",
       """(tx.now() + seconds / 2,"""),
    _m("durable_heartbeat_hides_cancel", _D,
       "a heartbeat never says that a cancel was requested",
       """        return bool(cancel_requested)""",
       """        return False"""),
    # -- DurableScheduler: expiry and claims -----------------------------------------------------
    _m("durable_expiry_ignores_deadline", _D,
       "expiry is not conditional on the deadline: a live lease is taken from a working worker",
       """"holder IS NOT NULL AND deadline < ? ORDER BY seq\"""",
       """"holder IS NOT NULL AND deadline < ? + 1e9 ORDER BY seq\""""),
    _m("durable_expiry_keeps_holder", _D,
       "an expired lease keeps its holder: the version is never re-claimed, and the old "
       "attempt's report is still accepted",
       """tx.later("UPDATE task SET holder = NULL, deadline = NULL, expiries = expiries + 1 \"""",
       """tx.later("UPDATE task SET deadline = NULL, expiries = expiries + 1 \""""),
    _m("durable_reclaim_past_max_attempts", _D,
       "an expiry never fails the version: a task that kills its workers is re-claimed for ever",
       """            if attempt < self._max_attempts:
                tx.later(""",
       """            if True:
                tx.later("""),
    _m("durable_claim_on_worker_clock", _D,
       "a claim reads the worker's clock, not the store's: deadlines are written and judged "
       "on two clocks",
       """            now = tx.now()
            if overdue:""",
       """            now = time.time()
            if overdue:"""),
    _m("durable_claim_one_over_concurrency", _D,
       "claims take one version more than max_concurrency allows",
       """                want = min(want, self._max - running)""",
       """                want = min(want, self._max + 1 - running)"""),
    _m("durable_claim_newest_first", _D,
       "claims take the ready versions of largest seq first",
       """"ORDER BY claim_key DESC, claim_due, seq LIMIT ?) \"""",
       """"ORDER BY claim_key DESC, claim_due, seq DESC LIMIT ?) \""""),
    _m("durable_claim_after_close", _D,
       "claims still take ready versions after close()",
       """            if want and not closed:""",
       """            if want:"""),
    # -- DurableScheduler: the graph -------------------------------------------------------------
    _m("durable_no_fan_in", _D,
       "a success counts for none of its pending dependents: they wait for ever",
       """"state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = ?)",""",
       """"state = 'pending' AND id IN (SELECT task FROM dep WHERE dep = ? AND 0)","""),
    _m("durable_fail_does_not_block", _D,
       "a failure or an acknowledged cancel blocks none of its dependents",
       """        else:
            self._ended(tx, t)
        return TaskState(state)""",
       """        return TaskState(state)"""),
    _m("durable_replaced_success_still_counts", _D,
       "resubmitting a succeeded task leaves its waiting dependents counting the old success",
       """        if old_state == "succeeded":""",
       """        if False:"""),
    _m("durable_submit_skips_cycle_check", _D,
       "a submit after start() does not look for a cycle through the new version",
       """        cycle = self._path_to(tx, deps, task_id)""",
       """        cycle = None if call == "submit" else self._path_to(tx, deps, task_id)"""),
    _m("durable_retry_keeps_attempt", _D,
       "retry() leaves the new version with the old version's attempts",
       """"remaining_deps = ?, blocked_by = NULL, cancel_requested = 0, attempt = 0, \"""",
       """"remaining_deps = ?, blocked_by = NULL, cancel_requested = 0, \""""),
    _m("durable_close_inverts_cancel_pending", _D,
       "close(cancel_pending) cancels the waiting versions exactly when it should not",
       """                if cancel_pending:
                    n = tx.run(""",
       """                if not cancel_pending:
                    n = tx.run("""),
    _m("durable_reclaims_uncounted", _D,
       "stats().reclaimed does not count the attempts taken after an expiry",
       """            self._count(tx, "reclaimed", len(taken))""",
       """            self._count(tx, "reclaimed", 0)"""),
    # -- DurableScheduler: edge kinds, add_deps, input summaries (tests/durable/test_edges.py,
    # tests/durable/test_edge_mutants.py) --------------------------------------------------------
    _m("durable_optional_failure_blocks", _D,
       "blocking spreads along optional edges too: an optional parent's failure blocks the child",
       """"WHERE dep.dep = ? AND dep.optional = 0 AND x.state IN ('pending', 'ready')")""",
       """"WHERE dep.dep = ? AND x.state IN ('pending', 'ready')")"""),
    _m("durable_optional_end_not_settled", _D,
       "a parent's own end (fail, cancel, give-up) settles none of its optional edges: the "
       "child waits for ever",
       """        self._settle(tx, [t])
        self._settle_optional(tx, [t])""",
       """        self._settle(tx, [t])"""),
    _m("durable_add_deps_on_claimed_version", _D,
       "add_deps() is accepted on a ready or running version: edges are added to a version a "
       "claim took (or may take) without them",
       """            if state != "pending":
                raise InvalidTransitionError(f"{call}""",
       """            if state not in ("pending", "ready", "running"):
                raise InvalidTransitionError(f"{call}"""),
    _m("durable_add_deps_count_not_raised", _D,
       "add_deps() adds the edges but does not raise the count: the version runs before its "
       "new deps settle",
       """                     (added, len(opt_set), task_id))""",
       """                     (0, len(opt_set), task_id))"""),
    _m("durable_inputs_read_at_completion", _D,
       "the input summary of a claimed version is read from the store when asked, not kept "
       "from its claim: a parent retried since changes what the function was given",
       """"d.id = dep.dep WHERE dep.optional <> 0 AND x.attempt = 0 AND d.state IN \"""",
       """"d.id = dep.dep WHERE dep.optional <> 0 AND x.attempt >= 0 AND d.state IN \""""),
    _m("durable_replaced_end_keeps_optional_settled", _D,
       "resubmitting a failed, blocked or cancelled parent leaves its optional children "
       "counting the old end as settled",
       """        elif old_state in _DEAD:
            tx.later(""",
       """        elif False:
            tx.later("""),
    _m("durable_steps_claim_keeps_no_inputs", _DF,
       "the server-side claim keeps no input summary: a claimed version's function is told "
       "none of its optional parents' ends",
       """    IF with_inputs THEN""",
       """    IF false THEN"""),
    # -- DurableScheduler: a busy worker's claim skips the first look (tests/durable/test_time.py)
    _m("durable_claim_skips_the_first_look_when_idle", _D,
       "a claim on a store with a claim step never looks first: an idle worker's empty claim "
       "carries no due time, and each of its polls costs two round trips",
       """        if not (getattr(look, "full", False) and self._store.has_steps):""",
       """        if not self._store.has_steps:""",
       unit_tests=("tests/durable/test_time.py",)),
    _m("durable_claim_stays_busy_after_an_empty_claim", _D,
       "an empty answer of the claim step leaves the worker counted busy: every later claim "
       "skips the first look, and an idle worker never reads the next due time with its claim",
       """            look.full = len(rows) >= limit
            if look.full:  # as many as asked for: busy while they run""",
       """            look.full = look.full if not rows else len(rows) >= limit
            if look.full:  # as many as asked for: busy while they run""",
       unit_tests=("tests/durable/test_time.py",)),
    # -- DurableScheduler: the batch submit and the DAG path on the server (tests/durable/
    # test_bulk.py, tests/durable/test_bulk_mutants.py) -----------------------------------------
    _m("durable_submit_refusal_uncounted", _D,
       "a submit() refused for a cycle or an unknown dependency is not counted: stats() and "
       "signals() miss the graph configuration error",
       """        except _REFUSALS as error:
            self._count_refusal(error, [item])
            raise""",
       """        except _REFUSALS:
            raise""",
       unit_tests=("tests/durable/test_scheduler.py", "tests/durable/test_signals.py")),
    _m("durable_bulk_not_atomic", _D,
       "submit_many() commits each item in a transaction of its own: an item refused leaves "
       "the items before it stored",
       """        with self._counting_refusals(at), self._store.transaction() as tx:
            return self._submit_batch(tx, items, at)""",
       """        with self._counting_refusals(at):
            generations = []
            for item in items:
                with self._store.transaction() as tx:
                    generations += self._submit_batch(tx, [item], at)
            return generations"""),
    _m("durable_bulk_skips_cycle_check", _D,
       "submit_many() after start() looks for no cycle through its items: a batch closes one",
       """        if started:
            self._check_deps_known_and_acyclic(tx, item.call, task_id, dep_list, states)""",
       """        if started and item.call == "submit":
            self._check_deps_known_and_acyclic(tx, item.call, task_id, dep_list, states)
        elif started and any(d not in states for d in dep_list):
            raise UnknownDependencyError(f"{item.call}({task_id!r}): unknown dependencies",
                                         [(task_id, d) for d in dep_list if d not in states])"""),
    # -- DurableScheduler: the batch report and the worker's batches and prefetch (tests/durable/
    # test_batch_reports.py, tests/durable/test_batch_worker.py, tests/durable/
    # test_batch_mutants.py) -------------------------------------------------------------------
    _m("durable_batch_stops_at_refused_report", _D,
       "report_many() stops at the first refused report: the reports after a stale one are "
       "never made, and their leases are dropped unreported",
       """                answers.append(refused)
        return answers""",
       """                answers.append(refused)
                break
        return answers"""),
    _m("durable_steps_batch_fenced_on_first_lease", _DF,
       "the server-side batch complete fences only its first report: a stale lease later in "
       "the batch ends the version another attempt holds",
       """             WHERE id = t AND generation = p_generations[i] AND attempt = p_attempts[i]
                   AND state IS NOT DISTINCT FROM 'running' AND holder = workers_[i];""",
       """             WHERE id = t AND (i > 1 OR (generation = p_generations[i]
                   AND attempt = p_attempts[i] AND state = 'running'
                   AND holder = workers_[i]));"""),
    _m("durable_worker_batch_lost_on_exit", _DW,
       "a worker exiting drops the reports still pending in its batch: accepted work is lost, "
       "its leases expire and the versions run again",
       """                    if done.is_set():  # the exit: what is pending goes now
                        if not self._pending:
                            return
                        break""",
       """                    if done.is_set():  # the exit: what is pending goes now
                        return"""),
    _m("durable_worker_prefetched_not_heartbeated", _DW,
       "a worker heartbeats only the leases whose function started: a prefetched lease "
       "waiting in the queue expires and its version runs twice",
       """        attempts = self.held.attempts()
        if not attempts:""",
       """        attempts = [a for a in self.held.attempts() if a.started or a.pending]
        if not attempts:"""),
    _m("durable_heartbeat_many_stops_at_lost_lease", _D,
       "heartbeat_many() stops at the first lost lease: the live leases after it are not "
       "extended, and run out under their workers",
       """                except LeaseLostError as lost:  # its check changed nothing: go on
                    answers.append(lost)""",
       """                except LeaseLostError as lost:  # its check changed nothing: go on
                    answers.append(lost)
                    break""",
       unit_tests=("tests/durable/test_heartbeat_many.py",)),
    _m("durable_worker_idle_keeps_batch", _DW,
       "a worker whose claim finds nothing keeps its pending reports for the whole delay: the "
       "dependents they would make ready, and the slots their leases hold, wait for it",
       """                if (self.report_delay and self._nothing_due_before_the_batch()
                        and self.send_pending_now()):""",
       """                if (False
                        and self.send_pending_now()):""",
       unit_tests=("tests/durable/test_batch_worker.py",)),
    _m("durable_worker_waits_after_sending_its_batch", _DW,
       "a worker whose claim found nothing sends its pending reports, then waits idle before it "
       "claims again: each slot its own reports held stays empty for the wait",
       """                    continue  # what it could claim may have waited on those reports""",
       """                    pass  # what it could claim may have waited on those reports""",
       unit_tests=("tests/durable/test_batch_worker.py",)),
    _m("durable_worker_handoff_not_notified", _DW,
       "a claim hands its attempt to a slot thread waiting for one without waking it: the "
       "attempt is held, heartbeated and never run",
       """                self._handed.append(attempt)
                self._slots.notify()""",
       """                self._handed.append(attempt)""",
       unit_tests=("tests/durable/test_worker.py",)),
    _m("durable_worker_slot_threads_left", _DW,
       "the threads waiting for an attempt are never told that the loop ended: each run() "
       "leaves them behind",
       """            self.held.wait_idle()  # every function run, the queued ones too
            self._close_slots()""",
       """            self.held.wait_idle()  # every function run, the queued ones too""",
       unit_tests=("tests/durable/test_worker.py",)),
    _m("durable_steps_bulk_skips_cycle_check", _DF,
       "the server-side batch submit looks for no cycle: a batch (or a submit with deps) "
       "after start() closes one",
       """                RAISE SQLSTATE 'RSB01';  -- a cycle through t""",
       """                NULL;  -- a cycle through t"""),
    _m("durable_steps_bulk_not_atomic", _DF,
       "the server-side batch submit hands an item it cannot take to the client without "
       "undoing the items before it",
       """                    RAISE SQLSTATE 'RSB01';  -- an unknown dep""",
       """                    RETURN NULL;  -- an unknown dep"""),
    _m("durable_steps_bulk_optional_as_required", _DF,
       "the server-side batch submit counts an optional dep that ended otherwise than in "
       "success as unsettled: the child waits for ever",
       """                IF (d_ = ANY (opts_)
                    AND (dep_state IS NULL OR dep_state IN ('pending', 'ready', 'running')))""",
       """                IF (d_ = ANY (opts_)
                    AND dep_state IS DISTINCT FROM 'succeeded')"""),
    _m("durable_steps_complete_fan_in_required_only", _DF,
       "the server-side complete counts its success for the dependents of its required edges "
       "only: a child of an optional edge waits for ever",
       "FOR d_ IN SELECT task FROM dep WHERE dep = p_task ORDER BY task LOOP",
       "FOR d_ IN SELECT task FROM dep WHERE dep = p_task AND optional = 0 ORDER BY task LOOP"),
    # -- DurableScheduler: provenance (docs/durable.md; tests/durable/test_provenance.py,
    # tests/durable/test_provenance_mutants.py) ---------------------------------------------------
    _m("durable_provenance_path_skips_hops", _D,
       "a blocked version's path runs from the root straight to it: the versions between are "
       "left out",
       """            made[z] = {**before, "path": [*before["path"], z]}""",
       """            made[z] = {**before, "path": [before["path"][0], z]}"""),
    _m("durable_provenance_rewritten_by_second_cause", _D,
       "blocking spreads through versions already blocked: a second cause blocks them again, "
       "and writes their provenance over",
       """"WHERE dep.dep = ? AND dep.optional = 0 AND x.state IN ('pending', 'ready')")""",
       """"WHERE dep.dep = ? AND dep.optional = 0 AND x.state IN ('pending', 'ready', "
                   "'blocked')")"""),
    _m("durable_provenance_fail_drops_actor", _D,
       "a failure's record names no actor: the versions it blocks do not say which worker "
       "reported it",
       """t, lease.generation, state, lease.worker, _note_cut(error), now), t))""",
       """t, lease.generation, state, None, _note_cut(error), now), t))""",
       unit_tests=("tests/durable/test_provenance.py",)),
    _m("durable_provenance_kept_by_retry", _D,
       "retry() leaves each new version the record of the old one: a version that has not "
       "ended has a provenance",
       """"error = NULL, traceback = NULL, provenance = NULL, became_ready_at = ?, \"""",
       """"error = NULL, traceback = NULL, became_ready_at = ?, \""""),
    # -- DurableScheduler: signals per task type and tenant (docs/durable.md, Signals;
    # tests/durable/test_signals.py, tests/durable/test_signals_mutants.py) ----------------------
    _m("durable_signals_expiry_not_counted", _D,
       "an expiry that leaves the version running is not counted in its partition: the "
       "partitions' lease expiries fall short of stats().expired",
       """"UPDATE task SET holder = NULL, deadline = NULL, expiries = expiries + 1 \"""",
       """"UPDATE task SET holder = NULL, deadline = NULL, expiries = expiries \"""",
       unit_tests=("tests/durable/test_signals.py",)),
    _m("durable_signals_retry_drops_partition", _D,
       "retry() gives the new version no task type or tenant: its counts are charged to the "
       "unlabelled partition",
       """"claimed_at = NULL, retried = 1, first_claimed_at = NULL, expiries = 0, \"""",
       """"claimed_at = NULL, retried = 1, first_claimed_at = NULL, expiries = 0, "
                       "task_type = NULL, tenant = NULL, \"""",
       unit_tests=("tests/durable/test_signals.py",)),
    _m("durable_signals_replaced_version_forgotten", _D,
       "a version replaced by a resubmission leaves no row of its signals: the partitions "
       "count fewer submissions than stats()",
       """        tx.later(signal_rows.ARCHIVE, (task_id,))  # its signals outlive its row""",
       """        pass""",
       unit_tests=("tests/durable/test_signals.py",)),
    _m("durable_signals_reclaim_moves_first_claim", _D,
       "a re-claim after an expiry moves the version's first claim: its run time is measured "
       "from the last attempt, and its ready wait grows by the lost attempts",
       """"lease_seconds = ?, claimed_at = ? WHERE id = ?",
                         (a + 1, worker, deadline, lease, now, t))""",
       """"lease_seconds = ?, claimed_at = ?, first_claimed_at = ? WHERE id = ?",
                         (a + 1, worker, deadline, lease, now, now, t))""",
       unit_tests=("tests/durable/test_signals.py",)),
    _m("durable_signals_stale_report_not_counted", _D,
       "a report refused by the fence is not counted in the store",
       """                self._refused(tx, self._labels(tx, lease.task_id), "stale_callbacks")""",
       """                pass""",
       unit_tests=("tests/durable/test_signals.py",)),
    _m("durable_steps_signals_claim_keeps_no_first_claim", _DF,
       "the server-side claim does not write the first claim's time: ready wait and run time "
       "of the versions it claims are lost",
       """               deadline = now_ + p_lease, lease_seconds = p_lease, claimed_at = now_,
               first_claimed_at = now_
         WHERE id = chosen[i]""",
       """               deadline = now_ + p_lease, lease_seconds = p_lease, claimed_at = now_
         WHERE id = chosen[i]""",
       unit_tests=("tests/durable/test_signals.py",)),
    # -- DurableScheduler: due times and priorities (docs/time.md; tests/durable/test_time.py) --
    _m("durable_claim_one_tick_early", _D,
       "a claim takes a version one second before its due time",
       """"FROM task WHERE state = 'ready' AND +due <= ? \"""",
       """"FROM task WHERE state = 'ready' AND +due <= ? + 1 \""""),
    _m("durable_claim_priority_reversed", _D,
       "claims take the smallest claim key first: the lowest priority",
       """"ORDER BY claim_key DESC, claim_due, seq LIMIT ?) \"""",
       """"ORDER BY claim_key, claim_due, seq LIMIT ?) \""""),
    _m("durable_aging_never_lifts", _D,
       "the claim key ignores the due time: a low priority waits for ever behind higher ones",
       """        return priority * self._aging - due, 0.0""",
       """        return priority * self._aging, 0.0"""),
    _m("durable_run_at_not_clamped", _D,
       "a run_at in the past is kept as the due time: the version jumps the queue",
       """        due = max(at, now) if at is not None else now + (wait or 0.0)""",
       """        due = at if at is not None else now + (wait or 0.0)"""),
    _m("durable_retry_keeps_old_due", _D,
       "retry() leaves the new versions with the old version's due time",
       """"ended_at = NULL, due = ?, claim_key = ?, claim_due = ? \"""",
       """"ended_at = NULL, due = due + 0 * ?, claim_key = ?, claim_due = ? \""""),
    # -- recurring schedules (docs/time.md; tests/durable/test_schedules.py) ----------------------
    _m("schedules_next_slot_not_written", _SC,
       "the decision pass does not write the next slot back: the next pass, in this process or "
       "another, decides the same slots again",
       """               (new.next, new.held, new.unlisted,""",
       """               (state.next, new.held, new.unlisted,"""),
    _m("schedules_running_run_not_unfinished", _SC,
       "a run that is running counts as finished: under skip a slot runs beside it",
       """_UNFINISHED = "('pending', 'ready', 'running')""",
       """_UNFINISHED = "('pending', 'ready')"""),
    _m("schedules_pause_ignored", _SC,
       "the decision pass reads every schedule as running: a paused schedule still runs",
       """ScheduleState(timing, Policy(overlap, catchup), next_slot, held, bool(paused),""",
       """ScheduleState(timing, Policy(overlap, catchup), next_slot, held, False,"""),
    _m("schedules_slot_due_never_kept", _SC,
       "meta.slot_due is never set to the next slot: claims never see a slot owed, and only "
       "tick() and schedule changes decide slots",
       """NO_SLOT if row is None or row[0] is None else float(row[0]))""",
       """NO_SLOT)"""),
    _m("schedules_run_decided_not_submitted", _SC,
       "a run decision is written but its version is not submitted",
       """                submit_run(tx, task, fn, args_text, int(priority))
""",
       """                pass
"""),
    _m("schedules_run_submitted_not_recorded", _SC,
       "a run is submitted but its decision is not recorded in the store's history",
       """            record(tx, step, schedule=name, slot=slot, **params)""",
       """            if decision != "run":
                record(tx, step, schedule=name, slot=slot, **params)"""),
    _m("schedules_run_submitted_without_its_slot", _SC,
       "a run is submitted but its slot's row is not written: schedules() never shows it",
       """            if "count" not in params:  # a stretch jumped over""",
       """            if "count" not in params and task is None:  # a stretch jumped over"""),
    _m("schedule_catchup_off_by_one", _E,
       "a slot exactly catchup seconds old is missed",
       """    if policy.catchup is not None and now - slot > policy.catchup:""",
       """    if policy.catchup is not None and now - slot >= policy.catchup:"""),
    _m("schedule_skip_overlaps", _E,
       "under skip one unfinished run is not enough to skip: two runs overlap",
       """    if unfinished > 0 and policy.overlap == "skip":""",
       """    if unfinished > 1 and policy.overlap == "skip":"""),
    _m("schedule_held_never_released", _E,
       "a held slot is never released: buffer_one runs no slot after its first run",
       """    return "run" if unfinished == 0 else "hold""",
       """    return "hold"""),
    _m("schedule_passes_over_owed_slots", _E,
       "after a decision the next slot is the one after now, not after the slot: the slots "
       "owed after a downtime are passed over",
       """        state = replace(state, next=timing.slot_after(slot))""",
       """        state = replace(state, next=timing.slot_after(now))"""),
    _m("schedule_cron_drops_second_pass", _E,
       "a cron time on the second pass of a repeated hour is dropped: a daylight-saving day "
       "loses a slot",
       """            if s > last:""",
       """            if s > last and not moment.fold:"""),
    _m("schedule_paused_still_runs", _E,
       "a paused schedule decides its slots by its policy: it still runs",
       """    if paused:
        return "skipped""",
       """    if False:
        return "skipped"""),
    # -- the SQLite store ------------------------------------------------------------------------
    _m("durable_store_deferred_begin", _DS,
       "a transaction that writes begins deferred: it reads, then fails to upgrade to the write "
       "lock when another process wrote in between",
       """                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")""",
       """                conn.execute("BEGIN")"""),
    _m("durable_store_wall_clock_only", _DS,
       "a virtual-clock store still reads the wall clock: tick() moves no deadline",
       """        self.clock_sql = _VIRTUAL_NOW""",
       """        self.clock_sql = _WALL_NOW"""),
    # -- the counters: rows of shards, summed (docs/durable.md, Counters) -------------------------
    _m("durable_store_counter_overwrites", _DS,
       "a step's count replaces its shard's row instead of adding to it: a counter shows the "
       "last step's count",
       """"n = counter.n + excluded.n\"""",
       """"n = excluded.n\"""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_store_counter_one_shard", _DS,
       "a counter is read as its largest shard, not their sum: on PostgreSQL, the counts of "
       "the other server processes are lost",
       """COUNTERS_READ = "SELECT name, CAST(SUM(n) AS BIGINT) FROM counter GROUP BY name\"""",
       """COUNTERS_READ = "SELECT name, CAST(MAX(n) AS BIGINT) FROM counter GROUP BY name\"""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_counter_overwrites", _DF,
       "a server-side step's count replaces its shard's row instead of adding to it",
       """        ON CONFLICT (name, shard) DO UPDATE SET n = counter.n + excluded.n;""",
       """        ON CONFLICT (name, shard) DO UPDATE SET n = excluded.n;""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    # -- writers without one lock (docs/durable.md; tests/durable/test_rowlocks.py) --------------
    _m("durable_steps_claim_not_skip_locked", _DF,
       "the server-side claim picks the first ready version without locking it: a claim beside "
       "another takes the version the other holds, read stale, and queues for its row",
       """                    FOR UPDATE SKIP LOCKED) AS ready);""",
       """                    ) AS ready);""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_complete_fenced_before_lock", _DF,
       "the server-side complete judges the lease on the row as read before its lock: a repeat "
       "queued behind the first report succeeds again and counts down the dependents twice",
       """    UPDATE task SET state = 'succeeded', holder = NULL, deadline = NULL,
           ended_attempt = p_attempt, ended_at = now_, result = p_result, error = NULL
     WHERE id = p_task AND generation = p_generation AND attempt = p_attempt
           AND state IS NOT DISTINCT FROM 'running' AND holder = p_worker;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- Its slot row is free.""",
       """    IF NOT EXISTS (SELECT 1 FROM task WHERE id = p_task AND generation = p_generation
                   AND attempt = p_attempt AND state = 'running' AND holder = p_worker) THEN
        RETURN false;
    END IF;
    UPDATE task SET state = 'succeeded', holder = NULL, deadline = NULL,
           ended_attempt = p_attempt, ended_at = now_, result = p_result, error = NULL
     WHERE id = p_task;
    -- Its slot row is free.""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_complete_keeps_slot", _DF,
       "the server-side complete leaves its slot row held: each success takes a slot for good",
       """    -- Its slot row is free.
    UPDATE run_slot SET task = NULL, generation = NULL
     WHERE task = p_task AND generation = p_generation;""",
       """    -- Its slot row is free.""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_complete_reads_running_index", _DF,
       "the server-side complete fences on state = 'running': a plan made on statistics taken "
       "while few versions ran finds the row through every running version's entry",
       """           AND state IS NOT DISTINCT FROM 'running' AND holder = p_worker;""",
       """           AND state = 'running' AND holder = p_worker;""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_batch_complete_reads_running_index", _DF,
       "the server-side batch complete fences on state = 'running': each report's row found "
       "through every running version's entry",
       """                   AND state IS NOT DISTINCT FROM 'running' AND holder = workers_[i];""",
       """                   AND state = 'running' AND holder = workers_[i];""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_claim_reads_slots_whole", _DF,
       "the server-side claim may read tables whole: a plan made while run_slot had one page "
       "reads every slot row for each version taken",
       """               o_args text, o_deadline float8)
LANGUAGE plpgsql SET enable_seqscan = off AS $$""",
       """               o_args text, o_deadline float8)
LANGUAGE plpgsql AS $$""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_complete_reads_slots_whole", _DF,
       "the server-side complete may read tables whole: each report reads every slot row",
       """        p_attempt bigint, p_worker text, p_result text) RETURNS boolean
LANGUAGE plpgsql SET enable_seqscan = off AS $$""",
       """        p_attempt bigint, p_worker text, p_result text) RETURNS boolean
LANGUAGE plpgsql AS $$""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_batch_complete_reads_slots_whole", _DF,
       "the server-side batch complete may read tables whole: each report reads every slot row",
       """        p_attempts bigint[], p_workers text[], p_results text[]) RETURNS boolean
LANGUAGE plpgsql SET enable_seqscan = off AS $$""",
       """        p_attempts bigint[], p_workers text[], p_results text[]) RETURNS boolean
LANGUAGE plpgsql AS $$""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_claimable_reads_ready_whole", _DF,
       "the claimable check may read task whole: an idle worker's or a wake-up's look for a "
       "ready version reads past every version claimed so far",
       """LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$""",
       """LANGUAGE plpgsql STABLE AS $$""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_pg_end_keeps_slot", _DP,
       "a version that leaves 'running' in a transaction of the client (a failure, a cancel, "
       "an expiry for good) keeps its slot row",
       "WHERE task IS NOT NULL AND NOT EXISTS ",
       "WHERE false AND NOT EXISTS ",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_fan_in_outside_row_lock", _DF,
       "the server-side complete counts down each dependent from its count as read before the "
       "row's lock: of two completes of its deps at once, one is lost",
       """        UPDATE task SET remaining_deps = remaining_deps - 1,
               became_ready_at = CASE WHEN remaining_deps = 1 THEN p_now
                                      ELSE became_ready_at END,
               state = CASE WHEN remaining_deps = 1 THEN 'ready' ELSE state END
         WHERE id = d_ AND state = 'pending';""",
       """        UPDATE task SET remaining_deps = x.r - 1,
               became_ready_at = CASE WHEN x.r = 1 THEN p_now ELSE became_ready_at END,
               state = CASE WHEN x.r = 1 THEN 'ready' ELSE state END
          FROM (SELECT remaining_deps AS r FROM task WHERE id = d_ AND state = 'pending') AS x
         WHERE task.id = d_;""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_submit_reads_deps_unlocked", _DF,
       "the server-side submit reads its dependencies' states without FOR SHARE: a report of "
       "one committed meanwhile fans in before the new edge exists, and the child waits for "
       "ever on a dep it counted as running",
       """        SELECT state INTO dep_state FROM task WHERE id = d_ FOR SHARE;""",
       """        SELECT state INTO dep_state FROM task WHERE id = d_;""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_submit_no_wake_for_a_passed_over_dep", _DF,
       "a submit that held a ready dependency's row (claims passed over it) wakes nobody at "
       "its commit: a worker whose claim found nothing sleeps until its poll",
       """    ELSIF ready OR locked_ready THEN""",
       """    ELSIF ready THEN""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_submit_seq_unlocked", _DF,
       "the server-side submit reads next_seq without locking its row: two submits at once "
       "take one seq number",
       """WHERE key = 'next_seq' FOR UPDATE;""",
       """WHERE key = 'next_seq';""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_submit_shared_over_a_stored_id", _DF,
       "the submit under the shared lock takes an id stored meanwhile as new: it inserts a "
       "second row for it (a duplicate key) instead of leaving the replacement to the client",
       """            IF old_state = 'running' OR (shared_ AND FOUND) THEN""",
       """            IF old_state = 'running' THEN""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    # -- the PostgreSQL store and its server-side steps ------------------------------------------
    _m("durable_pg_keeps_stale_wakeups", _DP,
       "notifications that arrived before a claim looked still wake the next wait: idle "
       "workers keep looking for what they have already taken",
       """                for _ in self._listener.notifies(timeout=0.0):
                    pass""",
       """                pass"""),
    _m("durable_pg_sends_to_ended_connection", _DP,
       "a step is sent on a pooled connection the server has ended: the first step after a "
       "server restart fails",
       """            ready, _, _ = select.select([conn.pgconn.socket], [], [], 0)""",
       """            ready = []"""),
    _m("durable_steps_claim_newest_first", _DF,
       "the server-side claim takes the ready versions of largest seq first",
       """ORDER BY claim_key DESC, claim_due, seq LIMIT p_want""",
       """ORDER BY claim_key DESC, claim_due, seq DESC LIMIT p_want"""),
    _m("durable_steps_claim_skips_expiry", _DF,
       "the server-side claim takes ready versions while a lease is past its deadline: the "
       "dead worker's version waits until nothing else is ready",
       """            OR EXISTS (SELECT 1 FROM task WHERE state = 'running'
                       AND (holder IS NULL OR deadline < now_)) THEN""",
       """            THEN"""),
    _m("durable_steps_claim_one_over_concurrency", _DF,
       "the server-side claim makes one slot row more than max_concurrency: one version more "
       "runs",
       """    IF cardinality(slots) < p_want AND (SELECT count(*) FROM run_slot) < p_max THEN
        WITH made AS (
            INSERT INTO run_slot (n)
                SELECT g FROM generate_series(1, p_max) AS g""",
       """    IF cardinality(slots) < p_want AND (SELECT count(*) FROM run_slot) <= p_max THEN
        WITH made AS (
            INSERT INTO run_slot (n)
                SELECT g FROM generate_series(1, p_max + 1) AS g""",
       unit_tests=("tests/durable/test_rowlocks.py",)),
    _m("durable_steps_complete_ignores_attempt", _DF,
       "the server-side complete is fenced by generation and worker only",
       """     WHERE id = p_task AND generation = p_generation AND attempt = p_attempt""",
       """     WHERE id = p_task AND generation = p_generation"""),
    _m("durable_steps_no_fan_in", _DF,
       "a success completed on the server counts for none of its pending dependents",
       """         WHERE id = d_ AND state = 'pending';""",
       """         WHERE false;"""),
    _m("durable_steps_replaced_success_still_counts", _DF,
       "a submit on the server that replaces a success leaves the waiting dependents counting it",
       """            IF old_state = 'succeeded' THEN
                -- The replaced success""",
       """            IF false THEN
                -- The replaced success"""),
    _m("durable_steps_claim_one_tick_early", _DF,
       "the server-side claim takes a version one second before its due time",
       """FROM (SELECT id FROM task WHERE state = 'ready' AND due <= p_now""",
       """FROM (SELECT id FROM task WHERE state = 'ready' AND due <= p_now + 1"""),
    _m("durable_steps_claim_priority_reversed", _DF,
       "the server-side claim takes the smallest claim key first: the lowest priority",
       """ORDER BY claim_key DESC, claim_due, seq LIMIT p_want""",
       """ORDER BY claim_key, claim_due, seq LIMIT p_want"""),
    _m("durable_steps_aging_never_lifts", _DF,
       "a submit on the server makes a claim key that ignores the due time",
       """ELSE p_priorities[i] * p_aging - due_ END""",
       """ELSE p_priorities[i] * p_aging END"""),
    _m("durable_steps_run_at_not_clamped", _DF,
       "a submit on the server keeps a run_at in the past as the due time",
       """THEN greatest(p_run_ats[i], now_)""",
       """THEN p_run_ats[i]"""),
    _m("durable_steps_wake_whenever", _DF,
       "every step that may make a version claimable wakes the idle workers, claimable or not",
       """ AND refsched_claimable(p_virtual, p_max) THEN""",
       """ THEN"""),
)

# Wake-ups and notifications: each bug leaves a thread waiting for an event that happened.
# The wake-up tests (tests/<system>/test_wakeups.py) block a thread first, then make the one change
# that must release it.
WAKEUPS: tuple[Mutant, ...] = (
    _m('durable_submit_no_wake', _D,
       'a client-side submit of a ready version after start wakes nobody',
       """            tx.wake(self._max, always=due > now)""",
       """            pass"""),
    _m('durable_start_no_wake', _D, 'start() wakes nobody for the versions already ready',
       """            self._step(tx, "Start")
            tx.wake(self._max)""",
       """            self._step(tx, "Start")"""),
    _m('durable_claim_leftover_no_wake', _D, 'a client-side claim that left work wakes nobody',
       """            if taken:
                tx.wake(self._max)  # what it left is for the next idle worker""",
       """            if taken:
                pass"""),
    _m('durable_expire_no_wake', _D, 'expire() wakes nobody for what can be re-claimed',
       """            self._expire(tx, tx.now())
            tx.wake(self._max)  # what expired can be re-claimed""",
       """            self._expire(tx, tx.now())"""),
    _m('durable_end_no_wake', _D, 'a client-side complete/fail wakes nobody',
       """        tx.wake(self._max)  # a slot is free, and dependents may be ready""",
       """        pass"""),
    _m('durable_retry_no_wake', _D, 'retry() wakes nobody',
       """            self._step(tx, "Retry", t=task_id)
            tx.wake(self._max)""",
       """            self._step(tx, "Retry", t=task_id)"""),
    _m('durable_steps_submit_no_wake', _DF, 'the server-side submit wakes nobody',
       """        PERFORM refsched_wake(p_virtual, p_channel, p_max);
    END IF;
    RETURN generations;""",
       """        NULL;
    END IF;
    RETURN generations;"""),
    _m('durable_steps_claim_no_wake', _DF, 'the server-side claim that left work wakes nobody',
       """                                               'chosen', to_json(chosen))::text, now_);
    END IF;
    PERFORM refsched_wake(p_virtual, p_channel, p_max);""",
       """                                               'chosen', to_json(chosen))::text, now_);
    END IF;"""),
    _m('durable_steps_complete_no_wake', _DF, 'the server-side complete wakes nobody',
       """    PERFORM refsched_count('succeeded', 1);
    PERFORM refsched_wake(p_virtual, p_channel, p_max);""",
       """    PERFORM refsched_count('succeeded', 1);"""),
    _m('durable_steps_claimable_ignores_free_slot', _DF, 'claimable though every slot is taken',
       """            AND (SELECT count(*) FROM task WHERE state = 'running') < p_max);""",
       """            AND (SELECT count(*) FROM task WHERE state = 'running') <= p_max);"""),
    _m('durable_next_due_unknown', _D,
       'the next due time is never known: an idle worker polls for delayed work, and claims it '
       'up to a poll late',
       """        return min(waits) if waits else None""",
       """        return None"""),
    _m('durable_claim_look_no_due', _D,
       'a claim that takes nothing does not tell the next due time: an idle worker polls for '
       'delayed work, and claims it up to a poll late',
       """        due_in = (min(waits) if waits else None) if look_ahead else NOT_LOOKED""",
       """        due_in = None if look_ahead else NOT_LOOKED"""),
    _m('durable_steps_delayed_submit_no_wake', _DF,
       'a submit on the server of a version not yet due wakes nobody: a sleeping worker misses '
       'a due time sooner than the one it waits for',
       """            PERFORM pg_notify(p_channel, '');
        END IF;
    ELSIF ready OR locked_ready THEN""",
       """            NULL;
        END IF;
    ELSIF ready OR locked_ready THEN"""),
    _m('durable_tick_no_wake', _D, 'tick() wakes nobody for the versions it made due',
       """            tx.wake(self._max)  # versions may have come due""",
       """            pass"""),
    _m('durable_steps_claimable_counts_undue', _DF,
       'a version not yet due counts as claimable: every step wakes the idle workers for work '
       'none of them may take',
       """            AND EXISTS (SELECT 1 FROM task WHERE state = 'ready' AND due <= now_)""",
       """            AND EXISTS (SELECT 1 FROM task WHERE state = 'ready')"""),
    # -- who is told: the idle workers' rows (steps_postgres.py, idle_listener) ---------------
    _m('durable_steps_idle_without_lock', _DF,
       'a worker goes idle without the store\'s lock: a step open meanwhile neither sees its '
       'row nor has committed when it looks, and the worker sleeps through what it made',
       """    PERFORM pg_advisory_xact_lock(p_lock);
    DELETE FROM idle_listener""",
       """    DELETE FROM idle_listener"""),
    _m('durable_steps_idle_waits_unbounded', _DF,
       'going idle waits for the store\'s lock as long as a stopped client holds it, past '
       'the wait\'s timeout',
       """PERFORM set_config('lock_timeout',""",
       """PERFORM set_config('application_name',"""),
    _m('durable_steps_idle_ignores_due_soon', _DF,
       'going idle ignores a version that comes due within the wait: the worker sleeps past '
       'it, told by nobody',
       """                         <= refsched_now(p_virtual) + p_within, false)""",
       """                         <= refsched_now(p_virtual), false)"""),
    _m('durable_steps_idle_keeps_ended_sessions', _DF,
       'the rows of sessions that ended stay: steps notify for workers long gone',
       """    DELETE FROM idle_listener
     WHERE pid NOT IN (SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL);""",
       """    DELETE FROM idle_listener WHERE false;"""),
    _m('durable_steps_wake_ignores_idle_rows', _DF,
       'a step notifies whenever a version is claimable, idle workers or not: every step of a '
       'busy store queues for the notification lock',
       """IF EXISTS (SELECT 1 FROM idle_listener) AND refsched_claimable(""",
       """IF refsched_claimable("""),
    _m('durable_postgres_wait_never_idles', _DP,
       'wait_for_work() writes no idle row: steps tell nobody, and the worker waits out its '
       'timeout',
       """if not self._idle and self._steps_ready and max_concurrency""",
       """if False and self._steps_ready and max_concurrency"""),
    _m('durable_postgres_busy_keeps_the_row', _DP,
       'busy() keeps the listener\'s idle row: steps notify for a worker that is not waiting',
       """WHERE pid = pg_backend_pid()")
        except""",
       """WHERE false")
        except"""),
    _m('durable_busy_after_a_short_claim', _D,
       'a claim of fewer than asked ends the idle row: the worker, still hungry, is told '
       'nothing until its next wait goes idle again',
       """            if look.full:  # as many as asked for: busy while they run""",
       """            if rows:"""),
    _m('durable_postgres_wait_never_hears', _DP,
       'wait_for_work() hears no notification: it waits out its timeout',
       """                for _ in self._listener.notifies(timeout=max(0.0, timeout), stop_after=1):
                    return True""",
       """                for _ in self._listener.notifies(timeout=max(0.0, timeout), stop_after=1):
                    pass"""),
)

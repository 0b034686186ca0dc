"""The mutation catalogue of the TaskScheduler and its Runner: seeded bugs of ``refsched/dag/``.

Each is a source patch that the verification layers must kill (:mod:`refsched.verify.mutants` runs
them; docs/mutants.md has the last run). ``MODULES`` names the files they patch.
"""

from __future__ import annotations

from refsched.verify.mutant import Mutant
from refsched.verify.mutant import mutant as _m

MODULES = {"scheduler": "refsched.dag.scheduler", "runner": "refsched.dag.runner",
           "signals": "refsched.dag.signals"}
"""The files this catalogue patches: a key (a mutant's ``file``) to its module."""

_S, _R, _SG = "scheduler", "runner", "signals"

CATALOGUE: tuple[Mutant, ...] = (
    # -- TaskScheduler: locking ----------------------------------------------------------------
    _m("claim_outside_lock", _S, "ready() claims under a lock of its own, not the scheduler's",
       """        lock = self._lock
        lock.acquire()
        try:
            if not self._started:
                raise InvalidTransitionError("ready(): the scheduler is not started")""",
       """        lock = sync.Lock()
        lock.acquire()
        try:
            if not self._started:
                raise InvalidTransitionError("ready(): the scheduler is not started")""",
       ),
    _m("claim_check_then_act", _S,
       "ready() counts the free slots and ready versions, drops the lock, then claims that many",
       """            heap = self._heap
            state = self._state
            claimed = self._claims""",
       """            lock.release()
            lock.acquire()
            heap = self._heap
            state = self._state
            claimed = self._claims"""),
    _m("dependents_released_before_state_write", _S,
       "complete() readies the dependents, drops the lock, and only then marks the version "
       "succeeded",
       """                if newly_ready:
                    self._ready_count += newly_ready
            if self._recorder is not None:
                self._record("Complete",""",
       """                if newly_ready:
                    self._ready_count += newly_ready
            state[row] = _RUNNING
            lock.release()
            lock.acquire()
            state[row] = _SUCCEEDED
            if self._recorder is not None:
                self._record("Complete","""),
    _m("success_counted_outside_lock", _S,
       "complete() counts the success after releasing the lock (a lost update under contention)",
       """            self._running -= 1
            self._n_succeeded += 1""",
       """            self._running -= 1
            lock.release()
            self._n_succeeded += 1
            lock.acquire()"""),
    # -- TaskScheduler: counts and order -------------------------------------------------------
    _m("double_decrement", _S, "complete() decrements a dependent's remaining count twice",
       """                    for x in dependents:
                        if state[x] == _PENDING:
                            left = remaining[x] - 1
                            remaining[x] = left
                            if not left:
                                state[x] = _READY
                                stamp[x] = now
                                _heappush(heap, x)
                                newly_ready += 1
                else:""",
       """                    for x in dependents:
                        if state[x] == _PENDING:
                            left = remaining[x] - 2 if remaining[x] > 1 else 0
                            remaining[x] = left
                            if not left:
                                state[x] = _READY
                                stamp[x] = now
                                _heappush(heap, x)
                                newly_ready += 1
                else:"""),
    _m("double_decrement_with_signals", _S,
       "with signals() kept, complete() decrements a dependent's remaining count twice (the "
       "release loop written out for the signals)",
       """                            left = remaining[x] - 1
                            remaining[x] = left
                            if not left:
                                state[x] = _READY
                                stamp[x] = now
                                _heappush(heap, x)
                                newly_ready += 1
                                released.append(x)""",
       """                            left = remaining[x] - 2 if remaining[x] > 1 else 0
                            remaining[x] = left
                            if not left:
                                state[x] = _READY
                                stamp[x] = now
                                _heappush(heap, x)
                                newly_ready += 1
                                released.append(x)"""),
    _m("concurrency_off_by_one", _S, "ready() allows max_concurrency + 1 running versions",
       """            free = self._max - self._running""",
       """            free = self._max - self._running + 1"""),
    _m("complete_keeps_running_count", _S, "complete() does not give the slot back",
       """            self._running -= 1
            self._n_succeeded += 1""",
       """            self._n_succeeded += 1"""),
    _m("ready_order_not_by_seq", _S,
       "ready() pops the heap's last entry instead of the smallest seq",
       """                    row = _heappop(heap)""",
       """                    row = heap.pop()"""),
    _m("claim_skips_state_check", _S,
       "ready() claims a stale heap entry whose version was cancelled or blocked meanwhile",
       """                if state[row] != _READY:""",
       """                if state[row] in (_RUNNING, _SUCCEEDED, _FAILED, _DEAD):"""),
    _m("cancel_keeps_ready_count", _S, "cancel() of a ready version leaves the ready count",
       """            if st <= _READY:
                if st == _READY:
                    self._ready_count -= 1""",
       """            if st <= _READY:
                if st == _READY:
                    pass"""),
    _m("close_keeps_ready_count", _S, "close(cancel_pending) leaves the ready count as it was",
       """                    self._n_cancelled += cancelled
                    self._ready_count = 0""",
       """                    self._n_cancelled += cancelled"""),
    _m("complete_visits_ready_dependents", _S,
       "complete() steps ready dependents as well as pending ones",
       """                    # signals: this loop runs once per edge of every completion.
                    for x in dependents:
                        if state[x] == _PENDING:""",
       """                    # signals: this loop runs once per edge of every completion.
                    for x in dependents:
                        if state[x] <= _READY:""",
       equivalent="a dependent of a running version has a dependency not succeeded, so it is "
                  "pending (or dead), never ready: both guards pick the same versions"),
    # -- TaskScheduler: generations and callbacks ----------------------------------------------
    _m("complete_skips_generation_check", _S,
       "complete() of an older generation completes the running current version",
       """ or self._gen[row] != generation
                    or state[row] != _RUNNING):""",
       """
                    or state[row] != _RUNNING):"""),
    _m("stale_generation_accepted", _S,
       "fail(), acknowledge_cancel() and cancel(t, g) accept an older generation",
       """        if generation != current:
            self._n_stale += 1""",
       """        if generation > current:
            self._n_stale += 1"""),
    _m("cancel_of_running_ignored", _S, "cancel() of a running version sets no request",
       """            if st == _RUNNING and row not in self._cancel_requested:""",
       """            if st == _RUNNING and row in self._cancel_requested:"""),
    _m("resubmit_over_running", _S, "submit() replaces a running version under its worker",
       """            if old is not None and state[old] == _RUNNING:
                _check_deps(task_id, deps, dep_t)""",
       """            if (old is not None and state[old] == _RUNNING
                    and old in self._cancel_requested):
                _check_deps(task_id, deps, dep_t)"""),
    _m("submit_accepts_a_repeated_dep", _S,
       "submit() takes a dep given twice as one edge instead of refusing the call",
       """                if len(dep_rows) != len(dep_t) or None in dep_rows or old in dep_rows:""",
       """                if None in dep_rows or old in dep_rows:"""),
    _m("submit_accepts_itself_as_dep", _S,
       "a resubmitted task may depend on itself: a cycle through its own replaced version",
       """                if len(dep_rows) != len(dep_t) or None in dep_rows or old in dep_rows:""",
       """                if len(dep_rows) != len(dep_t) or None in dep_rows:"""),
    _m("resubmit_keeps_dependents_ready", _S,
       "replacing a succeeded version leaves its ready dependents ready",
       """                    if old_state == _SUCCEEDED:""",
       """                    if old_state == _FAILED:"""),
    # -- TaskScheduler: blocking (Settle) ------------------------------------------------------
    _m("settle_one_level_early", _S,
       "blocking stops one level early: dependents of the second level stay pending",
       """        for m in order:  # grows while iterating: breadth-first""",
       """        for m in list(order):  # grows while iterating: breadth-first"""),
    _m("settle_direct_dependents_only", _S, "blocking reaches only the direct dependents",
       """        for m in order:  # grows while iterating: breadth-first""",
       """        for m in order[:0]:  # grows while iterating: breadth-first"""),
    _m("settle_blocks_running", _S, "blocking spreads into running versions beyond the first level",
       """            for m in order:  # grows while iterating: breadth-first
                for x in dependents[m] or ():
                    st = state[x]
                    if st <= _READY:""",
       """            for m in order:  # grows while iterating: breadth-first
                for x in dependents[m] or ():
                    st = state[x]
                    if st <= _RUNNING:"""),
    _m("blocked_by_latest_cause", _S,
       "a blocked version names its dead dependency with the largest seq, not the smallest",
       """(cause < 0 or r < cause)""",
       """(cause < 0 or r > cause)"""),
    _m("acknowledge_cancel_skips_settle", _S,
       "a cancelled running version leaves its dependents pending",
       """                self._endings.append((self._ids[row], self._gen[row], _STATES[to]))
            self._settle((row,), ())""",
       """                self._endings.append((self._ids[row], self._gen[row], _STATES[to]))
            if to == _FAILED:
                self._settle((row,), ())"""),
    _m("submit_onto_dead_dep_not_blocked", _S,
       "a version submitted onto a failed dependency stays pending",
       """            if dead:
                self._settle((), (row,))
            if self._recorder is not None:
                if opt_s is None:""",
       """            if dead and remaining > 1:
                self._settle((), (row,))
            if self._recorder is not None:
                if opt_s is None:"""),
    # -- TaskScheduler: retry, start, close ----------------------------------------------------
    _m("retry_forgets_blocked_descendants", _S,
       "retry() renews only the task, not the versions blocked because of it",
       """            for m in members:  # grows while iterating""",
       """            for m in members[:0]:  # grows while iterating"""),
    _m("retry_renews_direct_children_only", _S,
       "retry() renews the versions blocked by the task but not those blocked through them",
       """                        if blocked_by.get(x) == m and x != root:""",
       """                        if blocked_by.get(x) == m and x != root and m == root:"""),
    _m("retry_of_succeeded", _S, "retry() accepts a succeeded version",
       """            if state[root] < _FAILED:
                raise InvalidTransitionError(""",
       """            if state[root] < _SUCCEEDED:
                raise InvalidTransitionError("""),
    _m("retry_keeps_seq_order_flag", _S,
       "retry() renumbers versions but keeps the graph marked seq-ordered",
       """            self._seq_ordered = False
            self._n_retried += len(members)""",
       """            self._n_retried += len(members)"""),
    _m("start_skips_cycle_search", _S, "start() searches for cycles only when none can exist",
       """            if not self._seq_ordered:
                cycles = _find_cycles(""",
       """            if self._seq_ordered:
                cycles = _find_cycles("""),
    _m("close_cancels_only_pending", _S, "close(cancel_pending) leaves ready versions ready",
       """                    for row, st in enumerate(state):  # in row order: seq order
                        if st <= _READY:""",
       """                    for row, st in enumerate(state):  # in row order: seq order
                        if st == _PENDING:"""),
    _m("close_drops_endings", _S,
       "close() cancels pending versions without reporting them as endings",
       """                            if endings is not None:
                                endings.append(""",
       """                            if endings is None:
                                endings.append("""),
    _m("close_counts_one_cancel", _S,
       "close(cancel_pending) adds one to the cancelled count, however many versions it cancels",
       """                    self._n_cancelled += cancelled""",
       """                    self._n_cancelled += 1 if cancelled else 0"""),
    # -- TaskScheduler: stats() ----------------------------------------------------------------
    _m("claimed_uncounts_stopped_runs", _S,
       "stats().claimed leaves out the versions that failed or acknowledged a cancel after "
       "their claim",
       """            claimed = self._running + self._n_succeeded + self._n_stopped""",
       """            claimed = self._running + self._n_succeeded"""),
    _m("claim_conflict_when_slots_suffice", _S,
       "ready() counts a claim conflict when the free slots are just enough for what it asks",
       """            if free < want:""",
       """            if free <= want:"""),
    # -- TaskScheduler: signals per task type and tenant -------------------------------------
    _m("retry_charges_renewed_to_first_tenant", _S,
       "retry() charges every version it renews to the partition of the first one",
       """                    self._signals.count(self._key(row), "retried")""",
       """                    self._signals.count(self._key(renewed[0]), "retried")"""),
    _m("replaced_charged_to_new_tenant", _S,
       "a resubmission charges the waiting version it replaces to its own partition",
       """            book.count(self._key(old), "replaced")""",
       """            book.count(labels or UNLABELLED, "replaced")"""),
    _m("overflow_partition_not_counted", _SG,
       "once max_partitions are kept, a new key's counts are dropped, not charged to the "
       "overflow partition",
       """                key = OVERFLOW
                tally = parts.get(key)""",
       """                return _Tally()"""),
    _m("propagation_counted_without_its_time", _SG,
       "a version made ready or blocked by a dependency's end is counted in propagated, its "
       "time left out of propagation",
       """        tally.propagated += 1
        tally.propagation.add(seconds)""",
       """        tally.propagated += 1"""),
    _m("failure_counted_as_config_error", _S,
       "fail() counts a function failure as a graph configuration error",
       """"failed" if to == _FAILED else "stopped", ran)""",
       """"edges_refused" if to == _FAILED else "stopped", ran)"""),
    _m("config_error_counted_as_failure", _S,
       "add_deps() on a version no longer pending counts a function failure",
       """                self._signals.count(self._key(row), "edges_refused")""",
       """                self._signals.count(self._key(row), "failed")"""),
    # -- TaskScheduler: edge kinds and add_deps ------------------------------------------------
    _m("optional_failure_blocks", _S,
       "blocking spreads through optional edges too: an optional parent's failure blocks",
       """                    if st <= _READY and tid not in optional.get(x, ()):""",
       """                    if st <= _READY:"""),
    _m("required_failure_does_not_block", _S,
       "submit() with optional edges does not block on a required dependency that is dead",
       """            any(ended(d) for d in dep_t if d not in opt_s))""",
       """            any(ended(d) for d in dep_t if d in opt_s))"""),
    _m("optional_dead_parent_counted_unsettled", _S,
       "submit() counts an optional dependency that ended dead as not settled",
       """    return (remaining - sum(map(ended, opt_s)),""",
       """    return (remaining - 0,"""),
    _m("blocking_stops_after_optional_level", _S,
       "with optional edges present, blocking reaches the direct dependents and stops",
       """                        append(x)
                        queue.append(x)""",
       """                        append(x)"""),
    _m("blocked_parent_settles_no_optional_edge", _S,
       "Settle settles the optional edges to the version that died, not to those it blocked",
       """        released = self._settle_optional((*seeds, *order)) if optional else []""",
       """        released = self._settle_optional(seeds) if optional else []"""),
    _m("blocked_by_names_optional_parent", _S,
       "a blocked version may name an optional dependency as the one that blocked it",
       """                    if (r is not None and state[r] >= _FAILED and (cause < 0 or r < cause)
                            and d not in opt):""",
       """                    if (r is not None and state[r] >= _FAILED and (cause < 0 or r < cause)
                            and True):"""),
    _m("resubmit_keeps_optional_child_settled", _S,
       "a new version of a parent that ended dead leaves its optional children settled",
       """                    elif old_state > _SUCCEEDED and self._optional:
                        self._bump_optional(listed, task_id)""",
       """                    elif old_state > _SUCCEEDED and not self._optional:
                        self._bump_optional(listed, task_id)"""),
    _m("retry_keeps_optional_child_settled", _S,
       "retry() leaves a waiting version's optional edge to a renewed member settled",
       """                for m in members:
                    self._bump_optional(dependents[m] or (), ids[m])""",
       """                for m in members[1:]:
                    self._bump_optional(dependents[m] or (), ids[m])"""),
    _m("retry_forgets_optional_edges", _S,
       "retry() renews a version with every edge required",
       """                if m in optional:
                    optional[row] = optional[m]""",
       """                if m in optional and m != root:
                    optional[row] = optional[m]"""),
    _m("add_deps_to_ready_version", _S,
       "add_deps() accepts a ready version as well as a pending one",
       """            if state[row] != _PENDING:
                raise InvalidTransitionError(""",
       """            if state[row] > _READY:
                raise InvalidTransitionError("""),
    _m("add_deps_count_not_raised_for_running_parent", _S,
       "add_deps() does not count a new dependency that is running",
       """                if st < _SUCCEEDED:  # pending, ready or running
                    added += 1
                elif st != _SUCCEEDED and d not in opt_s:  # a required edge to a dead version""",
       """                if st < _RUNNING:  # pending or ready
                    added += 1
                elif st != _SUCCEEDED and d not in opt_s:  # a required edge to a dead version"""),
    _m("add_deps_closes_cycles", _S,
       "add_deps() after start() does not look for the cycle its new edges close",
       """                if self._dependents[row]:
                    cycle = self._cycle_through(row, new_t)""",
       """                if not self._dependents:
                    cycle = self._cycle_through(row, new_t)"""),
    _m("add_deps_ignores_dead_required_parent", _S,
       "add_deps() of a required dependency that died leaves the version pending, not blocked",
       """            if dead:
                self._settle((), (row,))
            if self._recorder is not None:
                self._record("AddDeps",""",
       """            if self._recorder is not None:
                self._record("AddDeps","""),
    _m("add_deps_check_then_act", _S,
       "add_deps() checks that the version is pending, drops the lock, then adds the edges",
       """            get = self._rows.get
            found = [(d, get(d)) for d in new_t]""",
       """            self._lock.release()
            self._lock.acquire()
            get = self._rows.get
            found = [(d, get(d)) for d in new_t]"""),
    _m("info_hides_edge_kinds", _S, "info() reports no optional edges",
       """                optional=self._optional.get(row, frozenset()),""",
       """                optional=frozenset(),"""),
    # -- TaskScheduler: provenance --------------------------------------------------------------
    _m("provenance_overwritten_by_second_cause", _S,
       "a version that dies rewrites the provenance of its dependents blocked already by "
       "another cause",
       """            for gone in seeds:
                for x in dependents[gone] or ():
                    st = state[x]
                    if st <= _READY:""",
       """            for gone in seeds:
                for x in dependents[gone] or ():
                    st = state[x]
                    if st == _BLOCKED:
                        cause = self._cause(gone)
                        self._provenance[x] = _Link(cause.root, cause, ids[x])
                    if st <= _READY:"""),
    _m("provenance_path_stops_one_level_early", _S,
       "a blocked version's path leaves out its blamed dep: it runs from the dep's own cause",
       """                base = made[z] = _Link(base.root, base, self._ids[z])""",
       """                base = made[z] = _Link(base.root, base.prev, self._ids[z])"""),
    _m("provenance_root_is_direct_parent", _S,
       "a blocked version's provenance names its blamed dep as the root, not the version that "
       "failed or was cancelled",
       """                base = made[z] = _Link(base.root, base, self._ids[z])""",
       """                base = made[z] = _Link(_replace(base.root, root=base.task_id), base,
                                       self._ids[z])"""),
    _m("provenance_on_optional_child", _S,
       "a dead parent that settles an optional edge records provenance on the child, which "
       "was not blocked",
       """                if state[x] <= _READY and tid in optional.get(x, ()):
                    left = remaining[x] - 1""",
       """                if state[x] <= _READY and tid in optional.get(x, ()):
                    cause = self._cause(m)
                    self._provenance[x] = _Link(cause.root, cause, ids[x])
                    left = remaining[x] - 1"""),
    _m("close_records_no_provenance", _S,
       "close(cancel_pending=True) cancels the waiting versions without their provenance",
       """                            self._record_end(row, TaskState.CANCELLED, None, "close", now)
""",
       ""),
    # -- Runner ----------------------------------------------------------------------------------
    _m("settlements_uncounted_outside_lock", _R,
       "a worker takes back the settlements it applied before taking the runner lock",
       """            acquire(lock)  # not ``with``: once per task, and half the cost
            try:
                self._resolving -= applied
                applied = 0""",
       """            self._resolving -= applied
            acquire(lock)  # not ``with``: once per task, and half the cost
            try:
                applied = 0"""),
    _m("runner_inputs_dropped_without_token", _R,
       "a function that takes inputs but no token is called without its input summary",
       """                elif taken == runners.INPUTS:
                    value = fn(inputs=self._scheduler.input_summary(task_id))""",
       """                elif taken == runners.INPUTS:
                    value = fn()""",
       unit_tests=("tests/dag/test_edges.py",)),
    _m("close_notifies_one_worker", _R, "close() wakes one idle worker instead of all",
       """                        out.append((future, _CANCEL, None))
                self._release_idle_locked()""",
       """                        out.append((future, _CANCEL, None))
                if self._idle_workers:
                    self._idle_workers.pop().put(None)"""),
    _m("close_drops_queued_claims", _R,
       "a worker that sees the runner closed leaves claimed versions in the queue",
       """                    if queue:
                        claim = queue.popleft()""",
       """                    if queue and not self._closed:
                        claim = queue.popleft()"""),
    _m("dispatch_wakes_one_too_few", _R,
       "submit()/start()/cancel() wake one worker fewer than there are claims (lost wake-up)",
       """        first = 1 if self_take else 0""",
       """        first = 1"""),
    _m("worker_skips_idle_notify", _R,
       "a worker that reported the last version does not wake wait() (lost wake-up)",
       """                self._resolving += len(out)
                if self._idle_waiters:
                    self._notify_idle_locked()
                if claim is None:""",
       """                self._resolving += len(out)
                if claim is None:"""),
    _m("wait_returns_while_pending", _R,
       "wait() returns once nothing is in flight, closed or not",
       """        return self._live == 0 or (self._closed and self._inflight == 0)""",
       """        return self._live == 0 or self._inflight == 0"""),
    _m("runner_limit_off_by_one", _R, "the Runner's scheduler allows max_workers + 1 claims",
       """TaskScheduler(max_workers, track_endings=True""",
       """TaskScheduler(max_workers + 1, track_endings=True"""),
    _m("runner_cancel_of_running_ignored", _R,
       "Runner.cancel() of a running version neither sets its token nor withdraws it",
       """            if state is _RUNNING and future is not None:""",
       """            if state is TaskState.READY and future is not None:"""),
    _m("runner_cancel_token_not_set", _R, "Runner.cancel() records the request but sets no token",
       """                token = self._tokens.get(key)
                if token is not None:
                    token._event.set()
                remote = self._exec_futures.get(key)""",
       """                token = self._tokens.get(key)
                remote = self._exec_futures.get(key)"""),
    _m("withdrawn_claim_reported_as_result", _R,
       "a claim cancelled before its worker took it is reported as succeeded",
       """                        outcome = (claim, _CANCEL, None)""",
       """                        outcome = (claim, _RESULT, None)"""),
    _m("failure_reported_as_success", _R, "a function that raised is reported with complete()",
       """                self._scheduler.fail(task_id, generation, value)""",
       """                self._scheduler.complete(task_id, generation, value)"""),
    _m("failed_future_never_resolved", _R, "the future of a version that failed is never set",
       """                out.append((future, _RESULT if state is _SUCCEEDED else _ERROR,
                            value if state is _SUCCEEDED else _as_exception(t, value)))
                continue""",
       """                if state is _SUCCEEDED:
                    out.append((future, _RESULT, value))
                continue"""),
    _m("stale_ending_settles_current_future", _R,
       "an ending of an older generation settles the current version's future",
       """            if future is None or future.generation != g:""",
       """            if future is None:""",
       equivalent="every action through the Runner renews its entries before it collects the "
                  "endings, so each ending it sees is of the current generation; only an "
                  "action taken on runner.scheduler directly, which the API forbids, could "
                  "tell"),
    _m("retry_members_not_renewed", _R,
       "Runner.retry() does not follow the versions renewed with the task",
       """                if current != self._tasks[member].generation:""",
       """                if current == self._tasks[member].generation:"""),
    _m("cancel_skips_dispatch", _R, "Runner.cancel() does not hand out claims afterwards",
       """            self._collect_locked(out, None, 0, None)
            self._dispatch_locked(False)
            self._resolving += len(out)
        if remote is not None:""",
       """            self._collect_locked(out, None, 0, None)
            self._resolving += len(out)
        if remote is not None:""",
       equivalent="a cancel frees no slot and readies no version (it can only block), so "
                  "nothing becomes claimable that was not claimed before it"),
    _m("idle_worker_not_handed_claims", _R,
       "claims beyond the reporter's own go to the shared queue though a worker is idle: no "
       "inbox is put to (lost wake-up)",
       """                if not idle:
                    self._queue.extend(claims[i:])
                    break
                idle.pop().put(claims[i])""",
       """                self._queue.extend(claims[i:])
                break"""),
    _m("future_waiter_uncounted", _R,
       "a thread waiting on a TaskFuture is not counted, so settling the result wakes nobody "
       "(lost wake-up)",
       """            runner._futures_waiting += 1
            try:
                self._condition.wait_for(self._is_done, timeout)
            finally:
                runner._futures_waiting -= 1""",
       """            self._condition.wait_for(self._is_done, timeout)"""),
)

# Wake-ups and notifications: each bug leaves a thread waiting for an event that happened.
# The wake-up tests (tests/<system>/test_wakeups.py) block a thread first, then make the one change
# that must release it.
WAKEUPS: tuple[Mutant, ...] = (
    _m('runner_close_releases_no_idle_worker', _R, 'close() does not send the idle workers away',
       """                        out.append((future, _CANCEL, None))
                self._release_idle_locked()""",
       """                        out.append((future, _CANCEL, None))"""),
    _m('runner_break_releases_no_idle_worker', _R,
       'a runner stopped on its own failure keeps its idle workers',
       """                out.append((future, _ERROR, error))
        self._release_idle_locked()""",
       """                out.append((future, _ERROR, error))"""),
    _m('runner_settle_no_idle_notify', _R,
       '_settle() does not wake wait()/close() after the settlements it applied',
       """            self._resolving -= len(out)
            if self._idle_waiters:
                self._notify_idle_locked()""",
       """            self._resolving -= len(out)"""),
    _m('runner_idle_notify_one', _R, 'wait()/close() waiters: notify one, not all',
       """            self._idle.notify_all()""",
       """            self._idle.notify()"""),
    _m('runner_idle_notify_needs_both', _R,
       'idle notify only when no version is live AND none in flight',
       """        if self._resolving == 0 and (self._live == 0 or self._inflight == 0):""",
       """        if self._resolving == 0 and (self._live == 0 and self._inflight == 0):"""),
    _m('runner_idle_notify_ignores_resolving', _R,
       'idle notify while settlements are still being applied, never after',
       """        if self._resolving == 0 and (self._live == 0 or self._inflight == 0):""",
       """        if self._resolving > 0 and (self._live == 0 or self._inflight == 0):"""),
    _m('runner_wait_uncounted', _R, 'wait() does not count itself among the idle waiters',
       """            self._wait_idle_locked(self._quiet, seconds)""",
       """            self._idle.wait_for(self._quiet, seconds)"""),
    _m('runner_close_wait_uncounted', _R, 'close() does not count itself among the idle waiters',
       """            self._wait_idle_locked(self._all_returned, seconds)""",
       """            self._idle.wait_for(self._all_returned, seconds)"""),
    _m('runner_futures_notify_one', _R,
       'settling a result notifies one future waiter, not all (shared condition)',
       """                    if self._futures_waiting:
                        self._futures_condition.notify_all()""",
       """                    if self._futures_waiting:
                        self._futures_condition.notify()"""),
    _m('runner_futures_no_notify', _R, 'settling a result notifies nobody',
       """                    if self._futures_waiting:
                        self._futures_condition.notify_all()""",
       """                    pass"""),
    _m('runner_future_wait_no_recheck', _R,
       'TaskFuture waits once on the shared condition, no re-check',
       """                self._condition.wait_for(self._is_done, timeout)""",
       """                self._condition.wait(timeout)"""),
    _m('runner_token_not_set_when_requested_early', _R,
       'a cancel requested before the token was made is forgotten',
       """            if key in self._cancel_requested:
                token._event.set()""",
       """            if key in self._cancel_requested:
                pass"""),
    _m('runner_submit_after_start_no_dispatch', _R, 'a submission after start() claims nothing',
       """            self._collect_locked(out, None, 0, None)
            self._dispatch_locked(False)
        self._resolving += len(out)""",
       """            self._collect_locked(out, None, 0, None)
        self._resolving += len(out)"""),
    _m('runner_start_no_dispatch', _R, 'start() claims nothing (the workers wait)',
       """                self._threads.append(thread)
            self._dispatch_locked(False)""",
       """                self._threads.append(thread)"""),
    _m('runner_report_drops_self_take', _R,
       'the claim a reporting worker should take itself is dropped',
       """        return self._dispatch_locked(True)""",
       """        self._dispatch_locked(True)
        return None"""),
    _m('runner_idle_with_uncounted_settlements', _R,
       'a worker with settlements not yet counted goes idle',
       """                    elif not out and not self._closed:""",
       """                    elif not self._closed:"""),
    _m('runner_dispatch_pops_front_idle', _R, 'claims handed to the first idle worker (order only)',
       """                idle.pop().put(claims[i])""",
       """                idle.pop(0).put(claims[i])""",
       equivalent='only which idle worker takes the claim changes; every idle worker is alike'),
    _m('runner_worker_idle_when_closed', _R,
       'a worker goes idle after close (nobody will release it)',
       """                    elif not out and not self._closed:""",
       """                    elif not out:"""),
)

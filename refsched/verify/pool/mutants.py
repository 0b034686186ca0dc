"""The mutation catalogue of the work-stealing pool: seeded bugs of ``refsched/pool/``.

Each is a source patch that the verification layers must kill (:mod:`refsched.verify.mutants` runs
them; docs/mutants.md has the last run). ``MODULES`` names the files they patch.
"""

from __future__ import annotations

from refsched.verify.mutant import Mutant
from refsched.verify.mutant import mutant as _m

MODULES = {"pool": "refsched.pool.pool", "pool_blocking": "refsched.pool.blocking"}
"""The files this catalogue patches: a key (a mutant's ``file``) to its module."""

_P = "pool"
_PB = "pool_blocking"

CATALOGUE: tuple[Mutant, ...] = (
    # -- WorkStealingPool ----------------------------------------------------------------------
    _m("pool_take_check_then_pop", _P,
       "a worker sees its deque non-empty, lets the lock go, then pops: a thief may take the "
       "task in between",
       """        own = self._deques[w]
        if own:
            task = own.pop()  # Spec: Pop(w)""",
       """        own = self._deques[w]
        if own:
            self._lock.release()
            self._lock.acquire()
            task = own.pop()  # Spec: Pop(w)"""),
    _m("pool_child_counted_late", _P,
       "a child is pushed, and counted in outstanding only in a later critical section: its "
       "parent's Finish can reach 0 first",
       """                self._outstanding += 1
                self._deques[w].append(task)
                if self._recorder is not None:
                    self._record("SubmitChild", {"t": task, "w": w})
                if self._parked and not self._searching:
                    self._wake_one_locked()""",
       """                self._deques[w].append(task)
                if self._recorder is not None:
                    self._record("SubmitChild", {"t": task, "w": w})
                if self._parked and not self._searching:
                    self._wake_one_locked()
                lock.release()
                lock.acquire()
                self._outstanding += 1"""),
    _m("pool_termination_wakes_one_waiter", _P,
       "termination notifies one thread waiting for it (notify), not all of them (notify_all)",
       """        self._parked.clear()
        self._terminated.notify_all()""",
       """        self._parked.clear()
        self._terminated.notify()"""),
    _m("pool_termination_wakes_one_worker", _P,
       "termination wakes one parked worker, not every one: the others never leave",
       """        for w in self._parked:
            self._wake[w].notify()
        self._parked.clear()""",
       """        for w in self._parked:
            self._wake[w].notify()
            break
        self._parked.clear()"""),
    _m("pool_terminates_on_empty_deques", _P,
       "a Finish terminates a draining pool once every deque is empty, though a task still runs",
       """        if self._outstanding == 0 and self._state is _DRAINING:""",
       """        if not any(self._deques) and self._state is _DRAINING:"""),
    _m("pool_pop_takes_top", _P,
       "the owner takes the oldest task of its own deque (FIFO), not the newest",
       """            task = own.pop()  # Spec: Pop(w)""",
       """            task = own.popleft()  # Spec: Pop(w)"""),
    _m("pool_steal_takes_bottom", _P,
       "a thief takes the newest task of the victim's deque, the end its owner works at",
       """                task = deques[victim].popleft()  # Spec: Steal(w, victim)""",
       """                task = deques[victim].pop()  # Spec: Steal(w, victim)"""),
    _m("pool_cancel_keeps_count", _P,
       "shutdown(cancel_futures=True) empties the deques but leaves the tasks counted",
       """        self._outstanding -= count
        if count and self._outstanding == 0:""",
       """        if count and self._outstanding == 0:"""),
    _m("pool_push_wakes_nobody", _P,
       "a push marks a parked worker as woken but does not notify it (a lost wake-up)",
       """        self._searching += 1
        self._wake[w].notify()
        return w""",
       """        self._searching += 1
        return w"""),
    _m("pool_waiting_task_does_not_help", _P,
       "result() inside a task blocks its worker instead of running other tasks",
       """        if self._state not in _DONE and self._pool._local.worker is not None:
            self._pool._help_until(self, timeout)
            timeout = 0
        return super().result(timeout)""",
       """        return super().result(timeout)"""),
    _m("pool_queue_lengths_skip_empty", _P,
       "stats().queue_lengths leaves out the empty deques: the lengths no longer line up with "
       "the workers",
       """                queue_lengths=tuple(len(dq) for dq in self._deques),""",
       """                queue_lengths=tuple(len(dq) for dq in self._deques if dq),"""),
    # -- managed blocking ----------------------------------------------------------------------
    _m("pool_spares_unbounded", _PB,
       "Block launches a spare whatever the number already active: no max_spares bound",
       """        elif self.active < self.bound:""",
       """        elif True:"""),
    _m("pool_spare_never_retires", _P,
       "a released spare, idle with its deque empty, goes on serving instead of retiring",
       """        return w >= self._workers and not self._deques[w] """
       """and self._spares.may_retire(w)""",
       """        return False"""),
    _m("pool_compensator_never_started", _P,
       "Block gives a new spare slot a thread but never starts it: the blocker is not stood in "
       "for",
       """                spares.threads.append(spare)
                spare.thread.start()""",
       """                spares.threads.append(spare)"""),
    _m("pool_retiring_spare_drops_its_deque", _P,
       "a released spare retires as soon as it is idle, dropping the tasks left in its deque",
       """        return w >= self._workers and not self._deques[w] """
       """and self._spares.may_retire(w)""",
       """        if w >= self._workers and self._spares.may_retire(w):
            self._deques[w].clear()
            return True
        return False"""),
    _m("pool_unblock_keeps_the_spare", _P,
       "leaving blocking() does not release the spare: it stands in for a thread that runs",
       """        self._spares.blocked.discard(x)
        s = self._spares.release(x)""",
       """        self._spares.blocked.discard(x)
        s = None"""),
    # -- batch steals (steal="half") -------------------------------------------------------
    _m("pool_batch_takes_owner_end", _P,
       "a batch steal takes the victim's newest tasks, from the end its owner works at",
       """        task = source.popleft()  # Spec: StealBatch(w, victim)
        for _ in range(k - 1):
            own.append(source.popleft())  # the oldest of them on top, as they were""",
       """        task = source.pop()  # Spec: StealBatch(w, victim)
        for _ in range(k - 1):
            own.appendleft(source.pop())  # the oldest of them on top, as they were"""),
    _m("pool_batch_counts_each_task_as_a_steal", _P,
       "a batch steal of k tasks is counted as k steals in stats().stolen",
       """        self._stolen += 1
        self._stolen_tasks += k""",
       """        self._stolen += k
        self._stolen_tasks += k"""),
    _m("pool_batch_counts_kept_tasks_again", _P,
       "the tasks a thief keeps are counted in outstanding a second time, as if submitted",
       """        self._stolen += 1
        self._stolen_tasks += k""",
       """        self._stolen += 1
        self._stolen_tasks += k
        self._outstanding += k - 1"""),
    _m("pool_batch_takes_more_than_half", _P,
       "a batch of steal_cap is taken from a deque one task short of twice that: three of five",
       "    return cap if n >= cap << 1 else 1",
       "    return cap if n >= (cap << 1) - 1 else 1"),
    _m("pool_batch_ignores_cap", _P,
       "a batch steal takes half of the victim's deque however long, past steal_cap",
       "    return cap if n >= cap << 1 else 1",
       "    return n >> 1 if n >= cap << 1 else 1"),
    _m("pool_batch_reverses_kept_tasks", _P,
       "the tasks a thief keeps land in its deque newest on top: their order is lost",
       "            own.append(source.popleft())",
       "            own.appendleft(source.popleft())"),
    _m("pool_batch_while_helping", _P,
       "a worker helping inside result() steals a batch, piling tasks on top of its wait",
       """                if (self._steal_cap > 1 and not self._local.depth
                        and _steal_size""",
       """                if (self._steal_cap > 1
                        and _steal_size"""),
    _m("pool_batch_steals_from_short_deques", _P,
       "batches from short deques: half of any deque of four tasks or more, capped, as a "
       "fork-join tree's deque of one subtree per level is",
       "    return cap if n >= cap << 1 else 1",
       """    half = n >> 1
    return 1 if half <= 1 else min(half, cap)"""),
)

# Wake-ups and notifications: each bug leaves a thread waiting for an event that happened.
# The wake-up tests (tests/<system>/test_wakeups.py) block a thread first, then make the one change
# that must release it.
WAKEUPS: tuple[Mutant, ...] = (
    _m('pool_joiners_not_woken', _P, 'Finish does not wake the workers parked waiting on the task',
       """            self._parked.pop(w, None)
            self._wake[w].notify()""",
       """            self._parked.pop(w, None)"""),
    _m('pool_finish_skips_joiners', _P, 'Finish does not look for joiners',
       """        if task._joiners:
            self._wake_joiners_locked(task)
        if self._outstanding == 0 and self._state is _DRAINING:""",
       """        if self._outstanding == 0 and self._state is _DRAINING:"""),
    _m('pool_cancel_no_joiner_wake', _P, 'Future.cancel() does not wake the joiners',
       """        if not super().cancel():
            return False
        self._pool._wake_joiners(self)""",
       """        if not super().cancel():
            return False""",
       equivalent="a parked joiner's task is never queued; the worker that takes it wakes "
                  "the joiners at its Finish"),
    _m('pool_cancel_queued_no_joiner_wake', _P,
       'shutdown(cancel_futures) does not wake the joiners',
       """                if task._joiners:
                    self._wake_joiners_locked(task)
            count += len(dq)""",
       """            count += len(dq)""",
       equivalent='as p_cancel_no_joiner_wake: the Finish of the awaited task wakes the joiners'),
    _m('pool_found_no_pass_wake', _P, 'a searcher that found a task does not wake the next worker',
       """                if searching:
                    searching = flags[w] = False
                    self._searching -= 1
                    self._pass_wake_locked()
                idle_rounds = 0""",
       """                if searching:
                    searching = flags[w] = False
                    self._searching -= 1
                idle_rounds = 0"""),
    # killed by the explore scenario pool_waiters_wake_up_as_a_child_is_pushed (a third worker,
    # parked, is the only one left to wake; tests/pool/test_explore.py)
    _m('pool_awaited_done_no_pass_wake', _P,
       'a waiting worker returning to its task passes no wake',
       """                        self._searching -= 1
                    self._pass_wake_locked()
                    return""",
       """                        self._searching -= 1
                    return"""),
    _m('pool_terminated_no_notify', _P,
       'termination does not notify await_termination()/shutdown()',
       """        self._parked.clear()
        self._terminated.notify_all()""",
       """        self._parked.clear()"""),
    _m('pool_park_not_registered', _P, 'a parking worker is not listed as parked',
       """        self._parked[w] = None
        if awaited is not None:""",
       """        if awaited is not None:"""),
    _m('pool_park_ignores_deadline', _P,
       'a worker waiting on a future with a timeout parks without one',
       """        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)""",
       """        timeout = None"""),
    _m('pool_external_wakes_while_searching', _P,
       'an outside push wakes only while someone searches',
       """                if self._parked and not self._searching:
                    target = self._wake_one_locked()""",
       """                if self._parked and self._searching:
                    target = self._wake_one_locked()"""),
    _m('pool_child_push_wakes_nobody', _P, 'a child push never wakes a parked worker',
       """                    self._record("SubmitChild", {"t": task, "w": w})
                if self._parked and not self._searching:
                    self._wake_one_locked()""",
       """                    self._record("SubmitChild", {"t": task, "w": w})"""),
    _m('pool_wake_one_not_searching', _P, 'a worker woken for a push is not counted as searching',
       """        self._searching_flags[w] = True
        self._searching += 1
        self._wake[w].notify()""",
       """        self._wake[w].notify()""",
       equivalent='it only wakes more workers than needed: the API sees the same results'),
    _m('pool_pass_wake_needs_work_everywhere', _P, 'pass a wake only when every deque holds work',
       """        if self._parked and not self._searching and any(self._deques):""",
       """        if self._parked and not self._searching and all(self._deques):"""),
    _m('pool_park_forgets_flag', _P, 'a worker woken for a push forgets it is searching',
       """                        searching = flags[w]  # set when woken for a push""",
       """                        searching = False"""),
    _m('pool_shutdown_idle_pool_not_terminated', _P,
       'shutdown of an idle pool does not terminate it',
       """                self._state = _DRAINING
                if self._outstanding == 0:
                    self._terminate_locked()""",
       """                self._state = _DRAINING"""),
)

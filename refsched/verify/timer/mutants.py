"""The mutation catalogue of the timer scheduler and its TimerRunner.

Seeded bugs of ``refsched/timer/``.

Each is a source patch that the verification layers must kill (:mod:`refsched.verify.mutants` runs
them; docs/mutants.md has the last run). ``MODULES`` names the files they patch.
"""

from __future__ import annotations

from refsched.verify.mutant import Mutant
from refsched.verify.mutant import mutant as _m

MODULES = {"timer": "refsched.timer.scheduler", "timer_runner": "refsched.timer.runner"}
"""The files this catalogue patches: a key (a mutant's ``file``) to its module."""

_T, _TR = "timer", "timer_runner"

CATALOGUE: tuple[Mutant, ...] = (
    # -- TimerScheduler ------------------------------------------------------------------------
    _m("timer_priority_inverted", _T,
       "the heap orders equal times by lower priority first (sched's order), not higher",
       """            entry = (run_at, -priority, seq, task_id, version, slot)""",
       """            entry = (run_at, priority, seq, task_id, version, slot)"""),
    _m("timer_due_only_after_run_at", _T,
       "next() waits for an entry whose run_at is exactly now instead of handing it out",
       """                if run_at > now:
                    # Not due: it goes back as the sorted run's last entry, which it precedes""",
       """                if run_at >= now:
                    # Not due: it goes back as the sorted run's last entry, which it precedes"""),
    _m("timer_cancelled_entry_runs", _T,
       "next() drops superseded entries but hands out a cancelled version's entry",
       """                if tasks[task_id] is not entry or mark & _STATE != _PENDING:""",
       """                if tasks[task_id] is not entry:"""),
    _m("timer_supersede_not_counted_stale", _T,
       "a reschedule does not count the superseded entry as stale",
       """                if st == _PENDING:
                    # superseded: its entry is stale from now on
                    self._stale += 1""",
       """                if st == _PENDING:
                    # superseded: its entry is stale from now on
                    pass"""),
    _m("timer_rebuild_at_half", _T,
       "cancel() rebuilds the heap when stale entries are half of it, not more than half",
       """                n = len(self._heap) + len(self._sorted)
                if n > self._floor and 2 * stale > n:""",
       """                n = len(self._heap) + len(self._sorted)
                if n > self._floor and 2 * stale >= n:"""),
    _m("timer_cancel_forgets_stop_request", _T,
       "cancel() of a running version does not record the cooperative stop request",
       """            if st == _RUNNING and not mark & _CANCEL_REQUESTED:
                marks[slot] = mark | _CANCEL_REQUESTED""",
       """            if st == _RUNNING and not mark & _CANCEL_REQUESTED:
                pass"""),
    _m("timer_time_follows_clock_back", _T,
       "next() takes the clock's reading even when it is earlier than the scheduler's time",
       """            if clock_now > now:
                self._now = now = clock_now""",
       """            if clock_now != now:
                self._now = now = clock_now"""),
    _m("timer_stale_complete_accepted", _T,
       "complete() does not check that the version named is the current one",
       """            if (entry is None or version.__class__ is not int or entry[4] != version
                    or (mark := marks[slot := entry[5]]) & _STATE != _RUNNING):
                checked = self._check_callback("complete", task_id, version)""",
       """            if (entry is None or version.__class__ is not int
                    or (mark := marks[slot := entry[5]]) & _STATE != _RUNNING):
                checked = self._check_callback("complete", task_id, version)"""),
    _m("timer_close_keeps_pending", _T,
       "close() empties the heap but leaves the pending versions pending",
       """                    slot = entry[5]
                    marks[slot] += _TO_CANCELLED
                    payload[slot] = None""",
       """                    slot = entry[5]
                    payload[slot] = None"""),
    _m("timer_claim_outside_lock", _T,
       "next() claims under a lock of its own, not the scheduler's",
       """            clock_now = _reading(clock_now)  # not a finite float: converted, or NaN
        lock = self._lock
        lock.acquire()""",
       """            clock_now = _reading(clock_now)  # not a finite float: converted, or NaN
        lock = sync.Lock()
        lock.acquire()"""),
    _m("timer_claimed_uncounts_failed", _T,
       "stats().claimed leaves out the versions that failed after their claim",
       """                claimed=running + self._n_completed + self._n_failed,""",
       """                claimed=running + self._n_completed,"""),
    # -- TimerRunner ---------------------------------------------------------------------------
    _m("timer_runner_earlier_entry_no_wake", _TR,
       "schedule() does not wake the dispatcher when the new entry is due before its deadline",
       """            if deadline is not None and (at < deadline
                                         or (stale_at is not None and stale_at <= deadline)):
                self._poke_locked()""",
       """            if deadline is not None and (stale_at is not None and stale_at <= deadline):
                self._poke_locked()"""),
    _m("timer_runner_close_no_wake", _TR,
       "close() does not wake the dispatcher sleeping toward a far entry",
       """        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()
        return report.cancelled""",
       """        self._deadline = None
        self._work.notify_all()
        self._idle.notify_all()
        return report.cancelled"""),
    _m("timer_runner_one_worker_too_many", _TR,
       "the dispatcher claims while every worker is busy: max_workers + 1 functions can run",
       """                if self._busy >= self._max_workers:""",
       """                if self._busy > self._max_workers:"""),
    _m("timer_runner_cancelled_claim_runs", _TR,
       "a version cancelled after its claim but before its worker took it still runs",
       """                    stop = slot.stop
                    token = slot.token""",
       """                    stop = False
                    token = slot.token""",
       equivalent="whether a cancel lands before or after the worker takes the claim is "
                  "decided under the runner lock and seen by no caller: either way the version "
                  "was running when cancel() returned False, and its function may run, with "
                  "its token set, as a running version's may"),
)

# Wake-ups and notifications: each bug leaves a thread waiting for an event that happened.
# The wake-up tests (tests/<system>/test_wakeups.py) block a thread first, then make the one change
# that must release it.
WAKEUPS: tuple[Mutant, ...] = (
    _m('timer_runner_cancel_head_no_poke', _TR,
       'cancel of the entry the dispatcher sleeps toward does not wake it',
       """                    if deadline is not None and slot.run_at <= deadline:
                        self._poke_locked()""",
       """                    if deadline is not None and slot.run_at < deadline - 1e300:
                        self._poke_locked()"""),
    _m('timer_runner_poke_no_notify', _TR,
       'a poke sets the flag but does not notify the sleeping dispatcher',
       """        self._poke = True
        self._wake.notify()""",
       """        self._poke = True"""),
    _m('timer_runner_supersede_no_poke', _TR,
       'a supersede of the entry slept toward does not wake the dispatcher',
       """            if deadline is not None and (at < deadline
                                         or (stale_at is not None and stale_at <= deadline)):""",
       """            if deadline is not None and at < deadline:"""),
    _m('timer_runner_report_no_slot_wake', _TR,
       'a worker that reports does not wake the dispatcher waiting for a slot',
       """        slot.stop = False
        if self._slot_wanted:
            self._wake.notify()""",
       """        slot.stop = False"""),
    _m('timer_runner_report_no_idle_wake_when_closed', _TR,
       'a worker that reports after close does not wake close()',
       """            self._wake.notify()
        if self._closed:
            self._idle.notify_all()""",
       """            self._wake.notify()"""),
    _m('timer_runner_queue_no_work_notify', _TR, 'a claim queued for a worker does not wake one',
       """                    self._claiming = False
                    self._work.notify()
                    continue""",
       """                    self._claiming = False
                    continue"""),
    _m('timer_runner_dispatcher_exit_no_work_notify', _TR,
       'the dispatcher leaves without waking the workers',
       """            self._deadline = None
            self._work.notify_all()  # workers may exit once the queue is empty
            self._idle.notify_all()""",
       """            self._deadline = None
            self._idle.notify_all()"""),
    _m('timer_runner_dispatcher_exit_no_idle_notify', _TR,
       'the dispatcher leaves without waking close()',
       """            self._deadline = None
            self._work.notify_all()  # workers may exit once the queue is empty
            self._idle.notify_all()""",
       """            self._deadline = None
            self._work.notify_all()  # workers may exit once the queue is empty"""),
    _m('timer_runner_close_no_work_notify', _TR, 'close() does not wake the waiting workers',
       """        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()
        return report.cancelled""",
       """        self._deadline = None
        self._wake.notify_all()
        self._idle.notify_all()
        return report.cancelled""",
       equivalent="the dispatcher's exit notifies _work after _closed is set: the workers wake"),
    _m('timer_runner_poke_ignored_after_next', _TR,
       'a change made while next() ran is not looked at again',
       """                if self._poke:
                    continue  # something changed while next() ran: look again""",
       """                if False:
                    continue"""),
    _m('timer_runner_deadline_not_inf_in_next', _TR,
       'no deadline while next() runs: a change then pokes nobody',
       """                self._claiming = True
                self._deadline = _INF""",
       """                self._claiming = True"""),
    _m('timer_runner_deadline_relative', _TR,
       "the deadline is the Wait's seconds, not now + seconds",
       """                    self._deadline = scheduler.now + seconds""",
       """                    self._deadline = seconds"""),
    _m('timer_runner_sleep_without_timeout', _TR,
       'the dispatcher sleeps without a timeout toward the next entry',
       """                    self._wake.wait(min(seconds, _MAX_WAIT))""",
       """                    self._wake.wait()"""),
    _m('timer_runner_slot_wanted_not_set', _TR,
       'the dispatcher waits for a worker without saying so',
       """                    self._slot_wanted = True
                    self._wake.wait()""",
       """                    self._wake.wait()"""),
    _m('timer_runner_worker_wait_no_recheck', _TR, 'a worker waits once for a claim, no re-check',
       """                    while not queue and not (self._closed and not self._claiming):""",
       """                    if not queue and not (self._closed and not self._claiming):""",
       wanted_check="an explore scenario: close() between the dispatcher's claim and its "
                    "enqueue, with the worker scheduled first"),
    _m('timer_runner_worker_exits_while_claiming', _TR,
       'workers exit on close though the dispatcher still claims',
       """                    while not queue and not (self._closed and not self._claiming):""",
       """                    while not queue and not self._closed:""",
       wanted_check='the same interleaving as tr_worker_wait_no_recheck: an explore scenario'),
    _m('timer_runner_close_waits_not_for_claiming', _TR,
       'close() returns while the dispatcher holds a reservation',
       """            self._idle.wait_for(lambda: self._busy <= own and not self._claiming,\
 seconds)""",
       """            self._idle.wait_for(lambda: self._busy <= own, seconds)""",
       equivalent="while the dispatcher claims, _busy counts the reservation: close() waits"),
    _m('timer_runner_fail_no_wake', _TR,
       'a runner stopped on a failure does not wake its dispatcher',
       """        self._deadline = None
        self._wake.notify_all()
        self._work.notify_all()
        self._idle.notify_all()

    # -- the workers""",
       """        self._deadline = None
        self._work.notify_all()
        self._idle.notify_all()

    # -- the workers"""),
)

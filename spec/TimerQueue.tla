----------------------------- MODULE TimerQueue -----------------------------
(***************************************************************************)
(* The timer scheduler of refsched (refsched.TimerScheduler), stated as    *)
(* docs/timer.md states it.  Every schedule(t, r, p) makes a new version   *)
(* of t with a heap entry <<runAt, priority, seq, t, version>>; next()     *)
(* hands out the live entry that comes first by (runAt, -priority, seq)    *)
(* once its time has come.  Entries of superseded and cancelled versions   *)
(* stay in the heap (lazy deletion) until they reach its top or until a    *)
(* compaction rebuilds the heap from its live entries, which keeps the     *)
(* garbage bounded.  Time is a variable that only the environment moves.   *)
(* Each action here is a step of the reference model refsched.model.timer  *)
(* and a call of refsched.TimerScheduler.                                  *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    Tasks,        \* the task ids a behaviour may use
    Times,        \* the times schedule() may name as runAt: a finite set of naturals
    Priorities,   \* the priorities schedule() may name: a finite set of integers
    RebuildFloor  \* a heap of at most this many entries is never rebuilt

ASSUME Times \subseteq Nat /\ Times # {}
ASSUME Priorities \subseteq Int /\ Priorities # {}
ASSUME RebuildFloor \in Nat

VARIABLES
    now,             \* Nat: the scheduler's time; only Tick moves it, and only forwards
    closed,          \* BOOLEAN: Close was called: no schedules from now on, an empty heap
    nextSeq,         \* the seq the next schedule takes; starts at 1
    version,         \* [Tasks -> Nat]: current version of t; 0 = never scheduled
    state,           \* [Tasks -> States \cup {"absent"}]: state of the current version
    runAt,           \* [Tasks -> Nat]: when the current version is due; 0 while absent
    priority,        \* [Tasks -> Int]: its priority (higher first at equal runAt); 0 while absent
    seq,             \* [Tasks -> Nat]: the seq of its heap entry; 0 while absent
    cancelRequested, \* [Tasks -> BOOLEAN]: cancel() asked the running version to stop
    claims,          \* [Tasks -> Nat]: how many times next() handed out the current version
    heap             \* a set of entries <<runAt, priority, seq, t, version>>, live and stale;
                     \* seq is unique to an entry, so a set holds the heap exactly

vars == <<now, closed, nextSeq, version, state, runAt, priority, seq,
          cancelRequested, claims, heap>>

-----------------------------------------------------------------------------
(* States and entries *)

States == {"pending", "running", "completed", "failed", "cancelled"}
\* The states a scheduled version can be in; "absent" marks an id never scheduled.

TerminalStates == {"completed", "failed", "cancelled"}
\* A terminal version never changes again; only a new schedule replaces it.

Entry(t) == <<runAt[t], priority[t], seq[t], t, version[t]>>
\* The heap entry of t's current version, as its variables describe it.

LiveIn(h, ver, st) == {e \in h : ver[e[4]] = e[5] /\ st[e[4]] = "pending"}
\* The entries of h that are live under the version map ver and the state map st: their
\* version is their id's current version, and that version is pending.

Live == LiveIn(heap, version, state)
\* The live entries of the heap; every other entry is stale.

Before(e, f) ==
    \/ e[1] < f[1]
    \/ e[1] = f[1] /\ e[2] > f[2]
    \/ e[1] = f[1] /\ e[2] = f[2] /\ e[3] < f[3]
\* Entry e leaves the heap before entry f: earlier time, then higher priority, then
\* first scheduled.  A strict total order on entries, since seq is unique.

Top(S) == CHOOSE e \in S : \A f \in S \ {e} : Before(e, f)
\* The entry of the non-empty set S that comes first.

DroppedOnTop == {e \in heap \ Live : \A f \in Live : Before(e, f)}
\* The stale entries next() pops off the top of the heap before it reaches a live one:
\* every stale entry before the first live entry, or all of them when none is live.

SomethingDue == Live # {} /\ Top(Live)[1] <= now
\* The first live entry is due: next() hands it out.

Compact(h, ver, st) ==
    IF Cardinality(h) > RebuildFloor /\ 2 * Cardinality(h \ LiveIn(h, ver, st)) > Cardinality(h)
    THEN LiveIn(h, ver, st)
    ELSE h
\* The heap h after an action left the maps ver and st: rebuilt from its live entries when
\* it holds more than RebuildFloor entries of which more than half are stale.

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ now = 0
    /\ closed = FALSE
    /\ nextSeq = 1
    /\ version = [t \in Tasks |-> 0]
    /\ state = [t \in Tasks |-> "absent"]
    /\ runAt = [t \in Tasks |-> 0]
    /\ priority = [t \in Tasks |-> 0]
    /\ seq = [t \in Tasks |-> 0]
    /\ cancelRequested = [t \in Tasks |-> FALSE]
    /\ claims = [t \in Tasks |-> 0]
    /\ heap = {}
\* A fresh scheduler at time 0: open, nothing scheduled, an empty heap.

-----------------------------------------------------------------------------
(* Actions *)

Schedule(t, r, p) ==
    /\ ~closed
    /\ state[t] # "running"
    /\ LET ver == [version EXCEPT ![t] = @ + 1]
           st  == [state EXCEPT ![t] = "pending"]
       IN  /\ version' = ver
           /\ state' = st
           /\ runAt' = [runAt EXCEPT ![t] = r]
           /\ priority' = [priority EXCEPT ![t] = p]
           /\ seq' = [seq EXCEPT ![t] = nextSeq]
           /\ nextSeq' = nextSeq + 1
           /\ cancelRequested' = [cancelRequested EXCEPT ![t] = FALSE]
           /\ claims' = [claims EXCEPT ![t] = 0]
           /\ heap' = Compact(heap \cup {<<r, p, nextSeq, t, ver[t]>>}, ver, st)
    /\ UNCHANGED <<now, closed>>
\* schedule(t, r, p): a new pending version of t, due at r, with its own entry; the entry
\* of a pending version it supersedes turns stale.  Then compact.  r may lie in the past.
\* A running version cannot be replaced.

Cancel(t) ==
    \/ /\ state[t] = "pending"
       /\ LET st == [state EXCEPT ![t] = "cancelled"]
          IN  /\ state' = st
              /\ heap' = Compact(heap, version, st)
       /\ UNCHANGED <<now, closed, nextSeq, version, runAt, priority, seq,
                      cancelRequested, claims>>
    \/ /\ state[t] = "running"
       /\ ~cancelRequested[t]
       /\ cancelRequested' = [cancelRequested EXCEPT ![t] = TRUE]
       /\ UNCHANGED <<now, closed, nextSeq, version, state, runAt, priority, seq,
                      claims, heap>>
\* cancel(t): a pending version is cancelled (its entry turns stale), then compact; a
\* running version only gets a cooperative stop request, once.  A terminal version is
\* left alone: no step.

Claim ==
    /\ SomethingDue
    /\ LET e  == Top(Live)
           st == [state EXCEPT ![e[4]] = "running"]
       IN  /\ state' = st
           /\ claims' = [claims EXCEPT ![e[4]] = @ + 1]
           /\ heap' = Compact(heap \ (DroppedOnTop \cup {e}), version, st)
    /\ UNCHANGED <<now, closed, nextSeq, version, runAt, priority, seq, cancelRequested>>
\* next() returning Due: the stale entries on top are popped, then the first live entry,
\* which is due; its version starts running.  Then compact.

Idle ==
    /\ ~SomethingDue
    /\ heap' = heap \ DroppedOnTop
    /\ UNCHANGED <<now, closed, nextSeq, version, state, runAt, priority, seq,
                   cancelRequested, claims>>
\* next() returning Wait (the first live entry is not due yet) or None (no live entry):
\* only the stale entries on top are popped.

Complete(t, v) ==
    /\ v = version[t]
    /\ state[t] = "running"
    /\ state' = [state EXCEPT ![t] = "completed"]
    /\ UNCHANGED <<now, closed, nextSeq, version, runAt, priority, seq,
                   cancelRequested, claims, heap>>
\* complete(t, v): the running version v completes.

Fail(t, v) ==
    /\ v = version[t]
    /\ state[t] = "running"
    /\ state' = [state EXCEPT ![t] = "failed"]
    /\ UNCHANGED <<now, closed, nextSeq, version, runAt, priority, seq,
                   cancelRequested, claims, heap>>
\* fail(t, v): the running version v fails.

StaleCallback(t, v) ==
    /\ version[t] > 0
    /\ v # version[t]
    /\ UNCHANGED vars
\* complete(t, v) or fail(t, v) naming a version of t that is not the current one:
\* rejected (StaleGenerationError), no change.

AnyStaleCallback(t) ==
    \E v \in (1..(version[t] + 1)) \ {version[t]} : StaleCallback(t, v)
\* StaleCallback for every version of t made before the current one, and the next one.
\* TLC names a step after the innermost operator it reaches before a quantifier whose
\* range depends on the state, so in a state-graph dump these steps are labelled
\* AnyStaleCallback.

RepeatedCallback(t) ==
    /\ state[t] \in TerminalStates
    /\ UNCHANGED vars
\* complete(t, v) or fail(t, v) on a current version that is already terminal: its state
\* is returned, no change.

Close ==
    /\ ~closed
    /\ closed' = TRUE
    /\ state' = [x \in Tasks |-> IF state[x] = "pending" THEN "cancelled" ELSE state[x]]
    /\ heap' = {}
    /\ UNCHANGED <<now, nextSeq, version, runAt, priority, seq, cancelRequested, claims>>
\* close(): no more schedules; every pending version is cancelled and the heap emptied.
\* Running versions keep running and may still complete or fail.  A second close()
\* changes nothing: no step.

Tick ==
    /\ now' = now + 1
    /\ UNCHANGED <<closed, nextSeq, version, state, runAt, priority, seq,
                   cancelRequested, claims, heap>>
\* The clock moves on.  The scheduler reads it in next(); a model-checking module bounds
\* it with a state constraint, since time itself has no end.

Next ==
    \/ \E t \in Tasks, r \in Times, p \in Priorities : Schedule(t, r, p)
    \/ \E t \in Tasks : Cancel(t)
    \/ Claim
    \/ Idle
    \/ \E t \in Tasks : Complete(t, version[t])
    \/ \E t \in Tasks : Fail(t, version[t])
    \/ \E t \in Tasks : AnyStaleCallback(t)
    \/ \E t \in Tasks : RepeatedCallback(t)
    \/ Close
    \/ Tick
\* Any one call, or the clock moving on.

Spec == Init /\ [][Next]_vars
\* Every behaviour of the scheduler, without fairness.

-----------------------------------------------------------------------------
(* Invariants *)

TypeOK ==
    /\ now \in Nat
    /\ closed \in BOOLEAN
    /\ nextSeq \in Nat \ {0}
    /\ version \in [Tasks -> Nat]
    /\ state \in [Tasks -> States \cup {"absent"}]
    /\ runAt \in [Tasks -> Nat]
    /\ priority \in [Tasks -> Int]
    /\ seq \in [Tasks -> Nat]
    /\ cancelRequested \in [Tasks -> BOOLEAN]
    /\ claims \in [Tasks -> Nat]
    /\ \A t \in Tasks : (version[t] = 0) <=> (state[t] = "absent")
    /\ \A t \in Tasks :
           IF version[t] = 0
           THEN runAt[t] = 0 /\ priority[t] = 0 /\ seq[t] = 0 /\ ~cancelRequested[t]
                /\ claims[t] = 0
           ELSE runAt[t] \in Times /\ priority[t] \in Priorities /\ seq[t] \in 1..(nextSeq - 1)
    /\ \A e \in heap :
           e \in Times \X Priorities \X (1..(nextSeq - 1)) \X Tasks \X (Nat \ {0})
    /\ \A e, f \in heap : e[3] = f[3] => e = f
\* Every variable holds a value of its type; an absent id has only zeros; seqs are below
\* nextSeq, and no two entries share one.

HeapHoldsLiveVersions ==
    /\ \A t \in Tasks :
           state[t] = "pending" => {e \in heap : e[4] = t /\ e[5] = version[t]} = {Entry(t)}
    /\ \A e \in heap :
           \/ e[5] < version[e[4]]
           \/ e[5] = version[e[4]] /\ state[e[4]] \in {"pending", "cancelled"}
\* Every pending version has exactly one entry in the heap, the one its variables
\* describe (so it is live); no entry names a version not yet made; and a running,
\* completed or failed version has no entry left (next() popped it): only superseded and
\* cancelled versions leave stale entries behind.

AtMostOneClaimPerVersion == \A t \in Tasks : claims[t] <= 1
\* No version is handed out by next() twice.

HeapGarbageBounded ==
    Cardinality(heap) <= 2 * Cardinality({e \in heap : state[e[4]] = "pending"
                                                      /\ version[e[4]] = e[5]})
                         + RebuildFloor
\* len(heap) <= 2 * live + rebuild_floor: stale entries never pile up, whatever the mix
\* of reschedules and cancels.

CancelRequestOnlyWhileRunning ==
    \A t \in Tasks : cancelRequested[t] => state[t] \in {"running", "completed", "failed"}
\* A stop request is only ever made of a running version (it stays when that version
\* ends): never of a pending, cancelled or absent one.

-----------------------------------------------------------------------------
(* Action properties *)

StartsRunning(t) ==
    /\ state'[t] = "running"
    /\ ~(state[t] = "running" /\ version'[t] = version[t])
\* In this step t's current version (the same one or a new one) goes to running.

ComesFirst(e, f) ==
    \/ e[1] < f[1]
    \/ e[1] = f[1] /\ (e[2] > f[2] \/ (e[2] = f[2] /\ e[3] < f[3]))
\* The contract's order, written apart from the actions' Before so that a wrong order in
\* the actions does not pass unnoticed.

ClaimTakesMinimum ==
    [][\A t \in Tasks :
          (StartsRunning(t) /\ state[t] = "pending" /\ version'[t] = version[t])
              => LET live == {e \in heap : state[e[4]] = "pending" /\ version[e[4]] = e[5]}
                 IN  \E e \in live :
                         /\ e[4] = t
                         /\ e[5] = version[t]
                         /\ e[1] <= now
                         /\ \A f \in live \ {e} : ComesFirst(e, f)]_vars
\* A pending version that starts running had a live entry, due, that came first among
\* the live entries.

NoStaleOrCancelledRun ==
    [][\A t \in Tasks :
          StartsRunning(t) => state[t] = "pending" /\ version'[t] = version[t]]_vars
\* Only a pending current version ever starts running: never a superseded, cancelled or
\* ended one, nor a version made in the same step.

TimeNeverGoesBack == [][now' >= now]_vars
\* The scheduler's time never decreases.

TerminalStaysTerminal ==
    [][\A t \in Tasks :
          (state[t] \in TerminalStates /\ version'[t] = version[t])
              => /\ state'[t] = state[t]
                 /\ runAt'[t] = runAt[t]
                 /\ priority'[t] = priority[t]
                 /\ seq'[t] = seq[t]
                 /\ cancelRequested'[t] = cancelRequested[t]
                 /\ claims'[t] = claims[t]]_vars
\* A terminal version never changes; only a new schedule (a new version) replaces it.

RunningNeverReplaced ==
    [][\A t \in Tasks : state[t] = "running" => version'[t] = version[t]]_vars
\* A running version is never replaced by a new schedule: it ends first.  Only a step can
\* show this (a Schedule that replaced it would reach states Schedule reaches anyway).
=============================================================================

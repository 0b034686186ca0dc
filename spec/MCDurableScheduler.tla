------------------------ MODULE MCDurableScheduler ------------------------
(***************************************************************************)
(* Model-checking constants, bounds, symmetry and view for                 *)
(* DurableScheduler; nothing else.  MCDurableScheduler.cfg checks safety   *)
(* and the refinement of Scheduler, MCDurableSchedulerLiveness.cfg         *)
(* liveness; MCDurableSchedulerTraces.cfg is the small instance whose      *)
(* whole state graph a trace corpus can cover.                             *)
(***************************************************************************)
EXTENDS DurableScheduler, Integers, TLC

CONSTANTS
    MaxGeneration, \* no id gets more than this many versions (Submit and Retry both add one)
    MaxTime        \* TimeBound: the store's clock goes no further

GenerationBound == \A t \in Tasks : generation[t] <= MaxGeneration
\* State constraint: stop exploring past MaxGeneration versions of any id.

TimeBound == now <= MaxTime
\* State constraint: stop exploring past MaxTime, for a graph of concrete states (the traces
\* instance, which the model's graph must equal).  Heartbeats alone push the clock on for
\* ever; without them, MaxTime = MaxAttempts * (LeaseTime + 1) lets a version run out of
\* attempts.

RelativeDeadline ==
    [t \in Tasks |-> IF holder[t] = NoWorker THEN -2
                     ELSE IF deadline[t] < now THEN -1
                     ELSE deadline[t] - now]
\* How far each live lease is from its deadline; every lease past it is alike (-1), and
\* -2 marks no live lease.

TimeView == <<schedulerVars, attempt, holder, RelativeDeadline, held, ends, endedAttempt>>
\* The state without its absolute time.  Two states with the same view have the same
\* steps, to states with the same view again: every action reads the clock only to compare
\* a deadline with now (Expire, Tick) or to write now + LeaseTime, and a deadline already
\* past stays past.  So the view is a bisimulation, and checking the views is checking the
\* spec with an unbounded clock, no TimeBound needed, safety and liveness alike: a
\* heartbeat loop is a cycle of views, not a climb to a bound.

MCGenerations == 1..MaxGeneration
\* Replaces Generations (= Nat) in EveryVersionEnds: every generation the bound allows.

Symmetry ==
    {p @@ q : p \in Permutations(Tasks), q \in Permutations(Workers)}
\* Ids are interchangeable (the spec only compares them by seq), and so are workers:
\* safety only, never liveness (and FairWorker is a CHOOSE among workers).
=============================================================================

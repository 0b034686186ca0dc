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

ProvenanceOn == TRUE
\* What MCDurableSchedulerProvenance.cfg puts for RecordProvenance (RecordProvenance <-
\* ProvenanceOn): a definition of DurableScheduler, FALSE wherever a config does not name it.

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

MinPriority == CHOOSE p \in Priorities : \A q \in Priorities : p <= q
\* The lowest priority a version may have.

AgingSpan == IF Aging > 0 THEN (MaxPriority - MinPriority) * Aging ELSE 0
\* How long a version must have been due to come before every version yet to arrive.

RelativeDue ==
    [t \in Tasks |-> IF state[t] \in Abs!Waiting
                     THEN IF due[t] - now < -AgingSpan THEN -AgingSpan ELSE due[t] - now
                     ELSE 0]
\* How far each waiting version is from its due time, every one due AgingSpan ago or more
\* alike; 0 for a version that does not wait (its due is 0, and is never read again).

WaitingOrder ==
    {xy \in Abs!InState(Abs!Waiting) \X Abs!InState(Abs!Waiting) : Before(xy[1], xy[2])}
\* The claim order among the waiting versions.

TimeView == <<schedulerVars, attempt, holder, RelativeDeadline, held, ends, endedAttempt,
              priority, RelativeDue, WaitingOrder>>
\* The state without its absolute time.  Two states with the same view have the same
\* steps, to states with the same view again.  Every action reads the clock only to compare
\* it with a deadline (Expire, Tick) or a due time (Eligible, Tick), to order two due times
\* (Before), or to write now + LeaseTime or now + d; and a deadline or a due time once
\* past stays past.  The order of two waiting versions never changes with time (their
\* keys are fixed), so WaitingOrder keeps it whatever RelativeDue forgets.  The order of a
\* waiting version x and a version that arrives later (Submit with p and d, or Retry with
\* d = 0, from some now' >= now) is, with aging, x first iff due[x] - now' <=
\* (priority[x] - p) * Aging + d, true for every p and d once due[x] - now <= -AgingSpan;
\* without aging, with p = priority[x], x first as soon as it is due (due[x] <= now' + d),
\* and with another p, by priority alone.  So every due time AgingSpan or more in the past
\* is alike for every comparison a step makes.  Hence the view is a bisimulation, and
\* checking the views is checking the spec with an unbounded clock, no TimeBound needed,
\* safety and liveness alike: a heartbeat loop is a cycle of views, not a climb to a bound.
\* With neither priorities nor delays, priority is 0, RelativeDue is 0 and WaitingOrder is
\* the seq order: the view is the one before due times, and so are the state counts.

MCGenerations == 1..MaxGeneration
\* Replaces Generations (= Nat) in EveryVersionEnds: every generation the bound allows.

Symmetry ==
    {p @@ q : p \in Permutations(Tasks), q \in Permutations(Workers)}
\* Ids are interchangeable (the spec only compares them by seq), and so are workers:
\* safety only, never liveness (and FairWorker is a CHOOSE among workers).
=============================================================================

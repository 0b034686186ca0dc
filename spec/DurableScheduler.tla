------------------------- MODULE DurableScheduler -------------------------
(***************************************************************************)
(* The durable scheduler of refsched, as docs/durable.md states it: the    *)
(* TaskScheduler of Scheduler.tla kept in a store, run by worker processes *)
(* that claim versions under leases.  A lease names the attempt that holds *)
(* it, and the attempt is the fencing token every report is checked       *)
(* against: a worker that dies, or pauses past its lease, loses the        *)
(* version to the next claimer, and whatever it reports afterwards is      *)
(* refused.  Execution is at-least-once; acceptance is at-most-once.       *)
(*                                                                         *)
(* The scheduler's own variables and actions are Scheduler's, reused       *)
(* through the refinement mapping Abs (claims[t] = 1 once the current      *)
(* version was claimed).  Each scheduler step conjoins Abs's action last:  *)
(* by then every durable variable is primed, so TLC evaluates Abs's        *)
(* claims' = ... as a check of attempt', not as an assignment.  That is    *)
(* also why, in those steps, the UNCHANGED of the durable variables comes  *)
(* before the scheduler's update.                                          *)
(*                                                                         *)
(* Time.  now is the store's clock and the only one: deadlines are written *)
(* and judged on it.  Only the order of a deadline and now is ever read    *)
(* (Expire), and a new deadline is always now + LeaseTime, so two          *)
(* behaviours that differ only by ticks no lease could notice are the same *)
(* behaviour shifted in time.  Tick is therefore a step only while some    *)
(* live lease has not yet passed its deadline.  This keeps the state space *)
(* small, and it keeps liveness checkable: with a clock that can always    *)
(* tick, every cycle of states would contain a tick (now only grows), so   *)
(* under a bound on the clock TLC would find no fair cycle at all, and     *)
(* every liveness property would hold vacuously.                           *)
(*                                                                         *)
(* Due times and priorities (docs/time.md).  A version is claimed only    *)
(* once due (due[t] <= now), and the eligible versions in the order of     *)
(* their claim key, which never changes while they wait.  Tick is also a   *)
(* step while some waiting version is not yet due, and, with aging, while  *)
(* a due one has waited too short a time to come before every version yet  *)
(* to arrive (its key is fixed, a later arrival's is not): the only other  *)
(* moments a tick can be noticed.                                          *)
(*                                                                         *)
(* Each action is a step of the reference model refsched.model.durable and *)
(* one transaction (or one worker's move) of refsched.durable.             *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    Tasks,          \* the task ids a behaviour may use
    Workers,        \* the worker processes that claim and run versions
    MaxConcurrency, \* how many versions may run at once
    MaxAttempts,    \* how many leases a version may be given before its expiry fails it
    LeaseTime,      \* how long a lease lasts, on the store's clock, from its claim or heartbeat
    LoseAnswers,    \* BOOLEAN: a committed claim or report may lose its answer on the way back
    Priorities,     \* the priorities a Submit may give (integers, higher first)
    Delays,         \* the delays a Submit may give, in ticks: due = now + delay
    Aging,          \* ticks of waiting worth one priority level in the claim key; 0 = none
    NoTask,         \* a model value outside Tasks: blockedBy of a version that is not blocked
    NoWorker,       \* a model value outside Workers: holder of a version with no live lease
    OptionalEdges,  \* BOOLEAN: SubmitOptional and AddDeps may make optional edges
    AddDepsAllowed  \* BOOLEAN: AddDeps may add edges to a pending version

ASSUME NoTask \notin Tasks
ASSUME NoWorker \notin Workers
ASSUME Workers # {}
ASSUME MaxConcurrency \in Nat \ {0}
ASSUME MaxAttempts \in Nat \ {0}
ASSUME LeaseTime \in Nat \ {0}
ASSUME LoseAnswers \in BOOLEAN
ASSUME Priorities \subseteq Int /\ Priorities # {} /\ IsFiniteSet(Priorities)
ASSUME Delays \subseteq Nat /\ Delays # {} /\ IsFiniteSet(Delays)
ASSUME Aging \in Nat
ASSUME OptionalEdges \in BOOLEAN
ASSUME AddDepsAllowed \in BOOLEAN

VARIABLES
    started,         \* BOOLEAN: Start has sealed the initial graph
    closed,          \* BOOLEAN: Close was called: no submissions, no claims (re-claims go on)
    nextSeq,         \* the seq the next new version takes; starts at 1
    generation,      \* [Tasks -> Nat]: current version of t; 0 = never submitted
    state,           \* [Tasks -> States \cup {"absent"}]: state of the current version
    deps,            \* [Tasks -> SUBSET Tasks]: the ids the current version depends on
    optional,        \* [Tasks -> SUBSET Tasks]: the deps of the current version whose edge is
                     \* optional (optional[t] \subseteq deps[t]); the others are required
    remainingDeps,   \* [Tasks -> Nat]: deps not settled (Scheduler's Settles), kept for
                     \* pending/ready, frozen after
    blockedBy,       \* [Tasks -> Tasks \cup {NoTask}]: the dep that blocked a blocked version
    cancelRequested, \* [Tasks -> BOOLEAN]: a cooperative stop was requested while running
    seq,             \* [Tasks -> Nat]: submission sequence number of the version (ready order)
    attempt,         \* [Tasks -> Nat]: how many leases the current version was given; 0 = never
                     \* claimed.  The fencing token of its newest lease
    holder,          \* [Tasks -> Workers \cup {NoWorker}]: the worker whose lease on the current
                     \* version is live; NoWorker when none is (never claimed, ended, expired)
    deadline,        \* [Tasks -> Nat]: when the live lease ends, on now's clock; 0 when none is live
    now,             \* Nat: the store's clock
    held,            \* [Workers -> SUBSET (Tasks \X Nat \X Nat)]: the leases <<t, g, a>> worker
                     \* process w believes it holds (what it is running)
    ends,            \* [Tasks -> Nat]: how many ends of the current version the store accepted
                     \* (a history variable)
    endedAttempt,    \* [Tasks -> Nat]: the attempt whose report ended the current version; 0
                     \* when no report did (the store's ended_attempt): a repeat of that report
                     \* is answered, not refused
    due,             \* [Tasks -> Nat]: when the waiting version of t may be claimed, on now's
                     \* clock; 0 once it no longer waits (as a deadline is 0 with no live lease)
    priority,        \* [Tasks -> Int]: the priority of the current version of t; 0 = never
                     \* submitted
    provenance       \* [Tasks -> records \cup {NoRecord}]: how a blocked or cancelled version
                     \* came to end, as Scheduler's (NoRecord always without RecordProvenance)

schedulerVars == <<started, closed, nextSeq, generation, state, deps, optional, remainingDeps,
                   blockedBy, cancelRequested, seq, provenance>>
\* Scheduler's variables but claims, which the mapping computes from attempt.

leaseVars == <<attempt, holder, deadline, now, held, ends, endedAttempt>>
\* The variables Scheduler does not have.

timeVars == <<due, priority>>
\* The claim order's variables.

vars == <<schedulerVars, leaseVars, timeVars>>

RecordProvenance == FALSE
\* Whether blocked and cancelled versions record their provenance (Scheduler's constant of that
\* name).  A definition, where Scheduler has a CONSTANT, so that every configuration that does
\* not name it keeps it FALSE (and its state counts); MCDurableSchedulerProvenance.cfg turns it
\* on with RecordProvenance <- ProvenanceOn.

Abs == INSTANCE Scheduler WITH claims <- [t \in Tasks |-> IF attempt[t] > 0 THEN 1 ELSE 0],
                               OldestFirst <- (Priorities = {0} /\ Delays = {0}),
                               RecordProvenance <- RecordProvenance,
                               provenance <- provenance
\* The TaskScheduler this scheduler implements: every variable is its own (optional and the
\* constants OptionalEdges and AddDepsAllowed among them), and a version counts as claimed
\* once it was given a lease.  With neither priorities nor delays the claim order is
\* Scheduler's, oldest first (a version's due is the time it was submitted, so due and seq
\* grow together); with them, Scheduler's Claim may take any ready versions, and this spec
\* states its own order (ClaimsInKeyOrder).  Its provenance is Scheduler's, recorded by
\* Scheduler's actions when RecordProvenance is TRUE; every other step leaves it unchanged with
\* schedulerVars (a lease's loss, a heartbeat, a tick end no version by themselves; Expire
\* that fails a version is Abs!Fail).

-----------------------------------------------------------------------------
(* Leases *)

Lease(t) == <<t, generation[t], attempt[t]>>
\* The lease of the current attempt of the current version of t.

Current(w, t, g, a) ==
    /\ g = generation[t]
    /\ a = attempt[t]
    /\ state[t] = "running"
    /\ holder[t] = w
\* The lease <<t, g, a>> of w is the live one: the store accepts its reports.

Live(t) == state[t] = "running" /\ holder[t] # NoWorker
\* The current version of t is running under a live lease.

Repeat(t, g, a) ==
    /\ g = generation[t]
    /\ a = endedAttempt[t]
    /\ state[t] \in Abs!TerminalStates
\* A report with the lease <<t, g, a>> repeats the one that ended the version: the store
\* answers it as it answered the first time, and changes nothing.

Eligible ==
    LET ready == Abs!InState({"ready"})
    IN  {x \in ready : due[x] <= now}
\* The versions a claim may take: ready (every dependency succeeded) and due.

Before(x, y) ==
    IF Aging > 0
    THEN \/ priority[x] * Aging - due[x] > priority[y] * Aging - due[y]
         \/ /\ priority[x] * Aging - due[x] = priority[y] * Aging - due[y]
            /\ seq[x] < seq[y]
    ELSE \/ priority[x] > priority[y]
         \/ priority[x] = priority[y] /\ due[x] < due[y]
         \/ priority[x] = priority[y] /\ due[x] = due[y] /\ seq[x] < seq[y]
\* x comes before y in the claim order.  With aging, by the claim key priority * Aging -
\* due, highest first, then smallest seq: the effective priority priority + (now - due) /
\* Aging grows at the same rate for every version, so the order never changes with time.
\* Without, strict priority: highest first, then earliest due, then smallest seq.

Chosen(k) == {x \in Eligible : Cardinality({y \in Eligible : Before(y, x)}) < k}
\* The versions Claim(k) takes: the first k eligible versions in the claim order.

DueWhileWaiting(d) == due' = [x \in Tasks |-> IF state'[x] \in Abs!Waiting THEN d[x] ELSE 0]
\* due' is d for the versions that still wait after the step, 0 for the others.  Written
\* after the step's update of state, which it reads.

MaxPriority == CHOOSE p \in Priorities : \A q \in Priorities : q <= p
\* The highest priority a version may have.

MaxDelay == CHOOSE d \in Delays : \A e \in Delays : e <= d
\* The longest delay a Submit may give.

Lead(t) == (MaxPriority - priority[t]) * Aging
\* How long the version of t must have been due to come before every version yet to arrive
\* (a Submit with MaxPriority and no delay from now on): a later arrival with priority p
\* and delay d comes after it iff due[t] + (p - priority[t]) * Aging - d <= now, on the
\* keys of Before.  Until then the time it has waited can still change a claim's order, so
\* a tick is noticed; after, every comparison it is in is settled.  0 without aging.

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ attempt = [t \in Tasks |-> 0]
    /\ holder = [t \in Tasks |-> NoWorker]
    /\ deadline = [t \in Tasks |-> 0]
    /\ now = 0
    /\ held = [w \in Workers |-> {}]
    /\ ends = [t \in Tasks |-> 0]
    /\ endedAttempt = [t \in Tasks |-> 0]
    /\ due = [t \in Tasks |-> 0]
    /\ priority = [t \in Tasks |-> 0]
    /\ Abs!Init
\* A fresh store: Scheduler's Init, no lease anywhere, the clock at 0.

-----------------------------------------------------------------------------
(* The scheduler's actions *)

FreshLease(t, p) ==
    /\ attempt' = [attempt EXCEPT ![t] = 0]
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ ends' = [ends EXCEPT ![t] = 0]
    /\ endedAttempt' = [endedAttempt EXCEPT ![t] = 0]
    /\ priority' = [priority EXCEPT ![t] = p]
    /\ UNCHANGED <<now, held>>
\* The lease variables of a new version of t with priority p: never claimed.  (A running
\* version cannot be replaced, so t had no live lease.)

Submit(t, D, p, d) ==
    /\ FreshLease(t, p)
    /\ Abs!Submit(t, D)
    /\ DueWhileWaiting([due EXCEPT ![t] = now + d])
\* submit(t, D, priority=p, delay=d): Scheduler's Submit; the new version has never been
\* claimed, has priority p and is due d ticks from now (unless Settle blocks it at once).

SubmitOptional(t, D, O, p, d) ==
    /\ OptionalEdges
    /\ FreshLease(t, p)
    /\ Abs!SubmitOptional(t, D, O)
    /\ DueWhileWaiting([due EXCEPT ![t] = now + d])
\* submit(t, D \ O, optional=O, priority=p, delay=d): Scheduler's SubmitOptional, with the
\* lease variables and due time of Submit.  The store's settle and fan-in are Scheduler's
\* through the mapping: every step that ends a version (Complete, Fail, AcknowledgeCancel,
\* Cancel, an Expire that gives up) settles the optional edges to it in that same
\* transaction, and a dead optional parent never blocks its child.

Start ==
    /\ UNCHANGED leaseVars
    /\ UNCHANGED timeVars
    /\ Abs!Start
\* start(): Scheduler's Start.

Cancel(t) ==
    /\ UNCHANGED leaseVars
    /\ UNCHANGED priority
    /\ Abs!Cancel(t)
    /\ DueWhileWaiting(due)
\* cancel(t): Scheduler's Cancel.  A running version only gets the request; its worker
\* learns it from its next heartbeat and ends the version with AcknowledgeCancel.

Retry(t) ==
    LET R == Abs!BlockedChain({t})
    IN  /\ attempt' = [x \in Tasks |-> IF x \in R THEN 0 ELSE attempt[x]]
        /\ ends' = [x \in Tasks |-> IF x \in R THEN 0 ELSE ends[x]]
        /\ endedAttempt' = [x \in Tasks |-> IF x \in R THEN 0 ELSE endedAttempt[x]]
        /\ UNCHANGED <<holder, deadline, now, held>>
        /\ UNCHANGED priority
        /\ Abs!Retry(t)
        /\ DueWhileWaiting([x \in Tasks |-> IF x \in R THEN now ELSE due[x]])
\* retry(t): Scheduler's Retry; every new version it makes has never been claimed, keeps
\* its priority and is due at once.  (Members of R are dead, so none has a live lease.)

Close(cancelPending) ==
    /\ UNCHANGED leaseVars
    /\ UNCHANGED priority
    /\ Abs!Close(cancelPending)
    /\ DueWhileWaiting(due)
\* close(cancelPending): Scheduler's Close.  Running versions keep their leases, and
\* expired ones may still be re-claimed: admitted work finishes.

RepeatedCallback(t) ==
    /\ UNCHANGED leaseVars
    /\ UNCHANGED timeVars
    /\ Abs!RepeatedCallback(t)
\* A call on a current version that is already terminal: answered, no change.

AddDeps(t, D, O) ==
    /\ AddDepsAllowed
    /\ UNCHANGED leaseVars
    /\ UNCHANGED priority
    /\ Abs!AddDeps(t, D, O)
    /\ DueWhileWaiting(due)
\* add_deps(t, D \ O, optional=O): Scheduler's AddDeps, one transaction of the store.  Its
\* enabling condition is that the version is pending, read in the transaction that adds
\* the edges: a claim that committed first made it running (or a ready version was never
\* pending), so the call is refused; a claim that comes after sees the new edges.  The
\* version keeps its generation, seq, priority and due time, and no lease changes (a
\* pending version has none); Settle may block it, which ends its wait.

-----------------------------------------------------------------------------
(* Claims and leases *)

Claim(w, k) ==
    LET C == Chosen(k)
    IN  /\ attempt' = [x \in Tasks |-> IF x \in C THEN 1 ELSE attempt[x]]
        /\ holder' = [x \in Tasks |-> IF x \in C THEN w ELSE holder[x]]
        /\ deadline' = [x \in Tasks |-> IF x \in C THEN now + LeaseTime ELSE deadline[x]]
        /\ held' = [held EXCEPT ![w] = @ \cup {<<x, generation[x], 1>> : x \in C}]
        /\ UNCHANGED <<now, ends, endedAttempt>>
        /\ k <= Cardinality(Eligible)
        /\ UNCHANGED priority
        /\ Abs!Claim(k)
        /\ DueWhileWaiting(due)
\* claim(w, limit, lease): Scheduler's Claim(k) (started, not closed, room for k) of the
\* first k eligible versions in the claim order, each taken under a first lease of w that
\* ends LeaseTime from now.

ClaimAnswerLost(w, k) ==
    LET C == Chosen(k)
    IN  /\ LoseAnswers
        /\ attempt' = [x \in Tasks |-> IF x \in C THEN 1 ELSE attempt[x]]
        /\ holder' = [x \in Tasks |-> IF x \in C THEN w ELSE holder[x]]
        /\ deadline' = [x \in Tasks |-> IF x \in C THEN now + LeaseTime ELSE deadline[x]]
        /\ UNCHANGED <<now, held, ends, endedAttempt>>
        /\ k <= Cardinality(Eligible)
        /\ UNCHANGED priority
        /\ Abs!Claim(k)
        /\ DueWhileWaiting(due)
\* Claim(w, k) committed, and its answer never reached w: the store gave the leases (the
\* attempts are spent, w is the holder, the deadlines run), w runs none of them.  They
\* expire, and are re-claimed or fail after MaxAttempts, as a crashed worker's would.

Reclaim(w, t) ==
    /\ state[t] = "running"
    /\ holder[t] = NoWorker
    /\ attempt[t] < MaxAttempts
    /\ attempt' = [attempt EXCEPT ![t] = @ + 1]
    /\ holder' = [holder EXCEPT ![t] = w]
    /\ deadline' = [deadline EXCEPT ![t] = now + LeaseTime]
    /\ held' = [held EXCEPT ![w] = @ \cup {<<t, generation[t], attempt[t] + 1>>}]
    /\ UNCHANGED <<now, ends, endedAttempt>>
    /\ UNCHANGED schedulerVars
    /\ UNCHANGED timeVars
\* claim(w, ...) re-claims a running version whose lease expired: a new attempt, a new
\* fencing token.  Allowed after Close too (the version was admitted); the version keeps
\* the concurrency slot it never gave up.

ReclaimAnswerLost(w, t) ==
    /\ LoseAnswers
    /\ state[t] = "running"
    /\ holder[t] = NoWorker
    /\ attempt[t] < MaxAttempts
    /\ attempt' = [attempt EXCEPT ![t] = @ + 1]
    /\ holder' = [holder EXCEPT ![t] = w]
    /\ deadline' = [deadline EXCEPT ![t] = now + LeaseTime]
    /\ UNCHANGED <<now, held, ends, endedAttempt>>
    /\ UNCHANGED schedulerVars
    /\ UNCHANGED timeVars
\* Reclaim(w, t) committed, and its answer never reached w: the attempt is spent on a lease
\* nobody runs.

Heartbeat(w, t, g, a) ==
    /\ <<t, g, a>> \in held[w]
    /\ Current(w, t, g, a)
    /\ deadline' = [deadline EXCEPT ![t] = now + LeaseTime]
    /\ UNCHANGED <<attempt, holder, now, held, ends, endedAttempt>>
    /\ UNCHANGED schedulerVars
    /\ UNCHANGED timeVars
\* heartbeat(lease): the live lease lasts LeaseTime from now.  The answer says whether a
\* cancel was requested (cancelRequested[t]).  Even past its deadline, a lease that no
\* Expire took away is still live: expiry is a step, not a reading of the clock.

Complete(w, t, g, a) ==
    /\ <<t, g, a>> \in held[w]
    /\ Current(w, t, g, a)
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ ends' = [ends EXCEPT ![t] = @ + 1]
    /\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]
    /\ held' = [held EXCEPT ![w] = @ \ {<<t, g, a>>}]
    /\ UNCHANGED <<attempt, now>>
    /\ Abs!Complete(t, g)
    /\ UNCHANGED timeVars
\* complete(lease, result): with the live lease, Scheduler's Complete: the version
\* succeeds, its pending dependents count one dep fewer.  The lease ends.

Fail(w, t, g, a) ==
    /\ <<t, g, a>> \in held[w]
    /\ Current(w, t, g, a)
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ ends' = [ends EXCEPT ![t] = @ + 1]
    /\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]
    /\ held' = [held EXCEPT ![w] = @ \ {<<t, g, a>>}]
    /\ UNCHANGED <<attempt, now>>
    /\ Abs!Fail(t, g)
    /\ UNCHANGED priority
    /\ DueWhileWaiting(due)
\* fail(lease, error): with the live lease, Scheduler's Fail (then Settle).  The lease ends.

AcknowledgeCancel(w, t, g, a) ==
    /\ <<t, g, a>> \in held[w]
    /\ Current(w, t, g, a)
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ ends' = [ends EXCEPT ![t] = @ + 1]
    /\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]
    /\ held' = [held EXCEPT ![w] = @ \ {<<t, g, a>>}]
    /\ UNCHANGED <<attempt, now>>
    /\ Abs!AcknowledgeCancel(t, g)
    /\ UNCHANGED priority
    /\ DueWhileWaiting(due)
\* acknowledge_cancel(lease): with the live lease, Scheduler's AcknowledgeCancel (then
\* Settle).  The lease ends.

CompleteAnswerLost(w, t, g, a) ==
    /\ LoseAnswers
    /\ <<t, g, a>> \in held[w]
    /\ Current(w, t, g, a)
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ ends' = [ends EXCEPT ![t] = @ + 1]
    /\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]
    /\ UNCHANGED <<attempt, now, held>>
    /\ Abs!Complete(t, g)
    /\ UNCHANGED timeVars
\* complete(lease, result) committed, as Complete, and its answer never reached w: w still
\* holds the lease, and makes the same report again (RepeatedReport) or dies.

FailAnswerLost(w, t, g, a) ==
    /\ LoseAnswers
    /\ <<t, g, a>> \in held[w]
    /\ Current(w, t, g, a)
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ ends' = [ends EXCEPT ![t] = @ + 1]
    /\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]
    /\ UNCHANGED <<attempt, now, held>>
    /\ Abs!Fail(t, g)
    /\ UNCHANGED priority
    /\ DueWhileWaiting(due)
\* fail(lease, error) committed, as Fail; its answer was lost.

AcknowledgeCancelAnswerLost(w, t, g, a) ==
    /\ LoseAnswers
    /\ <<t, g, a>> \in held[w]
    /\ Current(w, t, g, a)
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ ends' = [ends EXCEPT ![t] = @ + 1]
    /\ endedAttempt' = [endedAttempt EXCEPT ![t] = a]
    /\ UNCHANGED <<attempt, now, held>>
    /\ Abs!AcknowledgeCancel(t, g)
    /\ UNCHANGED priority
    /\ DueWhileWaiting(due)
\* acknowledge_cancel(lease) committed, as AcknowledgeCancel; its answer was lost.

RepeatedReport(w, t, g, a) ==
    /\ <<t, g, a>> \in held[w]
    /\ Repeat(t, g, a)
    /\ held' = [held EXCEPT ![w] = @ \ {<<t, g, a>>}]
    /\ UNCHANGED <<attempt, holder, deadline, now, ends, endedAttempt>>
    /\ Abs!RepeatedCallback(t)
    /\ UNCHANGED timeVars
\* w repeats the report whose answer it lost (the worker retries a store call that failed
\* with a connection error): the store answers it as accepted (duplicate_callbacks counts
\* it) and changes nothing, Scheduler's RepeatedCallback; w drops the lease.  The repeat of
\* a complete is answered "succeeded" even if the version ended otherwise in between: it
\* cannot, a terminal version never changes, and the next version has a new generation.

Refused(w, t, g, a) ==
    /\ <<t, g, a>> \in held[w]
    /\ ~Current(w, t, g, a)
    /\ ~Repeat(t, g, a)
    /\ held' = [held EXCEPT ![w] = @ \ {<<t, g, a>>}]
    /\ UNCHANGED <<attempt, holder, deadline, now, ends, endedAttempt>>
    /\ UNCHANGED schedulerVars
    /\ UNCHANGED timeVars
\* Any of heartbeat, complete, fail or acknowledge_cancel with a lease that is not the live
\* one (an older generation, an older attempt, an expired lease, a version another attempt
\* or an expiry ended): the store changes nothing (LeaseLostError from heartbeat,
\* StaleLeaseError from the others) and the worker drops the lease.  The lease of the
\* report that ended the version is not refused: the worker only holds it still because
\* that report's answer was lost, and its next call is the same report (RepeatedReport).

AnyRefused(w) == \E l \in held[w] : Refused(w, l[1], l[2], l[3])
\* Refused for every lease w holds.  TLC names a step after the innermost operator it
\* reaches before a quantifier whose range depends on the state, so in a state-graph dump
\* these steps are labelled AnyRefused.

Expire(t) ==
    /\ Live(t)
    /\ deadline[t] < now
    /\ holder' = [holder EXCEPT ![t] = NoWorker]
    /\ deadline' = [deadline EXCEPT ![t] = 0]
    /\ UNCHANGED <<attempt, now, held, endedAttempt>>
    /\ \/ /\ attempt[t] < MaxAttempts
          /\ UNCHANGED ends
          /\ UNCHANGED schedulerVars
       \/ /\ attempt[t] >= MaxAttempts
          /\ ends' = [ends EXCEPT ![t] = @ + 1]
          /\ Abs!Fail(t, generation[t])
    /\ UNCHANGED priority
    /\ DueWhileWaiting(due)
\* Inside any transaction that claims: the live lease of t is past its deadline.  With
\* attempts left, the lease is taken away and the version, still running and still in its
\* slot, waits to be re-claimed.  After MaxAttempts leases the version fails (the cause is
\* "lease expired MaxAttempts times"), then Settle: that is its end, and no report's, so
\* endedAttempt stays 0 (the store writes no ended_attempt) and every later report of the
\* version is refused.  The step is
\* conditional on the lease it read being the live one, so a report committed first wins
\* and a report that comes after is refused.

Noticing ==
    {t \in Tasks : \/ Live(t) /\ deadline[t] >= now
                   \/ state[t] \in Abs!Waiting /\ due[t] + Lead(t) > now}
\* The versions a tick can be noticed by: a live lease yet to pass its deadline, a waiting
\* version yet to be due or, with aging, due less than Lead(t) ago.  A set, not an \E in
\* Tick: TLC would make one Tick step for each witness, all to the same state.

Tick ==
    /\ Noticing # {}
    /\ now' = now + 1
    /\ UNCHANGED <<attempt, holder, deadline, held, ends, endedAttempt>>
    /\ UNCHANGED schedulerVars
    /\ UNCHANGED timeVars
\* Time passes on the store's clock, while some live lease has yet to pass its deadline or
\* some waiting version is not yet due: the only moments a tick can be noticed (see the
\* module's comment).

Crash(w) ==
    /\ held[w] # {}
    /\ held' = [held EXCEPT ![w] = {}]
    /\ UNCHANGED <<attempt, holder, deadline, now, ends, endedAttempt>>
    /\ UNCHANGED schedulerVars
    /\ UNCHANGED timeVars
\* Worker process w dies and forgets what it ran; its leases stay in the store until they
\* expire.  A worker that pauses is not a step: meanwhile the clock ticks and its leases
\* expire.  A crash of a worker that holds nothing changes nothing: no step.

Next ==
    \/ \E t \in Tasks : \E D \in SUBSET (Tasks \ {t}) : \E p \in Priorities : \E d \in Delays :
          Submit(t, D, p, d)
    \/ Start
    \/ \E w \in Workers : \E k \in 1..MaxConcurrency : Claim(w, k)
    \/ \E w \in Workers : \E t \in Tasks : Reclaim(w, t)
    \/ \E w \in Workers : \E t \in Tasks : Heartbeat(w, t, generation[t], attempt[t])
    \/ \E w \in Workers : \E t \in Tasks : Complete(w, t, generation[t], attempt[t])
    \/ \E w \in Workers : \E t \in Tasks : Fail(w, t, generation[t], attempt[t])
    \/ \E w \in Workers : \E t \in Tasks : AcknowledgeCancel(w, t, generation[t], attempt[t])
    \/ \E w \in Workers : AnyRefused(w)
    \/ \E w \in Workers : \E t \in Tasks : RepeatedReport(w, t, generation[t], endedAttempt[t])
    \/ \E t \in Tasks : Expire(t)
    \/ Tick
    \/ \E w \in Workers : Crash(w)
    \/ \E t \in Tasks : Cancel(t)
    \/ \E t \in Tasks : Retry(t)
    \/ \E c \in BOOLEAN : Close(c)
    \/ \E t \in Tasks : RepeatedCallback(t)
    \/ \E w \in Workers : \E k \in 1..MaxConcurrency : ClaimAnswerLost(w, k)
    \/ \E w \in Workers : \E t \in Tasks : ReclaimAnswerLost(w, t)
    \/ \E w \in Workers : \E t \in Tasks : CompleteAnswerLost(w, t, generation[t], attempt[t])
    \/ \E w \in Workers : \E t \in Tasks : FailAnswerLost(w, t, generation[t], attempt[t])
    \/ \E w \in Workers : \E t \in Tasks :
          AcknowledgeCancelAnswerLost(w, t, generation[t], attempt[t])
    \/ \E t \in Tasks : \E D \in SUBSET (Tasks \ {t}) : \E O \in SUBSET D :
          \E p \in Priorities : \E d \in Delays : SubmitOptional(t, D, O, p, d)
    \/ \E t \in Tasks : \E D \in SUBSET (Tasks \ {t}) : \E O \in SUBSET D : AddDeps(t, D, O)
\* Any one transaction, or any one worker's move.  A report is enabled only with the live
\* lease, so its generation and attempt are the current ones; RepeatedReport takes the
\* lease of the report that ended the version, Refused the others.  A transaction whose
\* answer is lost is the same change of the store with no change of held; a lost answer of
\* a heartbeat needs no step of its own (see docs/durable.md).

Spec == Init /\ [][Next]_vars
\* Every behaviour of the durable scheduler, without fairness.

-----------------------------------------------------------------------------
(* Fairness *)

FairWorker == CHOOSE w \in Workers : TRUE
\* One worker process that keeps working; every other one may stop for good at any time.

Finish(w, t) ==
    \/ Complete(w, t, generation[t], attempt[t])
    \/ Fail(w, t, generation[t], attempt[t])
    \/ AcknowledgeCancel(w, t, generation[t], attempt[t])
\* w ends the version of t it runs under the live lease, one way or another.

Stop(w) == (\E t \in Tasks : Finish(w, t)) \/ Crash(w)
\* w stops running something: it reports its end, or it dies.

FairSpec ==
    /\ Spec
    /\ WF_vars(Tick)
    /\ \A t \in Tasks : WF_vars(Expire(t))
    /\ WF_vars(\E k \in 1..MaxConcurrency : Claim(FairWorker, k))
    /\ \A t \in Tasks : WF_vars(Reclaim(FairWorker, t))
    /\ \A t \in Tasks : WF_vars(Finish(FairWorker, t))
    /\ \A w \in Workers \ {FairWorker} : WF_vars(Stop(w))
\* Time passes, and leases past their deadline are taken away (the fair worker's claim
\* transactions do it); the fair worker keeps claiming while there is room, re-claims what
\* others lost, and ends what it runs.  Every other worker may claim or not, but does not
\* run a version forever: it ends it or it dies (a pause forever is a death: its leases
\* expire either way).  Without the last condition another worker could heartbeat one
\* version forever; without fairness on Tick, Expire and the fair worker's Reclaim, the
\* version of a crashed worker would never end.

-----------------------------------------------------------------------------
(* Invariants: Scheduler's, through the mapping *)

TypeOK ==
    /\ Abs!TypeOK
    /\ attempt \in [Tasks -> Nat]
    /\ holder \in [Tasks -> Workers \cup {NoWorker}]
    /\ deadline \in [Tasks -> Nat]
    /\ now \in Nat
    /\ held \in [Workers -> SUBSET (Tasks \X Nat \X Nat)]
    /\ ends \in [Tasks -> Nat]
    /\ endedAttempt \in [Tasks -> Nat]
    /\ due \in [Tasks -> Nat]
    /\ \A t \in Tasks : generation[t] = 0 \/ priority[t] \in Priorities
    /\ \A t \in Tasks : generation[t] = 0 => priority[t] = 0
\* Every variable holds a value of its type; a version's priority is one a Submit may give.

IndegreeInvariant == Abs!IndegreeInvariant
\* Scheduler's: the count of a waiting version is exact, and it is pending exactly while
\* some dep has not succeeded.

ConcurrencyBound == Abs!ConcurrencyBound
\* Scheduler's: never more running versions (with a live lease or waiting to be
\* re-claimed) than the limit.

BlockedHasCause == Abs!BlockedHasCause
\* Scheduler's: a version is blocked exactly when it names the dep that blocked it.

BlockedPropagated == Abs!BlockedPropagated
\* Scheduler's: no waiting version has a dead dependency.

SealedGraph == Abs!SealedGraph
\* Scheduler's: once started, the graph is closed and acyclic.

NoTerminalToReady == Abs!NoTerminalToReady
\* Scheduler's action property: a terminal version never changes state.

ClaimOnlyAfterDepsSucceeded == Abs!ClaimOnlyAfterDepsSucceeded
\* Scheduler's action property: no dependent is claimed before every dependency's success
\* is committed.

ReadyOnlyAfterDepsSettled == Abs!ReadyOnlyAfterDepsSettled
\* Scheduler's action property: a version becomes ready or running only once each required
\* parent has succeeded and each optional parent has ended, as committed in the store.

EdgesAddedOnlyToPending == Abs!EdgesAddedOnlyToPending
\* Scheduler's action property: a version gains deps only while it is pending, so an edge
\* never lands on a version a claim took (the transaction is fenced by the state it reads).

OptionalParentNeverBlocks == Abs!OptionalParentNeverBlocks
\* Scheduler's action property: a version is blocked only by a dead required parent.

ProvenanceRecorded == Abs!ProvenanceRecorded
\* Scheduler's: with RecordProvenance, a version is blocked or cancelled exactly when it has a
\* provenance record.

ProvenanceRootEnded == Abs!ProvenanceRootEnded
\* Scheduler's: a record's root, while it is the current version, ended as the record says.

ProvenanceNeverRewritten == Abs!ProvenanceNeverRewritten
\* Scheduler's action property: a record stays while its version does, whatever a lease, a
\* tick or a report that loses its answer does.

ProvenancePathsReal == Abs!ProvenancePathsReal
\* Scheduler's action property: a record is set as a cancelled version's own, or as a dead
\* required dep's path extended by the version.

-----------------------------------------------------------------------------
(* Invariants of the leases *)

AtMostOneEndPerVersion == \A t \in Tasks : ends[t] <= 1
\* The store accepts at most one end of each version.

AtMostOneLiveLease ==
    \A t \in Tasks :
        /\ holder[t] # NoWorker => state[t] = "running"
        /\ \A w \in Workers :
               Lease(t) \in held[w] =>
                   /\ holder[t] \in {w, NoWorker}
                   /\ \A v \in Workers \ {w} : Lease(t) \notin held[v]
\* A version has a live lease only while it runs, and the lease of its current attempt is
\* held by one worker at most: the holder, if the lease is still live.  So at most one
\* worker runs the version with a lease the store would accept.

AttemptsBounded == \A t \in Tasks : attempt[t] <= MaxAttempts
\* No version is given more than MaxAttempts leases.

LeaseFitsState ==
    \A t \in Tasks :
        /\ state[t] \in Abs!Waiting \cup {"absent"} =>
               /\ attempt[t] = 0
               /\ holder[t] = NoWorker
               /\ deadline[t] = 0
               /\ ends[t] = 0
        /\ state[t] = "running" => attempt[t] >= 1
        /\ (holder[t] = NoWorker) <=> (deadline[t] = 0)
        /\ state[t] \notin Abs!Waiting => due[t] = 0
        /\ due[t] <= now + MaxDelay
\* A version that is absent or waiting carries no lease state: never claimed, no live
\* lease, no deadline, no accepted end.  A running one was given a lease at least once, and
\* a deadline is written exactly while a lease is live.  A due time is kept only while the
\* version waits, and is never further from now than the longest delay.

NoLostVersion ==
    \A t \in Tasks : (state[t] = "running" /\ holder[t] = NoWorker) => attempt[t] < MaxAttempts
\* A running version with no live lease still has an attempt left, so a re-claim can take
\* it: the safety half of "no version is lost" (the other half, that someone does re-claim
\* it, is EveryVersionEnds).

EndedAttemptFits ==
    \A t \in Tasks :
        /\ endedAttempt[t] > 0 =>
               /\ endedAttempt[t] = attempt[t]
               /\ state[t] \in {"succeeded", "failed", "cancelled"}
               /\ ends[t] > 0
        /\ (attempt[t] > 0 /\ state[t] \in {"succeeded", "cancelled"}) =>
               endedAttempt[t] = attempt[t]
\* The report that ended a version was made with its newest attempt, and the version is
\* over by it (it never ends blocked: only a waiting version is blocked); a claimed version
\* that succeeded or was cancelled was ended by a report (an expiry only fails), so a repeat
\* of that report is answered.  A version failed by its last expiry has none.

NoFutureLease ==
    \A w \in Workers : \A l \in held[w] :
        /\ 1 <= l[2] /\ l[2] <= generation[l[1]]
        /\ l[2] = generation[l[1]] => 1 <= l[3] /\ l[3] <= attempt[l[1]]
\* No worker believes it holds a lease the store never gave: no generation after the
\* current one, and in the current one no attempt after the newest.

-----------------------------------------------------------------------------
(* Action properties of the leases *)

OnlyCurrentAttemptEnds ==
    [][\A t \in Tasks :
          (generation'[t] = generation[t] /\ ends'[t] # ends[t])
              => /\ Live(t)
                 /\ \/ /\ Lease(t) \in held[holder[t]]
                       /\ held'[holder[t]] \in {held[holder[t]] \ {Lease(t)}, held[holder[t]]}
                       /\ held' = [held EXCEPT ![holder[t]] = held'[holder[t]]]
                    \/ /\ held' = held
                       /\ deadline[t] < now
                       /\ attempt[t] >= MaxAttempts]_vars
\* The store accepts an end of a version only from its current attempt, under a live
\* lease: either the holder reports with that lease (and drops it, or keeps it when the
\* answer is lost), and no other worker's leases change, or, with no report, the lease
\* expires after the last attempt.

-----------------------------------------------------------------------------
(* Action properties of the claim order (docs/time.md) *)

ClaimedNow(t) == state[t] = "ready" /\ state'[t] = "running"
\* The step claims the version of t.

LeftEligible(t) == state[t] = "ready" /\ state'[t] = "ready" /\ due[t] <= now
\* The step leaves the version of t ready, and it was due.

ClaimsOnlyDue == [][\A t \in Tasks : ClaimedNow(t) => due[t] <= now]_vars
\* No version is claimed before its due time.

ClaimsInKeyOrder ==
    [][\A t, u \in Tasks :
          (ClaimedNow(u) /\ LeftEligible(t)) =>
              IF Aging > 0
              THEN \/ priority[u] * Aging - due[u] > priority[t] * Aging - due[t]
                   \/ /\ priority[u] * Aging - due[u] = priority[t] * Aging - due[t]
                      /\ seq[u] < seq[t]
              ELSE \/ priority[u] > priority[t]
                   \/ priority[u] = priority[t] /\ due[u] < due[t]
                   \/ priority[u] = priority[t] /\ due[u] = due[t] /\ seq[u] < seq[t]]_vars
\* A claim never leaves an eligible version that comes before one it took: every version
\* it took comes before every eligible version it left.  Written from docs/time.md, apart
\* from Before and Chosen, so that a claim of the wrong ones does not pass unnoticed.

AgingBound ==
    [][Aging > 0 =>
          \A t, u \in Tasks :
              (ClaimedNow(u) /\ LeftEligible(t)) =>
                  due[u] - due[t] <= (MaxPriority - priority[t]) * Aging]_vars
\* With aging, a claim never takes u while it leaves an eligible t that was due more than
\* (MaxPriority - priority[t]) * Aging before it: once t is due, only the finitely many
\* versions due before due[t] + (MaxPriority - priority[t]) * Aging can go first.  Stated
\* on due times and priorities alone, without the claim key, so that a wrong key is caught.

-----------------------------------------------------------------------------
(* The refinement *)

Refinement == [][Abs!Next]_(Abs!vars)
\* Every behaviour is one of Scheduler's, under the mapping: Abs!Spec, whose other part,
\* Abs!Init, Init states itself.  Reclaim, ReclaimAnswerLost, Heartbeat, Refused, Tick,
\* Crash and an Expire that leaves attempts are stuttering steps; RepeatedReport is
\* Scheduler's RepeatedCallback (a stuttering step too); an Expire that gives up is
\* Scheduler's Fail; a lost answer's step is the step whose answer it lost.
\* (Written without Abs!Init so that TLC names it when it is violated: it names the parts
\* of a conjunction by their place in the text.)

-----------------------------------------------------------------------------
(* Every call Scheduler takes, the durable scheduler takes *)

(***************************************************************************)
(* Each scheduler step above is "lease updates /\ Abs!X": under the        *)
(* mapping, Abs!X's claims' = ... reads attempt', so a wrong lease update  *)
(* does not make a wrong step, it makes no step at all, and Refinement     *)
(* (which only looks at steps taken) stays quiet.  These invariants close  *)
(* that gap: wherever Scheduler's call is enabled, the durable one is too. *)
(* SchedulerMay(A) is ENABLED A with attempt' chosen freely: attempt' only *)
(* matters through claims', whose every value some attempt' in [Tasks ->   *)
(* {0, 1}] gives.  The lease variables Abs does not mention are left       *)
(* unassigned, which ENABLED allows.                                       *)
(***************************************************************************)

SchedulerMay(A) == ENABLED (attempt' \in [Tasks -> {0, 1}] /\ A)
\* Scheduler's step A can be taken from here, under some attempt'.

Taken(durable, A) == durable \/ ~SchedulerMay(A)
\* Where Scheduler's step A is enabled, durable (the ENABLED of the durable step) holds.
\* Written with the durable side first: where it holds, which is most states, TLC does not
\* evaluate Scheduler's side, and the check costs one ENABLED.

CallsTaken ==
    /\ Taken(ENABLED Start, Abs!Start)
    /\ \A c \in BOOLEAN : Taken(ENABLED Close(c), Abs!Close(c))
    /\ \A t \in Tasks :
          /\ \A D \in SUBSET (Tasks \ {t}) :
                Taken(ENABLED (\E p \in Priorities : \E d \in Delays : Submit(t, D, p, d)),
                      Abs!Submit(t, D))
          /\ OptionalEdges =>
                \A D \in SUBSET (Tasks \ {t}) : \A O \in SUBSET D :
                    Taken(ENABLED (\E p \in Priorities : \E d \in Delays :
                                       SubmitOptional(t, D, O, p, d)),
                          Abs!SubmitOptional(t, D, O))
          /\ AddDepsAllowed =>
                \A D \in SUBSET (Tasks \ {t}) : \A O \in SUBSET D :
                    Taken(ENABLED AddDeps(t, D, O), Abs!AddDeps(t, D, O))
          /\ Taken(ENABLED Cancel(t), Abs!Cancel(t))
          /\ Taken(ENABLED Retry(t), Abs!Retry(t))
          /\ Taken(ENABLED RepeatedCallback(t), Abs!RepeatedCallback(t))
    /\ \A k \in 1..MaxConcurrency :
          k <= Cardinality(Eligible) =>
              Taken(ENABLED (\E w \in Workers : Claim(w, k)), Abs!Claim(k))
\* Every call of Scheduler that is enabled is enabled here too: Start, Close, Submit (with
\* some priority and delay: Submit has no guard on either, so one is all), SubmitOptional
\* and AddDeps (where their constants allow them), Cancel, Retry, a repeated callback, and a claim of k versions by some worker, where k versions are due
\* (Scheduler, which knows no due times, may claim a ready version that is not yet due; the
\* durable scheduler may not).

ReportsTaken ==
    \A t \in Tasks :
        LET w == holder[t]
            g == generation[t]
            a == attempt[t]
        IN  /\ (Live(t) /\ Lease(t) \in held[w]) =>
                   /\ Taken(ENABLED Complete(w, t, g, a), Abs!Complete(t, g))
                   /\ Taken(ENABLED Fail(w, t, g, a), Abs!Fail(t, g))
                   /\ Taken(ENABLED AcknowledgeCancel(w, t, g, a), Abs!AcknowledgeCancel(t, g))
            /\ (Live(t) /\ deadline[t] < now /\ attempt[t] >= MaxAttempts) =>
                   Taken(ENABLED Expire(t), Abs!Fail(t, g))
\* Every end Scheduler allows is taken from the worker whose live lease it is, when that
\* worker still holds it (a crashed worker's version can only expire); and the expiry of
\* the last attempt past its deadline is Scheduler's Fail.

-----------------------------------------------------------------------------
(* Liveness *)

Generations == Nat
\* The generations EveryVersionEnds speaks about; a model-checking module overrides it
\* with a finite range, since TLC cannot quantify over Nat in a temporal formula.

EveryVersionEnds ==
    \A t \in Tasks : \A g \in Generations :
        /\ (state[t] = "running" /\ generation[t] = g)
               ~> (state[t] # "running" \/ generation[t] # g)
        /\ (started /\ ~closed /\ state[t] \in Abs!Waiting /\ generation[t] = g)
               ~> (closed \/ state[t] \notin Abs!Waiting \/ generation[t] # g)
\* Scheduler's: every running version ends, whichever workers crash or pause; every
\* waiting version of a started, open scheduler is claimed, blocked, cancelled or
\* replaced, unless the scheduler is closed first.

AbsFairSpec == Abs!FairSpec
\* The whole refinement, fairness included: every behaviour of FairSpec is a fair
\* behaviour of Scheduler under the mapping (its claims are taken while there is room and
\* ready work, its running versions end).  Refinement checks the safety part alone, in
\* every config; this one needs FairSpec, so only the liveness config checks it.
=============================================================================

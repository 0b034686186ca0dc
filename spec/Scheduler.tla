----------------------------- MODULE Scheduler -----------------------------
(***************************************************************************)
(* The dependency-aware TaskScheduler of refsched, stated as docs/         *)
(* semantics.md states it.  Every task id holds one current version        *)
(* (generation[t]); a version moves pending -> ready -> running ->         *)
(* succeeded | failed | cancelled, or is blocked by a dead dependency.     *)
(* Retrying or resubmitting creates a new version; a version never comes   *)
(* back from a terminal state.  Each action here is a step of the          *)
(* reference model refsched.model and a call of refsched.TaskScheduler.    *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    Tasks,          \* the task ids a behaviour may use
    MaxConcurrency, \* how many versions may run at once
    OldestFirst,    \* BOOLEAN: a claim takes the oldest ready versions (smallest seq); FALSE:
                    \* any ready versions (a refinement that states its own order)
    NoTask          \* a model value outside Tasks: blockedBy of a version that is not blocked

ASSUME NoTask \notin Tasks
ASSUME MaxConcurrency \in Nat \ {0}
ASSUME OldestFirst \in BOOLEAN

VARIABLES
    started,         \* BOOLEAN: Start has sealed the initial graph
    closed,          \* BOOLEAN: Close was called: no submissions, no claims
    nextSeq,         \* the seq the next new version takes; starts at 1
    generation,      \* [Tasks -> Nat]: current version of t; 0 = never submitted
    state,           \* [Tasks -> States \cup {"absent"}]: state of the current version
    deps,            \* [Tasks -> SUBSET Tasks]: the ids the current version depends on
    remainingDeps,   \* [Tasks -> Nat]: deps not succeeded, kept for pending/ready, frozen after
    blockedBy,       \* [Tasks -> Tasks \cup {NoTask}]: the dep that blocked a blocked version
    cancelRequested, \* [Tasks -> BOOLEAN]: a cooperative stop was requested while running
    claims,          \* [Tasks -> Nat]: how many times the current version was claimed
    seq              \* [Tasks -> Nat]: submission sequence number of the version (ready order)

vars == <<started, closed, nextSeq, generation, state, deps, remainingDeps,
          blockedBy, cancelRequested, claims, seq>>

-----------------------------------------------------------------------------
(* State classes *)

States == {"pending", "ready", "running", "succeeded", "failed", "blocked", "cancelled"}
\* The states a submitted version can be in; "absent" marks an id never submitted.

DeadStates == {"failed", "blocked", "cancelled"}
\* A dead version can never succeed.

TerminalStates == {"succeeded"} \cup DeadStates
\* A terminal version never changes state again.

Waiting == {"pending", "ready"}
\* A waiting version has not been claimed yet; only these are touched by Settle.

Submitted == {t \in Tasks : generation[t] > 0}
\* The ids that have a current version.

InState(S) == {t \in Tasks : state[t] \in S}
\* The ids whose current version is in one of the states S.

NotSucceeded(st, D) == Cardinality({d \in D : st[d] # "succeeded"})
\* How many of the ids D have no succeeded current version under the state map st
\* (an absent dependency counts as not succeeded).

-----------------------------------------------------------------------------
(* Graph helpers *)

RECURSIVE ReachFrom(_, _)
ReachFrom(S, dp) ==
    LET S2 == S \cup UNION {dp[x] : x \in S}
    IN  IF S2 = S THEN S ELSE ReachFrom(S2, dp)
\* S and every id reachable from S by following dependency edges dp.

Acyclic(dp) == \A t \in Tasks : t \notin ReachFrom(dp[t], dp)
\* No id depends on itself through one or more dependency edges.

RECURSIVE Grow(_, _, _)
Grow(S, live, dp) ==
    LET S2 == S \cup {x \in live : dp[x] \cap S # {}}
    IN  IF S2 = S THEN S ELSE Grow(S2, live, dp)
\* S and every id of live from which S can be reached through ids of live only.

RECURSIVE BlockedChain(_)
BlockedChain(S) ==
    LET S2 == S \cup {x \in Tasks : state[x] = "blocked" /\ blockedBy[x] \in S}
    IN  IF S2 = S THEN S ELSE BlockedChain(S2)
\* S and every blocked version whose blockedBy chain leads back into S.

Settle(st, dp, sq, bb) ==
    LET live    == {x \in Tasks : st[x] \in Waiting}
        dead    == {x \in Tasks : st[x] \in DeadStates}
        B       == Grow(dead, live, dp) \ dead
        Blame(x) == LET cause == dp[x] \cap (dead \cup B)
                    IN  CHOOSE d \in cause : \A e \in cause : sq[d] <= sq[e]
    IN  [state     |-> [x \in Tasks |-> IF x \in B THEN "blocked" ELSE st[x]],
         blockedBy |-> [x \in Tasks |-> IF x \in B THEN Blame(x) ELSE bb[x]]]
\* Blocking spreads: given the state map st, deps dp, seq sq and blockedBy bb an
\* action has produced, B is the set of waiting versions that reach a dead version
\* through waiting versions only.  Each member of B becomes blocked, blamed on its dep
\* with the smallest seq among those dead or in B.  Returns the new state and
\* blockedBy maps; nothing else changes, and running or terminal versions are untouched.

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ started = FALSE
    /\ closed = FALSE
    /\ nextSeq = 1
    /\ generation = [t \in Tasks |-> 0]
    /\ state = [t \in Tasks |-> "absent"]
    /\ deps = [t \in Tasks |-> {}]
    /\ remainingDeps = [t \in Tasks |-> 0]
    /\ blockedBy = [t \in Tasks |-> NoTask]
    /\ cancelRequested = [t \in Tasks |-> FALSE]
    /\ claims = [t \in Tasks |-> 0]
    /\ seq = [t \in Tasks |-> 0]
\* A fresh scheduler: not started, not closed, no id submitted.

-----------------------------------------------------------------------------
(* Actions *)

Submit(t, D) ==
    /\ t \notin D
    /\ ~closed
    /\ state[t] # "running"
    /\ started => D \subseteq Submitted
    /\ started => t \notin ReachFrom(D, deps)
    /\ LET newDeps == [deps EXCEPT ![t] = D]
           newSeq  == [seq EXCEPT ![t] = nextSeq]
           rd      == NotSucceeded(state, D)
           \* Replacing a succeeded version un-succeeds a dep of its waiting dependents.
           bumped  == IF state[t] = "succeeded"
                      THEN {x \in Tasks : t \in deps[x] /\ state[x] \in Waiting}
                      ELSE {}
           st1     == [x \in Tasks |->
                          IF x = t THEN (IF rd = 0 THEN "ready" ELSE "pending")
                          ELSE IF x \in bumped THEN "pending"
                          ELSE state[x]]
           settled == Settle(st1, newDeps, newSeq, [blockedBy EXCEPT ![t] = NoTask])
       IN  /\ generation' = [generation EXCEPT ![t] = @ + 1]
           /\ deps' = newDeps
           /\ seq' = newSeq
           /\ nextSeq' = nextSeq + 1
           /\ claims' = [claims EXCEPT ![t] = 0]
           /\ cancelRequested' = [cancelRequested EXCEPT ![t] = FALSE]
           /\ remainingDeps' = [x \in Tasks |->
                                  IF x = t THEN rd
                                  ELSE IF x \in bumped THEN remainingDeps[x] + 1
                                  ELSE remainingDeps[x]]
           /\ state' = settled.state
           /\ blockedBy' = settled.blockedBy
    /\ UNCHANGED <<started, closed>>
\* submit(t, D): a new version of t depending on D, ready if every dep has succeeded,
\* else pending, then Settle.  After Start, D must be submitted ids and must not close
\* a cycle (t must not be reachable from D).  A running version cannot be replaced.

Start ==
    /\ ~closed
    /\ ~started
    /\ \A t \in Submitted : deps[t] \subseteq Submitted
    /\ Acyclic(deps)
    /\ started' = TRUE
    /\ UNCHANGED <<closed, nextSeq, generation, state, deps, remainingDeps,
                   blockedBy, cancelRequested, claims, seq>>
\* start(): seal the initial graph.  Its error cases (unknown deps, cycles) are not steps.

Claim(k) ==
    LET ready   == InState({"ready"})
        running == InState({"running"})
        oldest  == {x \in ready : Cardinality({y \in ready : seq[y] < seq[x]}) < k}
        choices == IF OldestFirst THEN {oldest}
                   ELSE {S \in SUBSET ready : Cardinality(S) = k}
    IN  /\ started
        /\ ~closed
        /\ 1 <= k
        /\ k <= Cardinality(ready)
        /\ k <= MaxConcurrency - Cardinality(running)
        /\ \E chosen \in choices :
              /\ state' = [x \in Tasks |-> IF x \in chosen THEN "running" ELSE state[x]]
              /\ claims' = [x \in Tasks |-> IF x \in chosen THEN claims[x] + 1 ELSE claims[x]]
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, remainingDeps,
                       blockedBy, cancelRequested, seq>>
\* ready(limit): k ready versions start running: with OldestFirst, the k with the smallest
\* seq; without, any k (a refinement, the durable scheduler with due times and priorities,
\* states its own order).  The choice is inside Claim, so TLC still labels the step Claim.

Complete(t, g) ==
    LET waiting == {x \in Tasks : t \in deps[x] /\ state[x] = "pending"}
    IN  /\ g = generation[t]
        /\ state[t] = "running"
        /\ remainingDeps' = [x \in Tasks |->
                               IF x \in waiting THEN remainingDeps[x] - 1 ELSE remainingDeps[x]]
        /\ state' = [x \in Tasks |->
                       IF x = t THEN "succeeded"
                       ELSE IF x \in waiting /\ remainingDeps[x] = 1 THEN "ready"
                       ELSE state[x]]
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, blockedBy,
                       cancelRequested, claims, seq>>
\* complete(t, g): the running version succeeds; each pending dependent has one dep
\* fewer to wait for and becomes ready when none is left.

Fail(t, g) ==
    LET settled == Settle([state EXCEPT ![t] = "failed"], deps, seq, blockedBy)
    IN  /\ g = generation[t]
        /\ state[t] = "running"
        /\ state' = settled.state
        /\ blockedBy' = settled.blockedBy
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, remainingDeps,
                       cancelRequested, claims, seq>>
\* fail(t, g): the running version fails, then Settle blocks what waited on it.

Cancel(t) ==
    \/ /\ state[t] \in Waiting
       /\ LET settled == Settle([state EXCEPT ![t] = "cancelled"], deps, seq, blockedBy)
          IN  /\ state' = settled.state
              /\ blockedBy' = settled.blockedBy
       /\ UNCHANGED <<started, closed, nextSeq, generation, deps, remainingDeps,
                      cancelRequested, claims, seq>>
    \/ /\ state[t] = "running"
       /\ ~cancelRequested[t]
       /\ cancelRequested' = [cancelRequested EXCEPT ![t] = TRUE]
       /\ UNCHANGED <<started, closed, nextSeq, generation, state, deps, remainingDeps,
                      blockedBy, claims, seq>>
\* cancel(t): a waiting version is cancelled, then Settle; a running version only gets a
\* cooperative stop request (once); its function ends it with AcknowledgeCancel.

AcknowledgeCancel(t, g) ==
    LET settled == Settle([state EXCEPT ![t] = "cancelled"], deps, seq, blockedBy)
    IN  /\ g = generation[t]
        /\ state[t] = "running"
        /\ state' = settled.state
        /\ blockedBy' = settled.blockedBy
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, remainingDeps,
                       cancelRequested, claims, seq>>
\* acknowledge_cancel(t, g): the running version stops as cancelled (requested or not),
\* then Settle.

Retry(t) ==
    LET R      == BlockedChain({t})
        newSeq == [x \in Tasks |->
                     IF x \in R THEN nextSeq + Cardinality({y \in R : seq[y] < seq[x]})
                     ELSE seq[x]]
        rd(x)  == NotSucceeded(state, deps[x])
        st1    == [x \in Tasks |->
                     IF x \in R THEN (IF rd(x) = 0 THEN "ready" ELSE "pending") ELSE state[x]]
        settled == Settle(st1, deps, newSeq,
                          [x \in Tasks |-> IF x \in R THEN NoTask ELSE blockedBy[x]])
    IN  /\ ~closed
        /\ state[t] \in DeadStates
        /\ generation' = [x \in Tasks |-> IF x \in R THEN generation[x] + 1 ELSE generation[x]]
        /\ seq' = newSeq
        /\ nextSeq' = nextSeq + Cardinality(R)
        /\ claims' = [x \in Tasks |-> IF x \in R THEN 0 ELSE claims[x]]
        /\ cancelRequested' = [x \in Tasks |-> IF x \in R THEN FALSE ELSE cancelRequested[x]]
        /\ remainingDeps' = [x \in Tasks |-> IF x \in R THEN rd(x) ELSE remainingDeps[x]]
        /\ state' = settled.state
        /\ blockedBy' = settled.blockedBy
        /\ UNCHANGED <<started, closed, deps>>
\* retry(t): t and every version blocked (directly or through a chain) because of t get a
\* new version with their current deps, numbered in their old seq order, then Settle.
\* Members of R are dead, so no waiting version depends on them and no other count moves.

Close(cancelPending) ==
    /\ ~closed
    /\ closed' = TRUE
    /\ state' = IF cancelPending
                THEN [x \in Tasks |-> IF state[x] \in Waiting THEN "cancelled" ELSE state[x]]
                ELSE state
    /\ UNCHANGED <<started, nextSeq, generation, deps, remainingDeps, blockedBy,
                   cancelRequested, claims, seq>>
\* close(cancelPending): no more submissions or claims; with cancelPending every waiting
\* version is cancelled.  Settle would be a no-op (no waiting version is left), so it is
\* not applied; those versions keep blockedBy = NoTask.

StaleCallback(t, g) ==
    /\ generation[t] > 0
    /\ g # generation[t]
    /\ UNCHANGED vars
\* A callback naming a generation of t that is not the current one: rejected, no change.

AnyStaleCallback(t) ==
    \E g \in (0..(generation[t] + 1)) \ {generation[t]} : StaleCallback(t, g)
\* StaleCallback for the older generations of t, 0 and the next one.  TLC names a step
\* after the innermost operator it reaches before a quantifier whose range depends on
\* the state, so in a state-graph dump these steps are labelled AnyStaleCallback.

RepeatedCallback(t) ==
    /\ state[t] \in TerminalStates
    /\ UNCHANGED vars
\* A callback on a current version that is already terminal: answered, no change.

Next ==
    \/ \E t \in Tasks : \E D \in SUBSET (Tasks \ {t}) : Submit(t, D)
    \/ Start
    \/ \E k \in 1..MaxConcurrency : Claim(k)
    \/ \E t \in Tasks : Complete(t, generation[t])
    \/ \E t \in Tasks : Fail(t, generation[t])
    \/ \E t \in Tasks : Cancel(t)
    \/ \E t \in Tasks : AcknowledgeCancel(t, generation[t])
    \/ \E t \in Tasks : Retry(t)
    \/ \E c \in BOOLEAN : Close(c)
    \/ \E t \in Tasks : AnyStaleCallback(t)
    \/ \E t \in Tasks : RepeatedCallback(t)
\* Any one call.

Spec == Init /\ [][Next]_vars
\* Every behaviour of the scheduler, without fairness.

Finish(t) ==
    \/ Complete(t, generation[t])
    \/ Fail(t, generation[t])
    \/ AcknowledgeCancel(t, generation[t])
\* The running version of t ends, one way or another.

FairSpec ==
    /\ Spec
    /\ WF_vars(\E k \in 1..MaxConcurrency : Claim(k))
    /\ \A t \in Tasks : WF_vars(Finish(t))
\* Workers keep claiming while there is room, and every running function eventually ends.

-----------------------------------------------------------------------------
(* Invariants *)

TypeOK ==
    /\ started \in BOOLEAN
    /\ closed \in BOOLEAN
    /\ nextSeq \in Nat \ {0}
    /\ generation \in [Tasks -> Nat]
    /\ state \in [Tasks -> States \cup {"absent"}]
    /\ deps \in [Tasks -> SUBSET Tasks]
    /\ remainingDeps \in [Tasks -> Nat]
    /\ blockedBy \in [Tasks -> Tasks \cup {NoTask}]
    /\ cancelRequested \in [Tasks -> BOOLEAN]
    /\ claims \in [Tasks -> Nat]
    /\ seq \in [Tasks -> Nat]
    /\ \A t \in Tasks : (generation[t] = 0) <=> (state[t] = "absent")
    /\ \A t \in Tasks : t \notin deps[t]
\* Every variable holds a value of its type; generation 0 is exactly the absent state.

AtMostOneClaimPerVersion == \A t \in Tasks : claims[t] <= 1
\* No version is handed to two workers.

IndegreeInvariant ==
    \A t \in InState(Waiting) :
        /\ remainingDeps[t] = NotSucceeded(state, deps[t])
        /\ (state[t] = "pending") <=> (remainingDeps[t] > 0)
\* The incrementally kept count of a waiting version is exact, and a waiting version is
\* pending exactly while some dep has not succeeded.

ConcurrencyBound == Cardinality(InState({"running"})) <= MaxConcurrency
\* Never more running versions than the limit.

BlockedHasCause ==
    \A t \in Tasks :
        /\ (state[t] = "blocked") <=> (blockedBy[t] # NoTask)
        /\ blockedBy[t] # NoTask => blockedBy[t] \in deps[t]
\* A version is blocked exactly when it names the dep that blocked it.

BlockedPropagated ==
    \A t \in InState(Waiting) : \A d \in deps[t] : state[d] \notin DeadStates
\* Settle has run to the end: no waiting version has a dead dependency.

SealedGraph ==
    started => /\ \A t \in Submitted : deps[t] \subseteq Submitted
               /\ Acyclic(deps)
\* Once started, every dep is a submitted id and the dependency graph has no cycle.

-----------------------------------------------------------------------------
(* Action properties *)

NoTerminalToReady ==
    [][\A t \in Tasks :
          (state[t] \in TerminalStates /\ generation'[t] = generation[t])
              => state'[t] = state[t]]_vars
\* A terminal version never changes state; only a new version (a new generation) can.

ClaimOnlyAfterDepsSucceeded ==
    [][\A t \in Tasks :
          (state'[t] = "running" /\ state[t] # "running")
              => \A d \in deps[t] : state[d] = "succeeded"]_vars
\* A version starts running only when every one of its deps has succeeded.

ClaimsOldestFirst ==
    [][OldestFirst =>
          \A t, u \in Tasks :
              (/\ state[t] = "ready" /\ state'[t] = "running"
               /\ state[u] = "ready" /\ seq[u] < seq[t])
                  => state'[u] = "running"]_vars
\* With OldestFirst, a step that claims a ready version claims every older one (smaller
\* seq) with it: ready versions are handed out oldest first.  Written from the contract,
\* apart from Claim's chosen set, so that a claim of the wrong ones does not pass unnoticed.

RunningNeverReplaced ==
    [][\A t \in Tasks : state[t] = "running" => generation'[t] = generation[t]]_vars
\* A running version is never replaced by a new one: it ends first.  Only a step can show
\* this (a Submit that replaced it would reach states Submit reaches anyway).

-----------------------------------------------------------------------------
(* Liveness *)

Generations == Nat
\* The generations EveryVersionEnds speaks about; a model-checking module overrides it
\* with a finite range, since TLC cannot quantify over Nat in a temporal formula.

EveryVersionEnds ==
    \A t \in Tasks : \A g \in Generations :
        /\ (state[t] = "running" /\ generation[t] = g)
               ~> (state[t] # "running" \/ generation[t] # g)
        /\ (started /\ ~closed /\ state[t] \in Waiting /\ generation[t] = g)
               ~> (closed \/ state[t] \notin Waiting \/ generation[t] # g)
\* Every running version ends; every waiting version of a started, open scheduler is
\* claimed, blocked, cancelled or replaced, unless the scheduler is closed first.
=============================================================================

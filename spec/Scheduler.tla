----------------------------- MODULE Scheduler -----------------------------
(***************************************************************************)
(* The dependency-aware TaskScheduler of refsched, stated as docs/         *)
(* semantics.md states it.  Every task id holds one current version        *)
(* (generation[t]); a version moves pending -> ready -> running ->         *)
(* succeeded | failed | cancelled, or is blocked by a dead dependency.     *)
(* Retrying or resubmitting creates a new version; a version never comes   *)
(* back from a terminal state.  Each action here is a step of the          *)
(* reference model refsched.model and a call of refsched.TaskScheduler.    *)
(*                                                                         *)
(* Edge kinds.  A dependency edge is required (a version waits for its     *)
(* parent to succeed, and is blocked if the parent dies) or optional (a    *)
(* version waits for its parent to end, in any terminal state, and is      *)
(* never blocked by it).  SubmitOptional and AddDeps, gated by the         *)
(* constants OptionalEdges and AddDepsAllowed, are the reference model's   *)
(* alone so far: refsched.TaskScheduler makes only required edges.         *)
(*                                                                         *)
(* Provenance.  With the constant RecordProvenance, every blocked or       *)
(* cancelled version holds the record of its end: the root cause (the      *)
(* version that failed or was cancelled, and how it ended) and the path of *)
(* required edges from that root to the version.                          *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, Sequences

CONSTANTS
    Tasks,          \* the task ids a behaviour may use
    MaxConcurrency, \* how many versions may run at once
    OldestFirst,    \* BOOLEAN: a claim takes the oldest ready versions (smallest seq); FALSE:
                    \* any ready versions (a refinement that states its own order)
    NoTask,         \* a model value outside Tasks: blockedBy of a version that is not blocked
    OptionalEdges,  \* BOOLEAN: SubmitOptional and AddDeps may make optional edges
    AddDepsAllowed, \* BOOLEAN: AddDeps may add edges to a pending version
    RecordProvenance \* BOOLEAN: blocked and cancelled versions record their provenance

ASSUME NoTask \notin Tasks
ASSUME MaxConcurrency \in Nat \ {0}
ASSUME OldestFirst \in BOOLEAN
ASSUME OptionalEdges \in BOOLEAN
ASSUME AddDepsAllowed \in BOOLEAN
ASSUME RecordProvenance \in BOOLEAN

VARIABLES
    started,         \* BOOLEAN: Start has sealed the initial graph
    closed,          \* BOOLEAN: Close was called: no submissions, no claims
    nextSeq,         \* the seq the next new version takes; starts at 1
    generation,      \* [Tasks -> Nat]: current version of t; 0 = never submitted
    state,           \* [Tasks -> States \cup {"absent"}]: state of the current version
    deps,            \* [Tasks -> SUBSET Tasks]: the ids the current version depends on
    optional,        \* [Tasks -> SUBSET Tasks]: the deps of the current version whose edge is
                     \* optional (optional[t] \subseteq deps[t]); the others are required
    remainingDeps,   \* [Tasks -> Nat]: deps not settled (Settles), kept for pending/ready,
                     \* frozen after
    blockedBy,       \* [Tasks -> Tasks \cup {NoTask}]: the dep that blocked a blocked version
    cancelRequested, \* [Tasks -> BOOLEAN]: a cooperative stop was requested while running
    claims,          \* [Tasks -> Nat]: how many times the current version was claimed
    seq,             \* [Tasks -> Nat]: submission sequence number of the version (ready order)
    provenance       \* [Tasks -> records \cup {NoRecord}]: how a blocked or cancelled version
                     \* came to end (NoRecord otherwise, and always without RecordProvenance)

vars == <<started, closed, nextSeq, generation, state, deps, optional, remainingDeps,
          blockedBy, cancelRequested, claims, seq, provenance>>

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

Settles(s, isOptional) == IF isOptional THEN s \in TerminalStates ELSE s = "succeeded"
\* Whether a parent whose version is in state s no longer holds its child back: through a
\* required edge once it succeeded, through an optional edge once it ended in any way.

Unsettled(st, D, O) == Cardinality({d \in D : ~Settles(st[d], d \in O)})
\* How many of the ids D (O of them through optional edges) still hold a version back under
\* the state map st (an absent id does).  With O = {}: the ids of D not succeeded.

NoRecord == [root |-> NoTask, generation |-> 0, end |-> "none", path |-> <<>>]
\* The provenance of a version that is neither blocked nor cancelled.

EndRecord(t, end) == [root |-> t, generation |-> generation[t], end |-> end, path |-> <<t>>]
\* The provenance of a version of t that ended itself (end: "failed" or "cancelled"): it is
\* its own root, and its path is t alone.  A failed version keeps none (only blocked and
\* cancelled ones do); this is the record its blocked dependents extend.

Recorded(pv, S, end) ==
    IF RecordProvenance THEN [x \in Tasks |-> IF x \in S THEN EndRecord(x, end) ELSE pv[x]]
                        ELSE pv
\* pv with the versions of S recorded as ended themselves, when provenance is recorded.

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

RECURSIVE Near(_, _, _, _)
Near(k, S, live, dp) ==
    IF k = 0 THEN S
    ELSE LET P == Near(k - 1, S, live, dp) IN P \cup {x \in live : dp[x] \cap P # {}}
\* S and every id of live from which S can be reached in at most k edges through ids of live.

RECURSIVE Anchored(_, _, _)
Anchored(S, B, blame) ==
    LET S2 == S \cup {x \in B : blame[x] \in S}
    IN  IF S2 = S THEN S ELSE Anchored(S2, B, blame)
\* S and every id of B whose chain of blame leads into S.

Settle(st, dp, op, sq, bb, rd, ended, pv) ==
    LET live    == {x \in Tasks : st[x] \in Waiting}
        dead    == {x \in Tasks : st[x] \in DeadStates}
        req     == [x \in Tasks |-> dp[x] \ op[x]]
        B       == Grow(dead, live, req) \ dead
        Nearest(xs) == CHOOSE d \in xs : \A e \in xs : sq[d] <= sq[e]
        Blame(x) == Nearest(req[x] \cap (dead \cup B))
        freed(x) == IF x \in live \ B THEN Cardinality(op[x] \cap (ended \cup B)) ELSE 0
        left    == [x \in Tasks |-> rd[x] - freed(x)]
        \* Provenance.  A version's path runs through its blamed dep, whose chain of blame
        \* leads to a dead version, except in an unstarted graph with a cycle, where it may
        \* loop: there the path runs through the dep of smallest seq one edge nearer to a
        \* dead version (level(d): the fewest required edges from d to a dead version).
        blame   == [x \in B |-> Blame(x)]
        sound   == Anchored(dead, B, blame)
        level(x) == CHOOSE k \in 0..Cardinality(Tasks) : x \in Near(k, dead, live, req)
                                                        /\ (k > 0 => x \notin Near(k - 1, dead, live, req))
        via(x)  == IF x \in sound THEN blame[x]
                   ELSE Nearest({d \in req[x] \cap (dead \cup B) : level(d) = level(x) - 1})
        cause(d) == IF st[d] = "failed" THEN EndRecord(d, "failed") ELSE pv[d]
        record[x \in B] ==
            LET r == IF via(x) \in B THEN record[via(x)] ELSE cause(via(x))
            IN  [r EXCEPT !.path = Append(@, x)]
    IN  [state     |-> [x \in Tasks |->
                          IF x \in B THEN "blocked"
                          ELSE IF freed(x) > 0 /\ left[x] = 0 THEN "ready"
                          ELSE st[x]],
         blockedBy |-> [x \in Tasks |-> IF x \in B THEN Blame(x) ELSE bb[x]],
         remainingDeps |-> left,
         provenance |-> IF RecordProvenance
                        THEN [x \in Tasks |-> IF x \in B THEN record[x] ELSE pv[x]]
                        ELSE pv]
\* Blocking spreads along required edges: given the state map st, deps dp, optional edges
\* op, seq sq, blockedBy bb and counts rd an action has produced, and the set ended of the
\* versions the action itself put in a dead state, B is the set of waiting versions that
\* reach a dead version through required edges of waiting versions only.  Each member of B
\* becomes blocked, blamed on its required dep with the smallest seq among those dead or in
\* B.  The versions of ended and of B have ended, which settles every optional edge to them:
\* a waiting version outside B has that many (freed) fewer deps to wait for, and becomes
\* ready when that leaves none.  Returns the new state, blockedBy and remainingDeps maps;
\* running and terminal versions are untouched.  With RecordProvenance, each member of B
\* records its provenance (pv holds the others'): its root's, with the path of its blamed
\* dep (via) extended by itself; a failed dep is its own root.

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ started = FALSE
    /\ closed = FALSE
    /\ nextSeq = 1
    /\ generation = [t \in Tasks |-> 0]
    /\ state = [t \in Tasks |-> "absent"]
    /\ deps = [t \in Tasks |-> {}]
    /\ optional = [t \in Tasks |-> {}]
    /\ remainingDeps = [t \in Tasks |-> 0]
    /\ blockedBy = [t \in Tasks |-> NoTask]
    /\ cancelRequested = [t \in Tasks |-> FALSE]
    /\ claims = [t \in Tasks |-> 0]
    /\ seq = [t \in Tasks |-> 0]
    /\ provenance = [t \in Tasks |-> NoRecord]
\* A fresh scheduler: not started, not closed, no id submitted.

-----------------------------------------------------------------------------
(* Actions *)

NewVersion(t, D, O) ==
    /\ t \notin D
    /\ ~closed
    /\ state[t] # "running"
    /\ started => D \subseteq Submitted
    /\ started => t \notin ReachFrom(D, deps)
    /\ LET newDeps == [deps EXCEPT ![t] = D]
           newOpt  == [optional EXCEPT ![t] = O]
           newSeq  == [seq EXCEPT ![t] = nextSeq]
           rd      == Unsettled(state, D, O)
           \* A replaced version that had settled an edge of a waiting dependent (it succeeded,
           \* or ended and the edge is optional) no longer does: the new version waits again.
           bumped  == {x \in Tasks : t \in deps[x] /\ state[x] \in Waiting
                                     /\ Settles(state[t], t \in optional[x])}
           st1     == [x \in Tasks |->
                          IF x = t THEN (IF rd = 0 THEN "ready" ELSE "pending")
                          ELSE IF x \in bumped THEN "pending"
                          ELSE state[x]]
           rd1     == [x \in Tasks |->
                          IF x = t THEN rd
                          ELSE IF x \in bumped THEN remainingDeps[x] + 1
                          ELSE remainingDeps[x]]
           settled == Settle(st1, newDeps, newOpt, newSeq, [blockedBy EXCEPT ![t] = NoTask],
                             rd1, {}, [provenance EXCEPT ![t] = NoRecord])
       IN  /\ generation' = [generation EXCEPT ![t] = @ + 1]
           /\ deps' = newDeps
           /\ optional' = newOpt
           /\ seq' = newSeq
           /\ nextSeq' = nextSeq + 1
           /\ claims' = [claims EXCEPT ![t] = 0]
           /\ cancelRequested' = [cancelRequested EXCEPT ![t] = FALSE]
           /\ remainingDeps' = settled.remainingDeps
           /\ state' = settled.state
           /\ blockedBy' = settled.blockedBy
           /\ provenance' = settled.provenance
    /\ UNCHANGED <<started, closed>>
\* A new version of t depending on D, O of them through optional edges: ready if every dep
\* is settled, else pending, then Settle.  After Start, D must be submitted ids and must
\* not close a cycle (t must not be reachable from D).  A running version cannot be
\* replaced.

Submit(t, D) ==
    /\ NewVersion(t, D, {})
\* submit(t, D): a new version of t whose deps D are all required.  (The conjunction of
\* one is TLC's cue: it names the step Submit, not NewVersion.)

SubmitOptional(t, D, O) ==
    /\ OptionalEdges
    /\ O # {}
    /\ O \subseteq D
    /\ NewVersion(t, D, O)
\* submit(t, D \ O, optional=O): a new version of t depending on D, through optional edges
\* on the ids of O and required edges on the others.

Start ==
    /\ ~closed
    /\ ~started
    /\ \A t \in Submitted : deps[t] \subseteq Submitted
    /\ Acyclic(deps)
    /\ started' = TRUE
    /\ UNCHANGED <<closed, nextSeq, generation, state, deps, optional, remainingDeps,
                   blockedBy, cancelRequested, claims, seq, provenance>>
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
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, optional, remainingDeps,
                       blockedBy, cancelRequested, seq, provenance>>
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
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, optional, blockedBy,
                       cancelRequested, claims, seq, provenance>>
\* complete(t, g): the running version succeeds, which settles both kinds of edge to it;
\* each pending dependent has one dep fewer to wait for and becomes ready when none is left.

Fail(t, g) ==
    LET settled == Settle([state EXCEPT ![t] = "failed"], deps, optional, seq, blockedBy,
                          remainingDeps, {t}, provenance)
    IN  /\ g = generation[t]
        /\ state[t] = "running"
        /\ state' = settled.state
        /\ blockedBy' = settled.blockedBy
        /\ remainingDeps' = settled.remainingDeps
        /\ provenance' = settled.provenance
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, optional,
                       cancelRequested, claims, seq>>
\* fail(t, g): the running version fails, then Settle blocks what waited on it through
\* required edges and settles its optional edges.

Cancel(t) ==
    \/ /\ state[t] \in Waiting
       /\ LET settled == Settle([state EXCEPT ![t] = "cancelled"], deps, optional, seq,
                                 blockedBy, remainingDeps, {t},
                                 Recorded(provenance, {t}, "cancelled"))
          IN  /\ state' = settled.state
              /\ blockedBy' = settled.blockedBy
              /\ remainingDeps' = settled.remainingDeps
              /\ provenance' = settled.provenance
       /\ UNCHANGED <<started, closed, nextSeq, generation, deps, optional,
                      cancelRequested, claims, seq>>
    \/ /\ state[t] = "running"
       /\ ~cancelRequested[t]
       /\ cancelRequested' = [cancelRequested EXCEPT ![t] = TRUE]
       /\ UNCHANGED <<started, closed, nextSeq, generation, state, deps, optional,
                      remainingDeps, blockedBy, claims, seq, provenance>>
\* cancel(t): a waiting version is cancelled, then Settle; a running version only gets a
\* cooperative stop request (once); its function ends it with AcknowledgeCancel.

AcknowledgeCancel(t, g) ==
    LET settled == Settle([state EXCEPT ![t] = "cancelled"], deps, optional, seq, blockedBy,
                          remainingDeps, {t}, Recorded(provenance, {t}, "cancelled"))
    IN  /\ g = generation[t]
        /\ state[t] = "running"
        /\ state' = settled.state
        /\ blockedBy' = settled.blockedBy
        /\ remainingDeps' = settled.remainingDeps
        /\ provenance' = settled.provenance
        /\ UNCHANGED <<started, closed, nextSeq, generation, deps, optional,
                       cancelRequested, claims, seq>>
\* acknowledge_cancel(t, g): the running version stops as cancelled (requested or not),
\* then Settle.

Retry(t) ==
    LET R      == BlockedChain({t})
        newSeq == [x \in Tasks |->
                     IF x \in R THEN nextSeq + Cardinality({y \in R : seq[y] < seq[x]})
                     ELSE seq[x]]
        \* Counted once every member is a new version, which has not ended.
        rd(x)  == Unsettled([y \in Tasks |-> IF y \in R THEN "pending" ELSE state[y]],
                            deps[x], optional[x])
        \* A waiting version whose optional edge to a member was settled waits again.
        bumps(x) == IF state[x] \in Waiting THEN Cardinality(optional[x] \cap R) ELSE 0
        st1    == [x \in Tasks |->
                     IF x \in R THEN (IF rd(x) = 0 THEN "ready" ELSE "pending")
                     ELSE IF bumps(x) > 0 THEN "pending"
                     ELSE state[x]]
        rd1    == [x \in Tasks |-> IF x \in R THEN rd(x) ELSE remainingDeps[x] + bumps(x)]
        settled == Settle(st1, deps, optional, newSeq,
                          [x \in Tasks |-> IF x \in R THEN NoTask ELSE blockedBy[x]], rd1, {},
                          [x \in Tasks |-> IF x \in R THEN NoRecord ELSE provenance[x]])
    IN  /\ ~closed
        /\ state[t] \in DeadStates
        /\ generation' = [x \in Tasks |-> IF x \in R THEN generation[x] + 1 ELSE generation[x]]
        /\ seq' = newSeq
        /\ nextSeq' = nextSeq + Cardinality(R)
        /\ claims' = [x \in Tasks |-> IF x \in R THEN 0 ELSE claims[x]]
        /\ cancelRequested' = [x \in Tasks |-> IF x \in R THEN FALSE ELSE cancelRequested[x]]
        /\ remainingDeps' = settled.remainingDeps
        /\ state' = settled.state
        /\ blockedBy' = settled.blockedBy
        /\ provenance' = settled.provenance
        /\ UNCHANGED <<started, closed, deps, optional>>
\* retry(t): t and every version blocked (directly or through a chain) because of t get a
\* new version with their current deps, numbered in their old seq order, then Settle.
\* Members of R are dead, so no waiting version depends on them through a required edge;
\* one that does through an optional edge had it settled, and waits for the new version.

Close(cancelPending) ==
    /\ ~closed
    /\ closed' = TRUE
    /\ state' = IF cancelPending
                THEN [x \in Tasks |-> IF state[x] \in Waiting THEN "cancelled" ELSE state[x]]
                ELSE state
    /\ provenance' = IF cancelPending THEN Recorded(provenance, InState(Waiting), "cancelled")
                     ELSE provenance
    /\ UNCHANGED <<started, nextSeq, generation, deps, optional, remainingDeps, blockedBy,
                   cancelRequested, claims, seq>>
\* close(cancelPending): no more submissions or claims; with cancelPending every waiting
\* version is cancelled.  Settle would be a no-op (no waiting version is left), so it is
\* not applied; those versions keep blockedBy = NoTask, and each is its own root.

AddDeps(t, D, O) ==
    LET newDeps == [deps EXCEPT ![t] = @ \cup D]
        newOpt  == [optional EXCEPT ![t] = @ \cup O]
        rd1     == [remainingDeps EXCEPT ![t] = @ + Unsettled(state, D, O)]
        settled == Settle(state, newDeps, newOpt, seq, blockedBy, rd1, {}, provenance)
    IN  /\ AddDepsAllowed
        /\ O \subseteq D
        /\ O # {} => OptionalEdges
        /\ D # {}
        /\ ~closed
        /\ state[t] = "pending"
        /\ t \notin D
        /\ D \cap deps[t] = {}
        /\ started => D \subseteq Submitted
        /\ started => Acyclic(newDeps)
        /\ deps' = newDeps
        /\ optional' = newOpt
        /\ remainingDeps' = settled.remainingDeps
        /\ state' = settled.state
        /\ blockedBy' = settled.blockedBy
        /\ provenance' = settled.provenance
        /\ UNCHANGED <<started, closed, nextSeq, generation, cancelRequested, claims, seq>>
\* add_deps(t, D \ O, optional=O): the pending version of t depends on the ids of D too (O
\* of them through optional edges), none of them a dep already; its count rises by those
\* not settled, and Settle blocks it if a new required dep is dead.  A version that is not
\* pending (ready, running or ended) keeps its deps.  After Start, D must be submitted ids
\* and the graph must stay acyclic.

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
    \/ \E t \in Tasks : \E D \in SUBSET (Tasks \ {t}) : \E O \in SUBSET D : SubmitOptional(t, D, O)
    \/ \E t \in Tasks : \E D \in SUBSET (Tasks \ {t}) : \E O \in SUBSET D : AddDeps(t, D, O)
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
    /\ optional \in [Tasks -> SUBSET Tasks]
    /\ remainingDeps \in [Tasks -> Nat]
    /\ blockedBy \in [Tasks -> Tasks \cup {NoTask}]
    /\ cancelRequested \in [Tasks -> BOOLEAN]
    /\ claims \in [Tasks -> Nat]
    /\ seq \in [Tasks -> Nat]
    /\ \A t \in Tasks : (generation[t] = 0) <=> (state[t] = "absent")
    /\ \A t \in Tasks : t \notin deps[t]
    /\ \A t \in Tasks : optional[t] \subseteq deps[t]
    /\ \A t \in Tasks : provenance[t] = NoRecord \/
           /\ provenance[t].root \in Tasks
           /\ provenance[t].generation \in Nat \ {0}
           /\ provenance[t].end \in {"failed", "cancelled"}
           /\ provenance[t].path \in Seq(Tasks)
\* Every variable holds a value of its type; generation 0 is exactly the absent state; an
\* optional edge is one of the deps; a provenance record names a version that failed or was
\* cancelled, and a sequence of ids.

AtMostOneClaimPerVersion == \A t \in Tasks : claims[t] <= 1
\* No version is handed to two workers.

IndegreeInvariant ==
    \A t \in InState(Waiting) :
        /\ remainingDeps[t] = Unsettled(state, deps[t], optional[t])
        /\ (state[t] = "pending") <=> (remainingDeps[t] > 0)
\* The incrementally kept count of a waiting version is exact (its required deps not
\* succeeded and its optional deps not ended), and a waiting version is pending exactly
\* while some dep is not settled.

ConcurrencyBound == Cardinality(InState({"running"})) <= MaxConcurrency
\* Never more running versions than the limit.

BlockedHasCause ==
    \A t \in Tasks :
        /\ (state[t] = "blocked") <=> (blockedBy[t] # NoTask)
        /\ blockedBy[t] # NoTask => blockedBy[t] \in deps[t]
\* A version is blocked exactly when it names the dep that blocked it.

BlockedPropagated ==
    \A t \in InState(Waiting) : \A d \in deps[t] \ optional[t] : state[d] \notin DeadStates
\* Settle has run to the end: no waiting version has a dead required dependency.

SealedGraph ==
    started => /\ \A t \in Submitted : deps[t] \subseteq Submitted
               /\ Acyclic(deps)
\* Once started, every dep is a submitted id and the dependency graph has no cycle.

ProvenanceRecorded ==
    RecordProvenance =>
        \A t \in Tasks : (state[t] \in {"blocked", "cancelled"}) <=> (provenance[t] # NoRecord)
\* Every blocked or cancelled version has a provenance record, and no other version has one.

ProvenanceRootEnded ==
    \A t \in Tasks :
        LET r == provenance[t]
        IN  r # NoRecord /\ generation[r.root] = r.generation => state[r.root] = r.end
\* A record's root ended the way the record says (while that version is current: a newer
\* version of the root's id does not change how the old one ended).

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
              => \A d \in deps[t] \ optional[t] : state[d] = "succeeded"]_vars
\* A version starts running only when every one of its required deps has succeeded.

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

ReadyOnlyAfterDepsSettled ==
    [][\A t \in Tasks :
          (/\ state'[t] \in {"ready", "running"}
           /\ (state[t] # state'[t] \/ generation[t] # generation'[t]))
              => \A d \in deps'[t] :
                     IF d \in optional'[t] THEN state'[d] \in {"succeeded", "failed",
                                                                "blocked", "cancelled"}
                     ELSE state'[d] = "succeeded"]_vars
\* A version becomes ready or running only once each required parent has succeeded and each
\* optional parent has ended.  Written from the contract, apart from Settles and the counts,
\* so that a count or a claim that forgets an edge kind does not pass unnoticed.

EdgesAddedOnlyToPending ==
    [][\A t \in Tasks :
          (generation'[t] = generation[t] /\ deps'[t] # deps[t]) => state[t] = "pending"]_vars
\* A version gains deps only while it is pending: an added edge never lands on a version
\* that is ready, running or ended (a new version, with its own deps, is another matter).

OptionalParentNeverBlocks ==
    [][\A t \in Tasks :
          (state'[t] = "blocked" /\ (state[t] # "blocked" \/ generation[t] # generation'[t]))
              => \E d \in deps'[t] \ optional'[t] : state'[d] \in DeadStates]_vars
\* A version is blocked only by a dead required parent: a dead optional parent never blocks
\* its child, it settles the edge.

ProvenanceNeverRewritten ==
    [][\A t \in Tasks :
          (provenance[t] # NoRecord /\ generation'[t] = generation[t])
              => provenance'[t] = provenance[t]]_vars
\* A record, once set, stays as it is while its version is current.

ProvenancePathsReal ==
    [][\A t \in Tasks :
          LET r == provenance'[t]
              n == Len(r.path)
              p == r.path[n - 1]
          IN  (r # NoRecord /\ r # provenance[t])
                  => /\ n >= 1 /\ r.path[n] = t
                     /\ IF n = 1
                        THEN /\ r = [root |-> t, generation |-> generation'[t],
                                     end |-> "cancelled", path |-> <<t>>]
                             /\ state'[t] = "cancelled"
                        ELSE /\ p \in deps'[t] \ optional'[t]
                             /\ state'[p] \in DeadStates
                             /\ IF state'[p] = "failed"
                                THEN r = [root |-> p, generation |-> generation'[p],
                                          end |-> "failed", path |-> <<p, t>>]
                                ELSE provenance'[p] = [r EXCEPT !.path = SubSeq(@, 1, n - 1)]]_vars
\* A record is set with a real path of the graph from a dead root: a cancelled version is
\* its own root; a blocked one extends, by the required edge from it, the path of a dead dep:
\* a failed dep's path is that dep alone, any other's is the dep's own record, whose path
\* was real when it was set.

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

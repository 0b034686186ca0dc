--------------------------- MODULE DurableRowLocks ---------------------------
(***************************************************************************)
(* The durable store's claims, reports, expiries and submits as the        *)
(* statements of concurrent PostgreSQL transactions under READ COMMITTED,  *)
(* with row locks in place of one store-wide lock (docs/durable.md,       *)
(* "Row locks: the argument").  DurableScheduler.tla takes each of these   *)
(* transactions as one atomic step; this module checks which statements,  *)
(* and which locks, make them behave so when many run at once.            *)
(*                                                                         *)
(* What READ COMMITTED gives, as modelled here:                            *)
(*  - a transaction's writes are its own until it commits; every other    *)
(*    statement reads the latest committed rows (rows: the committed       *)
(*    state; writes: each transaction's uncommitted ones);                 *)
(*  - a statement that updates or locks a row (UPDATE, SELECT FOR UPDATE,  *)
(*    SELECT FOR SHARE) waits while another transaction holds a            *)
(*    conflicting lock on it, then evaluates its condition again on the    *)
(*    row's latest committed version, and takes the row only if it still   *)
(*    matches (PostgreSQL's re-check after a lock wait);                   *)
(*  - SKIP LOCKED passes over rows another transaction has locked;         *)
(*  - a statement that visits several rows chooses them from the rows      *)
(*    committed when it starts, and takes each in turn;                    *)
(*  - locks are held to the end of the transaction; a transaction may      *)
(*    abort at any statement (its client dies), undoing its writes.        *)
(* Waiting is not a step: an action that would wait is not enabled.       *)
(*                                                                         *)
(* The transactions, in the statements the store runs:                     *)
(*  claim    SELECT the first claimable version in seq order FOR UPDATE    *)
(*           SKIP LOCKED; for a first claim, SELECT a free slot row FOR    *)
(*           UPDATE SKIP LOCKED (none: nothing claimed); UPDATE both rows. *)
(*  complete UPDATE the version's row fenced by its lease (generation,     *)
(*           attempt, state and holder in the WHERE clause); UPDATE its    *)
(*           slot row free; UPDATE each pending dependent one dep fewer.   *)
(*  expire   UPDATE the row of a live lease past its deadline, holder none.*)
(*  submit   SELECT each dependency's row FOR SHARE; INSERT the version    *)
(*           with the count of the dependencies not yet succeeded.         *)
(*                                                                         *)
(* The argument: every step that writes a row, or decides on a row's       *)
(* value, holds that row's lock from its decision to its commit, so two    *)
(* steps that conflict are ordered by their lock on a common row, and the  *)
(* order of their commits is that order.  A claim's decision also rests    *)
(* on rows it did not take: the ones it skipped.  SkipOnlyLocked states    *)
(* what it may skip, and what that costs the claim order (docs).           *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, TLC

CONSTANTS
    Tasks,        \* the task ids, each submitted once
    Deps,         \* [Tasks -> SUBSET Tasks]: the dependencies of each task (a DAG)
    Workers,      \* the worker processes: each runs one transaction at a time
    Submitter,    \* the client that submits: one transaction at a time
    Slots,        \* the slot rows: MaxConcurrency of them
    MaxAttempts,  \* a version is re-claimed after an expiry while attempt < MaxAttempts
    LeaseTime,    \* how long a lease lasts on the store's clock
    NoTask,       \* a model value: the task of a free slot
    NoWorker,     \* a model value: the holder of a version with no live lease
    Nobody        \* a model value: the holder of a row lock nobody holds

ASSUME Submitter \notin Workers
ASSUME NoTask \notin Tasks
ASSUME Slots # {}
ASSUME MaxAttempts \in Nat \ {0}
ASSUME LeaseTime \in Nat \ {0}

Agents == Workers \cup {Submitter}

States == {"absent", "pending", "ready", "running", "succeeded"}

Row == [st : States, rem : Nat, att : Nat, hold : Workers \cup {NoWorker}, seq : Nat,
        deadline : Nat, due : Nat]
\* A task row: state, remaining deps, attempt (the fencing token), lease holder, seq, the
\* live lease's deadline (0: none) and when the version was submitted (its due time).

Absent == [st |-> "absent", rem |-> 0, att |-> 0, hold |-> NoWorker, seq |-> 0, deadline |-> 0,
           due |-> 0]

VARIABLES
    started,   \* BOOLEAN: start() has committed
    now,       \* the store's clock
    row,       \* [Tasks -> Row]: the committed task rows
    slot,      \* [Slots -> Tasks \cup {NoTask}]: the committed slot rows
    nextSeq,   \* the sequence a submit draws its seq from (not transactional)
    lock,      \* [Tasks -> Agents \cup {Nobody}]: who holds the row's exclusive lock
    share,     \* [Tasks -> SUBSET Agents]: who holds the row's share lock (FOR SHARE)
    slotLock,  \* [Slots -> Agents \cup {Nobody}]: who holds the slot row's lock
    writes,    \* [Agents -> [SUBSET Tasks -> Row]]: each transaction's uncommitted task rows
    slotWrites,\* [Agents -> [SUBSET Slots -> ...]]: its uncommitted slot rows
    pc,        \* [Agents -> statement labels]: where each transaction is; "idle": none open
    target,    \* [Agents -> Tasks \cup {NoTask}]: the version the open transaction is about
    lease,     \* [Workers -> Nat]: the attempt of the report being made (complete)
    todo,      \* [Agents -> SUBSET Tasks]: rows the open multi-row statement has yet to take
    unsettled, \* [Agents -> SUBSET Tasks]: a submit's deps it read as not yet succeeded
    held,      \* [Workers -> SUBSET (Tasks \X Nat)]: the leases <<t, a>> w believes it holds
    claims,    \* [Tasks -> Nat]: committed first claims of each version (history)
    ends,      \* [Tasks -> Nat]: committed ends of each version (history)
    endedAttempt \* [Tasks -> Nat]: the attempt whose report ended the version

vars == <<started, now, row, slot, nextSeq, lock, share, slotLock, writes, slotWrites, pc, target, lease,
          todo, unsettled, held, claims, ends, endedAttempt>>

localVars == <<writes, slotWrites, pc, target, lease, todo, unsettled>>

NoWrites == [x \in {} |-> Absent]
NoSlotWrites == [x \in {} |-> NoTask]

-----------------------------------------------------------------------------
(* Helpers *)

Unlocked(a, t) == lock[t] \in {Nobody, a} /\ share[t] \subseteq {a}
\* No other transaction holds a lock on row t: a takes its exclusive lock (UPDATE, FOR
\* UPDATE) without waiting, and SKIP LOCKED does not pass over it.

Claimable(t) ==
    \/ row[t].st = "ready"
    \/ row[t].st = "running" /\ row[t].hold = NoWorker /\ row[t].att < MaxAttempts
\* On the committed row: a ready version, or a running one whose lease expired with
\* attempts left (a re-claim: it keeps its slot).

Release(a) ==
    /\ lock' = [t \in Tasks |-> IF lock[t] = a THEN Nobody ELSE lock[t]]
    /\ share' = [t \in Tasks |-> share[t] \ {a}]
    /\ slotLock' = [s \in Slots |-> IF slotLock[s] = a THEN Nobody ELSE slotLock[s]]
\* The end of a's transaction, committed or not, releases its locks.

Close(a) ==
    /\ writes' = [writes EXCEPT ![a] = NoWrites]
    /\ slotWrites' = [slotWrites EXCEPT ![a] = NoSlotWrites]
    /\ pc' = [pc EXCEPT ![a] = "idle"]
    /\ target' = [target EXCEPT ![a] = NoTask]
    /\ todo' = [todo EXCEPT ![a] = {}]
    /\ unsettled' = [unsettled EXCEPT ![a] = {}]
\* a's transaction is over: nothing of it is left open.

Stage(a, t, r) == writes' = [writes EXCEPT ![a] = (t :> r) @@ @]
\* a's transaction writes r as row t (uncommitted).

Seen(a, t) == IF t \in DOMAIN writes[a] THEN writes[a][t] ELSE row[t]
\* Row t as a's own transaction sees it: its own write, else the latest committed row.

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ started = FALSE
    /\ now = 0
    /\ row = [t \in Tasks |-> Absent]
    /\ slot = [s \in Slots |-> NoTask]
    /\ nextSeq = 1
    /\ lock = [t \in Tasks |-> Nobody]
    /\ share = [t \in Tasks |-> {}]
    /\ slotLock = [s \in Slots |-> Nobody]
    /\ writes = [a \in Agents |-> NoWrites]
    /\ slotWrites = [a \in Agents |-> NoSlotWrites]
    /\ pc = [a \in Agents |-> "idle"]
    /\ target = [a \in Agents |-> NoTask]
    /\ lease = [w \in Workers |-> 0]
    /\ todo = [a \in Agents |-> {}]
    /\ unsettled = [a \in Agents |-> {}]
    /\ held = [w \in Workers |-> {}]
    /\ claims = [t \in Tasks |-> 0]
    /\ ends = [t \in Tasks |-> 0]
    /\ endedAttempt = [t \in Tasks |-> 0]

-----------------------------------------------------------------------------
(* claim: SELECT ... FOR UPDATE SKIP LOCKED, then a slot row, then the UPDATEs *)

ClaimTake(w) ==
    LET open == {t \in Tasks : Claimable(t) /\ Unlocked(w, t)}
    IN  /\ started
        /\ pc[w] = "idle"
        /\ open # {}
        /\ LET t == CHOOSE x \in open : \A y \in open : row[x].seq <= row[y].seq
           IN  /\ lock' = [lock EXCEPT ![t] = w]
               /\ target' = [target EXCEPT ![w] = t]
               /\ pc' = [pc EXCEPT ![w] = IF row[t].st = "ready" THEN "claimSlot"
                                                                ELSE "claimWrite"]
        /\ UNCHANGED <<row, slot, nextSeq, started, now, share, slotLock, writes, slotWrites, lease, todo,
                       unsettled, held, claims, ends, endedAttempt>>
\* SELECT id FROM task WHERE <claimable> ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED: the
\* first claimable version no other transaction has locked, taken with its lock.  Claimable
\* is judged on the latest committed row, which the lock now keeps as it is.

ClaimSlot(w) ==
    LET open == {s \in Slots : slot[s] = NoTask /\ slotLock[s] \in {Nobody, w}}
    IN  /\ pc[w] = "claimSlot"
        /\ IF open = {}
           THEN /\ Release(w)
                /\ Close(w)
                /\ UNCHANGED lease
           ELSE \E s \in open :
                   /\ slotLock' = [slotLock EXCEPT ![s] = w]
                   /\ slotWrites' = [slotWrites EXCEPT ![w] = (s :> target[w]) @@ @]
                   /\ pc' = [pc EXCEPT ![w] = "claimWrite"]
                   /\ UNCHANGED <<lock, share, writes, target, todo, unsettled, lease>>
        /\ UNCHANGED <<row, slot, nextSeq, started, now, held, claims, ends, endedAttempt>>
\* SELECT id FROM slot WHERE task IS NULL LIMIT 1 FOR UPDATE SKIP LOCKED: a free slot row no
\* other claim holds, locked and written with the version.  None: every slot is taken or
\* being taken, and the claim ends with nothing (a rollback).

ClaimWrite(w) ==
    LET t == target[w]
    IN  /\ pc[w] = "claimWrite"
        /\ Stage(w, t, [row[t] EXCEPT !.st = "running", !.att = @ + 1, !.hold = w])
        /\ pc' = [pc EXCEPT ![w] = "claimCommit"]
        /\ UNCHANGED <<row, slot, nextSeq, started, now, lock, share, slotLock, slotWrites, target, lease,
                       todo, unsettled, held, claims, ends, endedAttempt>>
\* UPDATE task SET state = 'running', attempt = attempt + 1, holder = w WHERE id = t.

ClaimCommit(w) ==
    LET t == target[w]
    IN  /\ pc[w] = "claimCommit"
        /\ row' = [x \in Tasks |-> IF x = t THEN [Seen(w, t) EXCEPT !.deadline = now + LeaseTime]
                                          ELSE Seen(w, x)]
        /\ slot' = [s \in Slots |-> IF s \in DOMAIN slotWrites[w] THEN slotWrites[w][s]
                                                                  ELSE slot[s]]
        /\ claims' = [claims EXCEPT ![t] = IF writes[w][t].att = 1 THEN @ + 1 ELSE @]
        /\ held' = [held EXCEPT ![w] = @ \cup {<<t, writes[w][t].att>>}]
        /\ Release(w)
        /\ Close(w)
        /\ UNCHANGED <<nextSeq, started, now, lease, ends, endedAttempt>>
\* COMMIT: the version is w's, under the lease of its new attempt (its first claim when the
\* attempt is 1), whose deadline is LeaseTime from the clock read by the claim's last
\* statement (modelled as read at the commit: a clock read earlier only shortens the lease).

-----------------------------------------------------------------------------
(* complete: the fenced UPDATE, the slot row, then fan-in row by row *)

CompleteFence(w, t, a) ==
    /\ pc[w] = "idle"
    /\ <<t, a>> \in held[w]
    /\ Unlocked(w, t)
    /\ IF row[t].st = "running" /\ row[t].att = a /\ row[t].hold = w
       THEN /\ lock' = [lock EXCEPT ![t] = w]
            /\ Stage(w, t, [row[t] EXCEPT !.st = "succeeded", !.hold = NoWorker, !.deadline = 0])
            /\ target' = [target EXCEPT ![w] = t]
            /\ lease' = [lease EXCEPT ![w] = a]
            /\ pc' = [pc EXCEPT ![w] = "completeSlot"]
            /\ UNCHANGED <<held, todo, unsettled, slotWrites>>
       ELSE /\ held' = [held EXCEPT ![w] = @ \ {<<t, a>>}]
            /\ UNCHANGED <<lock, writes, target, lease, pc, todo, unsettled, slotWrites>>
    /\ UNCHANGED <<row, slot, nextSeq, started, now, share, slotLock, claims, ends, endedAttempt>>
\* UPDATE task SET state = 'succeeded', holder = NULL WHERE id = t AND attempt = a AND
\* state = 'running' AND holder = w: it waits for the row's lock, then reads the condition
\* on the latest committed row.  No row matched: the report is refused (its lease was lost)
\* and w drops the lease.

CompleteSlot(w) ==
    LET t == target[w]
        mine == {s \in Slots : slot[s] = t}
    IN  /\ pc[w] = "completeSlot"
        /\ \A s \in mine : slotLock[s] \in {Nobody, w}
        /\ slotLock' = [s \in Slots |-> IF s \in mine THEN w ELSE slotLock[s]]
        /\ slotWrites' = [slotWrites EXCEPT ![w] = [s \in mine |-> NoTask] @@ @]
        /\ todo' = [todo EXCEPT ![w] = {d \in Tasks : t \in Deps[d] /\ row[d].st = "pending"}]
        /\ pc' = [pc EXCEPT ![w] = "completeFanIn"]
        /\ UNCHANGED <<row, slot, nextSeq, started, now, lock, share, writes, target, lease, unsettled,
                       held, claims, ends, endedAttempt>>
\* UPDATE slot SET task = NULL WHERE task = t; then the fan-in statement starts: the pending
\* dependents it will visit are those committed now.

CompleteFanIn(w, d) ==
    /\ pc[w] = "completeFanIn"
    /\ d \in todo[w]
    /\ Unlocked(w, d)
    /\ IF row[d].st = "pending"
       THEN /\ lock' = [lock EXCEPT ![d] = w]
            /\ Stage(w, d, [row[d] EXCEPT !.rem = @ - 1,
                                          !.st = IF row[d].rem = 1 THEN "ready" ELSE "pending"])
       ELSE UNCHANGED <<lock, writes>>
    /\ todo' = [todo EXCEPT ![w] = @ \ {d}]
    /\ UNCHANGED <<row, slot, nextSeq, started, now, share, slotLock, slotWrites, pc, target, lease,
                   unsettled, held, claims, ends, endedAttempt>>
\* UPDATE task SET remaining_deps = remaining_deps - 1, state = CASE ... WHERE state =
\* 'pending' AND id IN (the dependents of t), at dependent d: it waits for d's lock, then
\* evaluates the condition and the new values on d's latest committed row.

CompleteCommit(w) ==
    LET t == target[w]
    IN  /\ pc[w] = "completeFanIn"
        /\ todo[w] = {}
        /\ row' = [x \in Tasks |-> Seen(w, x)]
        /\ slot' = [s \in Slots |-> IF s \in DOMAIN slotWrites[w] THEN slotWrites[w][s]
                                                                  ELSE slot[s]]
        /\ ends' = [ends EXCEPT ![t] = @ + 1]
        /\ endedAttempt' = [endedAttempt EXCEPT ![t] = lease[w]]
        /\ held' = [held EXCEPT ![w] = @ \ {<<t, lease[w]>>}]
        /\ lease' = [lease EXCEPT ![w] = 0]
        /\ Release(w)
        /\ Close(w)
        /\ UNCHANGED <<nextSeq, started, now, claims>>
\* COMMIT: the version succeeded, its slot is free, its dependents count one dep fewer.

-----------------------------------------------------------------------------
(* expire: a lease past its deadline loses its holder *)

Expire(w, t) ==
    /\ pc[w] = "idle"
    /\ Unlocked(w, t)
    /\ row[t].st = "running"
    /\ row[t].hold # NoWorker
    /\ row[t].att < MaxAttempts
    /\ row[t].deadline < now
    /\ lock' = [lock EXCEPT ![t] = w]
    /\ Stage(w, t, [row[t] EXCEPT !.hold = NoWorker, !.deadline = 0])
    /\ target' = [target EXCEPT ![w] = t]
    /\ pc' = [pc EXCEPT ![w] = "expireCommit"]
    /\ UNCHANGED <<row, slot, nextSeq, started, now, share, slotLock, slotWrites, lease, todo, unsettled,
                   held, claims, ends, endedAttempt>>
\* UPDATE task SET holder = NULL WHERE id = t AND state = 'running' AND holder IS NOT NULL
\* AND deadline < now(), in a claimer's transaction (with attempts left: the give-up after
\* the last one is not modelled here).  The condition is read on the latest committed row
\* once the lock is free; a deadline once past stays past.

ExpireCommit(w) ==
    /\ pc[w] = "expireCommit"
    /\ row' = [x \in Tasks |-> Seen(w, x)]
    /\ Release(w)
    /\ Close(w)
    /\ UNCHANGED <<slot, nextSeq, started, now, lease, held, claims, ends, endedAttempt>>
\* COMMIT: the version waits to be re-claimed, in its slot.

-----------------------------------------------------------------------------
(* submit: the dependencies' rows FOR SHARE, then the INSERT *)

SubmitBegin(t) ==
    /\ pc[Submitter] = "idle"
    /\ row[t].st = "absent"
    /\ \A d \in Deps[t] : row[d].st # "absent"
    /\ target' = [target EXCEPT ![Submitter] = t]
    /\ todo' = [todo EXCEPT ![Submitter] = Deps[t]]
    /\ pc' = [pc EXCEPT ![Submitter] = "submitDeps"]
    /\ UNCHANGED <<row, slot, nextSeq, started, now, lock, share, slotLock, writes, slotWrites, lease,
                   unsettled, held, claims, ends, endedAttempt>>
\* submit(t, deps): every dependency is known (a submitted row is never deleted).

SubmitDep(d) ==
    /\ pc[Submitter] = "submitDeps"
    /\ d \in todo[Submitter]
    /\ lock[d] \in {Nobody, Submitter}
    /\ share' = [share EXCEPT ![d] = @ \cup {Submitter}]
    /\ unsettled' = [unsettled EXCEPT ![Submitter] =
                        IF row[d].st = "succeeded" THEN @ ELSE @ \cup {d}]
    /\ todo' = [todo EXCEPT ![Submitter] = @ \ {d}]
    /\ UNCHANGED <<row, slot, nextSeq, started, now, lock, slotLock, writes, slotWrites, pc, target, lease,
                   held, claims, ends, endedAttempt>>
\* SELECT state FROM task WHERE id = d FOR SHARE: waits while a report holds d's row, then
\* reads its latest committed state; the share lock keeps d's state until this commits.

SubmitInsert ==
    LET t == target[Submitter]
        n == Cardinality(unsettled[Submitter])
    IN  /\ pc[Submitter] = "submitDeps"
        /\ todo[Submitter] = {}
        /\ row' = [row EXCEPT ![t] = [st |-> IF n = 0 THEN "ready" ELSE "pending",
                                      rem |-> n, att |-> 0, hold |-> NoWorker,
                                      seq |-> nextSeq, deadline |-> 0, due |-> now]]
        /\ nextSeq' = nextSeq + 1
        /\ Release(Submitter)
        /\ Close(Submitter)
        /\ UNCHANGED <<started, now, slot, lease, held, claims, ends, endedAttempt>>
\* INSERT the version (and its edges) and COMMIT, as one step: the new rows are nobody
\* else's to see or lock before the commit.

-----------------------------------------------------------------------------
(* start, and the clock *)

Start ==
    /\ ~started
    /\ pc[Submitter] = "idle"
    /\ started' = TRUE
    /\ UNCHANGED <<now, row, slot, nextSeq, lock, share, slotLock, writes, slotWrites, pc,
                   target, lease, todo, unsettled, held, claims, ends, endedAttempt>>
\* start(): one transaction of the submitter, which writes the store's started flag.

Tick ==
    /\ \E t \in Tasks : row[t].st = "running" /\ row[t].hold # NoWorker /\ row[t].deadline >= now
    /\ now' = now + 1
    /\ UNCHANGED <<started, row, slot, nextSeq, lock, share, slotLock, writes, slotWrites, pc,
                   target, lease, todo, unsettled, held, claims, ends, endedAttempt>>
\* The store's clock moves on while some live lease has yet to pass its deadline: the only
\* moments a tick can be noticed (DurableScheduler's Tick; every version here is due when
\* it is submitted).

-----------------------------------------------------------------------------
(* Aborts *)

Abort(a) ==
    /\ pc[a] # "idle"
    /\ Release(a)
    /\ Close(a)
    /\ lease' = IF a \in Workers THEN [lease EXCEPT ![a] = 0] ELSE lease
    /\ UNCHANGED <<row, slot, nextSeq, started, now, held, claims, ends, endedAttempt>>
\* a's client dies, or its connection drops, inside the transaction: the server rolls it
\* back.  Nothing it wrote is kept; its locks are released.  (A worker that lost a report
\* keeps its lease and may report again.)

-----------------------------------------------------------------------------

Next ==
    \/ \E w \in Workers :
          \/ ClaimTake(w) \/ ClaimSlot(w) \/ ClaimWrite(w) \/ ClaimCommit(w)
          \/ CompleteSlot(w) \/ CompleteCommit(w) \/ ExpireCommit(w)
          \/ \E t \in Tasks : \/ Expire(w, t)
                              \/ CompleteFanIn(w, t)
                              \/ \E a \in 1..MaxAttempts : CompleteFence(w, t, a)
    \/ \E t \in Tasks : SubmitBegin(t) \/ SubmitDep(t)
    \/ SubmitInsert
    \/ Start
    \/ Tick
    \/ \E a \in Agents : Abort(a)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants, on the committed rows *)

TypeOK ==
    /\ row \in [Tasks -> Row]
    /\ slot \in [Slots -> Tasks \cup {NoTask}]
    /\ lock \in [Tasks -> Agents \cup {Nobody}]
    /\ share \in [Tasks -> SUBSET Agents]
    /\ slotLock \in [Slots -> Agents \cup {Nobody}]
    /\ held \in [Workers -> SUBSET (Tasks \X Nat)]

IndegreeInvariant ==
    \A t \in Tasks :
        row[t].st \in {"pending", "ready"} =>
            row[t].rem = Cardinality({d \in Deps[t] : row[d].st # "succeeded"})
\* Scheduler's IndegreeInvariant: a waiting version counts exactly the dependencies that
\* have not succeeded.  A lost decrement, or a dependency counted as settled too early,
\* breaks it.

ReadyOnlyWhenNothingRemains ==
    \A t \in Tasks : row[t].st \in {"pending", "ready"} => (row[t].st = "ready" <=> row[t].rem = 0)
\* A waiting version is ready exactly when no dependency remains.

AtMostOneClaimPerVersion == \A t \in Tasks : claims[t] <= 1
\* A version is claimed once; any further lease is a re-claim after an expiry.

AtMostOneEndPerVersion == \A t \in Tasks : ends[t] <= 1
\* Implied by OnlyLiveLeaseEnds and NoTerminalToReady (an end commits on a running row and
\* leaves it succeeded, which it never leaves), so the configs check those two: a mutant that
\* breaks this one breaks one of them first.

ConcurrencyBound == Cardinality({t \in Tasks : row[t].st = "running"}) <= Cardinality(Slots)

SlotsFit ==
    /\ \A t \in Tasks : row[t].st = "running" <=> \E s \in Slots : slot[s] = t
    /\ \A s1, s2 \in Slots : s1 # s2 /\ slot[s1] # NoTask => slot[s1] # slot[s2]
\* Each running version holds exactly one slot row, and a slot row holds a running version
\* or none: max_concurrency is kept by the rows, with no count every claim must lock.

-----------------------------------------------------------------------------
(* Action properties *)

OnlyLiveLeaseEnds ==
    [][\A t \in Tasks :
          ends'[t] = ends[t] + 1 =>
              /\ row[t].st = "running"
              /\ row[t].att = endedAttempt'[t]
              /\ row[t].hold # NoWorker]_vars
\* The fence: a report's end commits only while its attempt is the version's live lease in
\* the rows committed just before it.

NoTerminalToReady ==
    [][\A t \in Tasks : row[t].st = "succeeded" => row'[t].st = "succeeded"]_vars

SkipOnlyLocked ==
    [][\A w \in Workers :
          (pc[w] = "idle" /\ pc'[w] \in {"claimSlot", "claimWrite"}) =>
              \A u \in Tasks :
                  (Claimable(u) /\ row[u].seq < row[target'[w]].seq) => ~Unlocked(w, u)]_vars
\* A claim passes over a claimable version that comes first only while another transaction
\* holds that version's row: a claim that commits or aborts soon after.  If it commits, the
\* version was that transaction's to take, and the two claims are in key order in the order
\* of their locks; if it aborts (its client died mid-claim), the version was passed over once.

-----------------------------------------------------------------------------
(* The refinement: every commit is one step of DurableScheduler *)

Waiting == {"pending", "ready"}

mGeneration == [t \in Tasks |-> IF row[t].st = "absent" THEN 0 ELSE 1]
mState == [t \in Tasks |-> row[t].st]
mDeps == [t \in Tasks |-> IF row[t].st = "absent" THEN {} ELSE Deps[t]]
mAttempt == [t \in Tasks |-> row[t].att]
mHolder == [t \in Tasks |-> row[t].hold]
mDeadline == [t \in Tasks |-> row[t].deadline]
mHeld == [w \in Workers |-> {<<l[1], 1, l[2]>> : l \in held[w]}]
mDue == [t \in Tasks |-> IF row[t].st \in Waiting THEN row[t].due ELSE 0]
\* DurableScheduler's variables, as the committed rows give them: each id has one version
\* (generation 1), a lease <<t, a>> of a worker is DurableScheduler's <<t, 1, a>>, and a
\* version's due time is kept while it waits.

Atomic == INSTANCE DurableScheduler WITH
    MaxConcurrency <- Cardinality(Slots),
    LoseAnswers <- FALSE,
    Priorities <- {-1, 0},
    Delays <- {0},
    Aging <- 0,
    OptionalEdges <- FALSE,
    AddDepsAllowed <- FALSE,
    closed <- FALSE,
    generation <- mGeneration,
    state <- mState,
    deps <- mDeps,
    optional <- [t \in Tasks |-> {}],
    remainingDeps <- [t \in Tasks |-> row[t].rem],
    blockedBy <- [t \in Tasks |-> NoTask],
    cancelRequested <- [t \in Tasks |-> FALSE],
    seq <- [t \in Tasks |-> row[t].seq],
    attempt <- mAttempt,
    holder <- mHolder,
    deadline <- mDeadline,
    held <- mHeld,
    due <- mDue,
    priority <- [t \in Tasks |-> 0],
    provenance <- [t \in Tasks |-> [root |-> NoTask, generation |-> 0, end |-> "none",
                                     path |-> <<>>]]
\* The atomic store this one implements.  Priorities holds a priority no submit gives, so
\* that Scheduler's Claim, under DurableScheduler's, may take any ready version: the claim
\* order is DurableScheduler's own (Chosen), and ClaimPassingOver below is the one way a
\* commit may depart from it.

ClaimPassingOver ==
    \E w \in Workers : \E t \in Tasks :
        /\ row[t].st = "ready"
        /\ mAttempt' = [mAttempt EXCEPT ![t] = 1]
        /\ mHolder' = [mHolder EXCEPT ![t] = w]
        /\ mDeadline' = [mDeadline EXCEPT ![t] = now + LeaseTime]
        /\ mHeld' = [mHeld EXCEPT ![w] = @ \cup {<<t, 1, 1>>}]
        /\ UNCHANGED <<now, ends, endedAttempt>>
        /\ mDue' = [x \in Tasks |-> IF mState'[x] \in Waiting THEN mDue[x] ELSE 0]
        /\ Atomic!Abs!Claim(1)
\* Atomic!Claim(w, 1) of a ready version that need not be the first in the claim order:
\* a claim whose SELECT passed over the first (SkipOnlyLocked: another transaction held
\* it), or whose SELECT came before the first became ready (a fan-in committed since).

Refinement == [][Atomic!Next \/ ClaimPassingOver]_(Atomic!vars)
\* Every commit is a step of DurableScheduler (a claim possibly out of the claim order), and
\* every other step (a statement, an abort) changes nothing DurableScheduler has.  Checked
\* as a property: a commit that writes the wrong rows is a violation, not a step TLC
\* would silently leave out.

AtomicInit == Atomic!Init
\* The committed rows of the initial state are DurableScheduler's initial state: with
\* Refinement, Atomic!Spec.  A state predicate among a config's PROPERTIES, which TLC
\* checks on the initial states.

=============================================================================

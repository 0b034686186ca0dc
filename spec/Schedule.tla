------------------------------ MODULE Schedule ------------------------------
(***************************************************************************)
(* One recurring schedule, stated as docs/time.md ("Recurring schedules")  *)
(* states it: slots at 0, Every, 2 * Every, ... up to MaxSlot on a clock   *)
(* now that only the environment moves; each slot whose time has come is   *)
(* decided once, oldest first, by the table of docs/time.md: missed (too   *)
(* old for Catchup), skipped (paused, or a run is unfinished under skip,   *)
(* or a slot is held already under buffer_one), held (buffer_one: kept     *)
(* undecided until no run is unfinished, then it runs), or run.  A run is  *)
(* named by its slot and is unfinished until Finish.  The durable          *)
(* scheduler's store transactions and the TimerRunner take these steps     *)
(* through refsched.schedule.advance; refsched.model.schedule is the model *)
(* of this module, action by action.                                       *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    Overlap,    \* "skip", "buffer_one" or "allow": what a slot does while a run is unfinished
    Catchup,    \* a slot older than this many ticks when decided is missed; or NoCatchup
    NoCatchup,  \* a model value: no slot is too old (catchup=None)
    Every,      \* ticks between two slots, > 0
    MaxSlot     \* the last slot's time: the schedule has finitely many slots

ASSUME Overlap \in {"skip", "buffer_one", "allow"}
ASSUME Catchup \in Nat \cup {NoCatchup}
ASSUME Every \in Nat \ {0}
ASSUME MaxSlot \in Nat

VARIABLES
    now,         \* Nat: the clock; only Tick moves it, and only forwards
    next,        \* the oldest slot neither decided nor held; every slot before it is one or the other
    held,        \* the set of held slots: at most one, under buffer_one only; each before next
    paused,      \* BOOLEAN: the schedule is paused
    unfinished,  \* the set of slots whose run is unfinished
    decided      \* the set of <<slot, decision>> made so far, decision in Decisions

vars == <<now, next, held, paused, unfinished, decided>>

-----------------------------------------------------------------------------
(* Slots and decisions *)

Slots == {k * Every : k \in 0..(MaxSlot \div Every)}
\* The schedule's slots.

Decisions == {"run", "skipped", "missed"}
\* What a slot ends as; "hold" below keeps a slot undecided.

DecidedSlots == {p[1] : p \in decided}
\* The slots decided so far.

TooOld(s) == Catchup # NoCatchup /\ now - s > Catchup
\* Slot s is older than Catchup allows, at the current time.

Decision(s) ==
    IF TooOld(s) THEN "missed"
    ELSE IF paused THEN "skipped"
    ELSE IF Overlap = "skip" /\ unfinished # {} THEN "skipped"
    ELSE IF Overlap = "buffer_one" /\ unfinished # {}
         THEN IF held # {} THEN "skipped" ELSE "hold"
    ELSE "run"
\* docs/time.md's table, its rows tried in order: refsched.schedule.decide.

Owed == next \in Slots /\ next <= now
\* The oldest undecided slot's time has come.

Releasable == held # {} /\ unfinished = {}
\* The held slot may run: no run is unfinished.

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ now = 0
    /\ next = 0
    /\ held = {}
    /\ paused = FALSE
    /\ unfinished = {}
    /\ decided = {}
\* A schedule created at time 0: its first slot is due, nothing decided, nothing runs.

-----------------------------------------------------------------------------
(* Actions *)

Decide ==
    /\ Owed
    /\ ~Releasable
    /\ LET d == Decision(next)
       IN  IF d = "hold"
           THEN /\ held' = held \cup {next}
                /\ UNCHANGED <<unfinished, decided>>
           ELSE /\ decided' = decided \cup {<<next, d>>}
                /\ unfinished' = IF d = "run" THEN unfinished \cup {next} ELSE unfinished
                /\ UNCHANGED held
    /\ next' = next + Every
    /\ UNCHANGED <<now, paused>>
\* A transaction decides the oldest owed slot: a run starts unfinished, a held slot waits.  A
\* releasable held slot goes first (Release): it is older than every owed slot.

Release ==
    /\ Releasable
    /\ LET s == CHOOSE x \in held : TRUE
       IN  /\ decided' = decided \cup {<<s, "run">>}
           /\ unfinished' = {s}
           /\ held' = held \ {s}
    /\ UNCHANGED <<now, next, paused>>
\* No run is unfinished: the held slot runs, whatever its age, paused or not.

Finish(r) ==
    /\ r \in unfinished
    /\ unfinished' = unfinished \ {r}
    /\ UNCHANGED <<now, next, held, paused, decided>>
\* The run of slot r ends (succeeded, failed, blocked or cancelled).

Pause ==
    /\ ~paused
    /\ paused' = TRUE
    /\ UNCHANGED <<now, next, held, unfinished, decided>>
\* pause(name): slots are skipped from now on.

Resume ==
    /\ paused
    /\ paused' = FALSE
    /\ UNCHANGED <<now, next, held, unfinished, decided>>
\* resume(name): slots are decided by the policy again.

Tick ==
    /\ now' = now + 1
    /\ UNCHANGED <<next, held, paused, unfinished, decided>>
\* The clock moves on; a model-checking module bounds it.

Next ==
    \/ Decide
    \/ Release
    \/ \E r \in Slots : Finish(r)
    \/ Pause
    \/ Resume
    \/ Tick
\* A transaction, a run's end, a call, or the clock moving on.

Spec == Init /\ [][Next]_vars
\* Every behaviour of the schedule, without fairness.

FairSpec ==
    /\ Spec
    /\ WF_vars(Decide)
    /\ WF_vars(Release)
    /\ \A r \in Slots : WF_vars(Finish(r))
\* Transactions keep coming while a slot is owed, and every run ends.

-----------------------------------------------------------------------------
(* Invariants *)

TypeOK ==
    /\ now \in Nat
    /\ next \in Slots \cup {(MaxSlot \div Every + 1) * Every}
    /\ held \subseteq Slots
    /\ paused \in BOOLEAN
    /\ unfinished \subseteq Slots
    /\ decided \subseteq Slots \X Decisions
\* Every variable holds a value of its type.

SkipNeverOverlaps == Overlap = "skip" => Cardinality(unfinished) <= 1
\* Under skip, at most one run of the schedule is unfinished.

BufferHoldsOne ==
    Overlap = "buffer_one" => Cardinality(unfinished) <= 1 /\ Cardinality(held) <= 1
\* Under buffer_one, at most one run is unfinished and at most one slot is held.

-----------------------------------------------------------------------------
(* Action properties *)

OneDecisionPerSlot ==
    [][/\ decided \subseteq decided'
       /\ \A p, q \in decided' : p[1] = q[1] => p = q
       /\ \A p \in decided' \ decided :
              \A s \in Slots : s < p[1] => s \in DecidedSlots' \/ s \in held]_vars
\* A decision, once made, never changes, and a slot has one; a slot is decided only once
\* every slot before it is decided or held: slots are decided in order (a held slot when
\* released).

CatchupKept ==
    [][\A s \in Slots :
          (s \notin DecidedSlots /\ s \in DecidedSlots' /\ s \notin held)
              => (<<s, "missed">> \in decided' <=> Catchup # NoCatchup /\ now - s > Catchup)]_vars
\* A slot decided as its time comes (not released) is missed exactly when it is older than
\* Catchup: never with NoCatchup.  Written apart from TooOld, so that a wrong TooOld in the
\* actions does not pass unnoticed.

-----------------------------------------------------------------------------
(* Liveness *)

EverySlotDecided == \A s \in Slots : (s <= now) ~> (s \in DecidedSlots)
\* Under FairSpec every slot whose time has come is decided (a held one once released).
=============================================================================

---------------------------- MODULE WorkStealing ----------------------------
(***************************************************************************)
(* The work-stealing pool of refsched (refsched.WorkStealingPool), as the  *)
(* design document states it.  A fixed set of workers, each with its own   *)
(* deque.  A task submitted from outside goes to the bottom of some        *)
(* worker's deque; a running task may submit children onto the bottom of   *)
(* its own worker's deque.  The owner takes from the bottom (LIFO); a      *)
(* worker with an empty deque that runs nothing steals from the top of     *)
(* another's (FIFO).  A task runs only once it has been taken out of a     *)
(* deque, so taking it is the one point where it is claimed.               *)
(* Shutdown moves the pool from accepting to draining (no new roots; the   *)
(* tasks already admitted still run and may still spawn children) and the  *)
(* pool is terminated once nothing is outstanding.  A task's failure is an *)
(* outcome of Finish, not another path.  Each action here is a step of the *)
(* reference model refsched.model.pool and a call (or a worker's move) of  *)
(* refsched.WorkStealingPool.                                              *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    Workers,  \* the pool's workers, each with its own deque
    Tasks,    \* the task ids a behaviour may submit; each is submitted at most once
    Children, \* the tasks submitted from inside, by whatever task runs; the others are
              \* roots, submitted from outside
    NoTask,   \* running[w] of an idle worker, parent[t] of a root or unsubmitted task
    Spares,   \* the compensating threads managed blocking may start (section "Managed
              \* blocking" below); {} when the pool has none
    MaxSpares, \* Nat: how many spares may be started at once; 0 turns managed blocking off
    StealCap  \* the most tasks one steal takes; 1: single steals only (see Batch steals)

ASSUME Workers # {}
ASSUME Children \subseteq Tasks
ASSUME NoTask \notin Tasks
ASSUME Spares \cap Workers = {}
ASSUME MaxSpares \in Nat
ASSUME StealCap \in Nat \ {0}

VARIABLES
    phase,       \* "accepting", "draining" or "terminated"; only ever moves forward
    deque,       \* [Threads -> Seq(Tasks)]: deque[w][1] is the top (where thieves take),
                 \* deque[w][Len(deque[w])] the bottom (where the owner pushes and pops)
    running,     \* [Threads -> Tasks \cup {NoTask}]: the task w runs; NoTask while w is idle
    outstanding, \* Nat: the pool's count of tasks submitted and not yet finished or cancelled
    submitted,   \* SUBSET Tasks: every task submitted so far, root or child
    finished,    \* SUBSET Tasks: the tasks whose run has ended, by returning or by raising
    cancelled,   \* SUBSET Tasks: the tasks CancelQueued took out of a deque before they ran
    runs,        \* [Tasks -> Nat]: how many times a worker took t out of a deque to run it
    parent,      \* [Tasks -> Tasks \cup {NoTask}]: the running task that submitted t;
                 \* NoTask for a root task and for a task not submitted
    blocked,     \* SUBSET Threads: the threads whose running task blocks inside blocking()
    spare,       \* [Spares -> {"off", "starting", "on"}]: off (no thread), starting (its
                 \* thread was launched and serves nothing yet), on (it serves like a worker)
    blocker      \* [Spares -> SUBSET Threads]: the blocked thread spare s stands in for, or
                 \* {} once that thread returned from blocking() (and while s is off)

vars == <<phase, deque, running, outstanding, submitted, finished, cancelled, runs, parent,
          blocked, spare, blocker>>

Threads == Workers \cup Spares
\* Everything that may run a task, with its own deque: the workers, and the spares.

Serving(x) == IF x \in Workers THEN TRUE ELSE spare[x] = "on"
\* x takes tasks: every worker, and a spare once its thread started.  (An IF, not a
\* disjunction: in an action TLC would try both disjuncts, and spare[w] is no value.)

-----------------------------------------------------------------------------
(* Deques and derived sets *)

Phases == {"accepting", "draining", "terminated"}
\* The pool's life cycle: accepting -> draining -> terminated, or accepting -> terminated.

Bottom(s) == s[Len(s)]
\* The bottom of a non-empty deque: the task its owner pushed last.

WithoutBottom(s) == SubSeq(s, 1, Len(s) - 1)
\* A non-empty deque after its owner popped the bottom.

Range(s) == {s[i] : i \in DOMAIN s}
\* The tasks a deque holds.

Queued == UNION {Range(deque[w]) : w \in Threads}
\* The tasks waiting in some deque.

Running == {running[w] : w \in Threads} \ {NoTask}
\* The tasks some worker runs.

Slots == UNION {{<<w, i>> : i \in DOMAIN deque[w]} : w \in Threads}
\* Every deque slot: <<w, i>> is the i-th place of w's deque, counted from the top.

Copies(t) == Cardinality({s \in Slots : deque[s[1]][s[2]] = t})
\* How many deque slots, over all deques, hold t.

-----------------------------------------------------------------------------
(* Batch steals *)

(***************************************************************************)
(* With StealCap > 1 a thief takes several tasks in one step: StealCap of  *)
(* them, from the top of a victim whose deque holds at least twice as      *)
(* many.  The first (the oldest) runs at once; the others go to the        *)
(* thief's own deque, which was empty, in the order they had in the        *)
(* victim's: the oldest on top, where the next thief takes, and the newest *)
(* at the bottom, which the thief pops next.  A shorter deque gives one    *)
(* task, by Steal: a batch leaves the victim at least as many as it takes, *)
(* and a deque that holds one pending subtree per level of a fork-join     *)
(* tree (the oldest the largest) stays at single steals, which already     *)
(* take the most work there is.  With StealCap = 1 StealBatch is never     *)
(* enabled and Steal is the single steal it always was.                    *)
(***************************************************************************)

StealSize(n) == IF n >= 2 * StealCap THEN StealCap ELSE 1
\* How many tasks a steal takes from a victim whose deque holds n > 0 tasks.

StealBatch(thief, victim) ==
    LET k     == StealSize(Len(deque[victim]))
        taken == SubSeq(deque[victim], 1, k)
    IN  /\ thief # victim
        /\ Serving(thief)
        /\ running[thief] = NoTask
        /\ deque[thief] = <<>>
        /\ deque[victim] # <<>>
        /\ k > 1
        /\ running' = [running EXCEPT ![thief] = taken[1]]
        /\ deque' = [deque EXCEPT ![victim] = SubSeq(@, k + 1, Len(@)),
                                  ![thief] = Tail(taken)]
        /\ runs' = [runs EXCEPT ![taken[1]] = @ + 1]
        /\ UNCHANGED <<phase, outstanding, submitted, finished, cancelled, parent>>
        /\ UNCHANGED <<blocked, spare, blocker>>
\* The idle thief, its own deque empty, takes the k oldest tasks of the victim's deque in
\* one step: it runs the first and keeps the others, in their order, as its own deque.
\* Taking them out is the claim of all k: an owner's Pop and another thief's steal find
\* them gone.

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ phase = "accepting"
    /\ deque = [w \in Threads |-> <<>>]
    /\ running = [w \in Threads |-> NoTask]
    /\ outstanding = 0
    /\ submitted = {}
    /\ finished = {}
    /\ cancelled = {}
    /\ runs = [t \in Tasks |-> 0]
    /\ parent = [t \in Tasks |-> NoTask]
    /\ blocked = {}
    /\ spare = [s \in Spares |-> "off"]
    /\ blocker = [s \in Spares |-> {}]
\* A fresh pool: accepting, every deque empty, every worker idle, nothing submitted.

-----------------------------------------------------------------------------
(* Actions *)

SubmitExternal(t, w) ==
    /\ phase = "accepting"
    /\ t \in Tasks \ Children
    /\ t \notin submitted
    /\ deque' = [deque EXCEPT ![w] = Append(@, t)]
    /\ outstanding' = outstanding + 1
    /\ submitted' = submitted \cup {t}
    /\ UNCHANGED <<phase, running, finished, cancelled, runs, parent>>
    /\ UNCHANGED <<blocked, spare, blocker>>
\* submit(t) from outside the pool: the root task t goes to the bottom of w's deque and is
\* counted.  Which deque the pool picks (the least loaded, round robin) is its own choice:
\* any w here.  Only while accepting.

SubmitChild(t, w) ==
    LET p == running[w]
    IN  /\ phase \in {"accepting", "draining"}
        /\ p # NoTask
        /\ t \in Children
        /\ t \notin submitted
        /\ deque' = [deque EXCEPT ![w] = Append(@, t)]
        /\ outstanding' = outstanding + 1
        /\ submitted' = submitted \cup {t}
        /\ parent' = [parent EXCEPT ![t] = p]
        /\ UNCHANGED <<phase, running, finished, cancelled, runs>>
        /\ UNCHANGED <<blocked, spare, blocker>>
\* submit(t) from inside: the task p that w runs (a root, or a child itself) spawns the
\* child t onto the bottom of w's own deque, and t is counted now, a step before p can
\* finish: outstanding never drops to zero while p's children are still to run.  Allowed
\* while draining too: a shutdown stops new roots, not the work already admitted.

Pop(w) ==
    /\ Serving(w)
    /\ running[w] = NoTask
    /\ deque[w] # <<>>
    /\ running' = [running EXCEPT ![w] = Bottom(deque[w])]
    /\ deque' = [deque EXCEPT ![w] = WithoutBottom(@)]
    /\ runs' = [runs EXCEPT ![Bottom(deque[w])] = @ + 1]
    /\ UNCHANGED <<phase, outstanding, submitted, finished, cancelled, parent>>
    /\ UNCHANGED <<blocked, spare, blocker>>
\* The idle worker w takes the task at the bottom of its own deque, the one pushed last
\* (LIFO), and runs it.  (w may be a spare that has started: it serves as a worker does.)

Steal(thief, victim) ==
    /\ thief # victim
    /\ Serving(thief)
    /\ running[thief] = NoTask
    /\ deque[thief] = <<>>
    /\ deque[victim] # <<>>
    /\ StealSize(Len(deque[victim])) = 1
    /\ running' = [running EXCEPT ![thief] = Head(deque[victim])]
    /\ deque' = [deque EXCEPT ![victim] = Tail(@)]
    /\ runs' = [runs EXCEPT ![Head(deque[victim])] = @ + 1]
    /\ UNCHANGED <<phase, outstanding, submitted, finished, cancelled, parent>>
    /\ UNCHANGED <<blocked, spare, blocker>>
\* The idle thief, its own deque empty, takes the task at the top of the victim's deque,
\* the oldest there (FIFO), and runs it.  Taking it out is the claim: whoever loses the
\* race for that task finds it gone.  A victim a batch steal would take several from is
\* StealBatch's (see Batch steals).

Finish(w) ==
    /\ running[w] # NoTask
    /\ w \notin blocked
    /\ running' = [running EXCEPT ![w] = NoTask]
    /\ finished' = finished \cup {running[w]}
    /\ outstanding' = outstanding - 1
    /\ phase' = IF phase = "draining" /\ outstanding = 1 THEN "terminated" ELSE phase
    /\ UNCHANGED <<deque, submitted, cancelled, runs, parent>>
    /\ UNCHANGED <<blocked, spare, blocker>>
\* The task w runs, not blocked, ends, returning or raising (its future holds the outcome; the worker
\* lives on), and is no longer counted.  The last task of a draining pool to end
\* terminates it.

Shutdown ==
    /\ phase = "accepting"
    /\ phase' = IF outstanding = 0 THEN "terminated" ELSE "draining"
    /\ UNCHANGED <<deque, running, outstanding, submitted, finished, cancelled, runs, parent>>
    /\ UNCHANGED <<blocked, spare, blocker>>
\* shutdown(): no more roots.  The pool drains what it has, or is terminated at once when
\* nothing is outstanding.  A second shutdown() changes nothing: no step.

CancelQueued ==
    /\ phase = "draining"
    /\ Queued # {}
    /\ deque' = [w \in Threads |-> <<>>]
    /\ cancelled' = cancelled \cup Queued
    /\ outstanding' = outstanding - Cardinality(Queued)
    /\ phase' = IF outstanding = Cardinality(Queued) THEN "terminated" ELSE phase
    /\ UNCHANGED <<running, submitted, finished, runs, parent>>
    /\ UNCHANGED <<blocked, spare, blocker>>
\* shutdown(cancel_futures=True), after Shutdown: every task still in a deque is cancelled
\* and no longer counted; running tasks run on (and may still spawn children).  The pool
\* is terminated if nothing runs.

-----------------------------------------------------------------------------
(***************************************************************************)
(* Managed blocking: actions.  A running task that blocks                  *)
(* (pool.blocking(), managed_block(fn)) is Block(x); while it blocks, a    *)
(* spare thread stands in for x, so that Workers threads still take tasks. *)
(* A spare has a deque of its own (the children its tasks spawn go there,  *)
(* and thieves steal from it as from any).  At most MaxSpares spares are   *)
(* on or starting at once; past that bound a blocker blocks uncompensated. *)
(* A spare whose blocker returned retires once it is idle with its own     *)
(* deque empty, so it hands back no task.  With MaxSpares = 0 none of this *)
(* is enabled and the pool is the one above.                               *)
(***************************************************************************)

ActiveSpares == {s \in Spares : spare[s] # "off"}
\* The spares that hold a thread: starting, serving, or finishing before they retire.

Runnable == {x \in Threads : Serving(x) /\ x \notin blocked}
\* The threads that can take or run a task now.

Free(s) ==
    \/ spare[s] # "off" /\ blocker[s] = {}
    \/ spare[s] = "off" /\ Cardinality(ActiveSpares) < MaxSpares
\* s can stand in for a new blocker: an active spare released by its blocker (its thread is
\* still there: it is adopted), or an off one while fewer than MaxSpares are active.

Block(x) ==
    /\ MaxSpares > 0
    /\ running[x] # NoTask
    /\ x \notin blocked
    /\ blocked' = blocked \cup {x}
    /\ IF \E s \in Spares \ {x} : Free(s)
       THEN \E s \in Spares \ {x} :
                /\ Free(s)
                /\ spare' = [spare EXCEPT ![s] = IF @ = "off" THEN "starting" ELSE @]
                /\ blocker' = [blocker EXCEPT ![s] = {x}]
       ELSE UNCHANGED <<spare, blocker>>
    /\ UNCHANGED <<phase, deque, running, outstanding, submitted, finished, cancelled, runs,
                   parent>>
\* The task x runs enters blocking(): a spare stands in for x, a released one adopted or an
\* off one launched (never x itself: a blocked spare cannot stand in for itself); with
\* MaxSpares active and none released, x blocks uncompensated.  A
\* thread stands in for at most one blocker, so with MaxSpares at least the blockers there
\* can be at once, every blocker is compensated.

StartSpare(s) ==
    /\ spare[s] = "starting"
    /\ spare' = [spare EXCEPT ![s] = "on"]
    /\ UNCHANGED <<phase, deque, running, outstanding, submitted, finished, cancelled, runs,
                   parent, blocked, blocker>>
\* The spare's thread begins serving: it pops its own deque and steals from any other.
\* Its blocker may have returned meanwhile; it then finds nothing to do and retires.

Unblock(x) ==
    /\ x \in blocked
    /\ blocked' = blocked \ {x}
    /\ blocker' = [s \in Spares |-> blocker[s] \ {x}]
    /\ UNCHANGED <<phase, deque, running, outstanding, submitted, finished, cancelled, runs,
                   parent, spare>>
\* The blocking call returns and x's task runs on; the spare that stood in for x (if any)
\* is released: it will retire.

Retire(s) ==
    /\ spare[s] = "on"
    /\ blocker[s] = {}
    /\ running[s] = NoTask
    /\ deque[s] = <<>>
    /\ spare' = [spare EXCEPT ![s] = "off"]
    /\ UNCHANGED <<phase, deque, running, outstanding, submitted, finished, cancelled, runs,
                   parent, blocked, blocker>>
\* A released spare, idle, its own deque empty, gives its thread back.

-----------------------------------------------------------------------------
(* The pool's steps *)

Next ==
    \/ \E t \in Tasks, w \in Workers : SubmitExternal(t, w)
    \/ \E t \in Tasks, w \in Threads : SubmitChild(t, w)
    \/ \E w \in Threads : Pop(w)
    \/ \E thief, victim \in Threads : Steal(thief, victim)
    \/ \E thief, victim \in Threads : StealBatch(thief, victim)
    \/ \E w \in Threads : Finish(w)
    \/ Shutdown
    \/ CancelQueued
    \/ \E x \in Threads : Block(x) \/ Unblock(x)
    \/ \E s \in Spares : StartSpare(s) \/ Retire(s)
\* Any one call, or any one worker's move.

Spec == Init /\ [][Next]_vars
\* Every behaviour of the pool, without fairness.

FairSpec ==
    /\ Spec
    /\ \A w \in Workers : WF_vars(Pop(w))
    /\ \A w \in Workers : WF_vars(\E v \in Threads : Steal(w, v) \/ StealBatch(w, v))
    /\ \A w \in Workers : SF_vars(Finish(w))
    /\ \A s \in Spares : WF_vars(Pop(s))
    /\ \A s \in Spares : WF_vars(\E v \in Threads : Steal(s, v) \/ StealBatch(s, v))
    /\ \A s \in Spares : SF_vars(Finish(s))
    /\ \A s \in Spares : WF_vars(StartSpare(s))
    /\ \A s \in Spares : WF_vars(Retire(s))
\* Workers keep working: an idle worker with a task in its deque takes it, an idle worker
\* with an empty deque steals while there is something to steal, and every running task
\* eventually ends, unless it blocks for ever (strong fairness: a task whose blocking calls
\* keep returning ends, however often it blocks again).  A spare's thread, once launched, starts
\* serving, serves as a worker does, and retires once its blocker has returned and it is
\* idle.  A blocking call may never return: no fairness on Unblock (ReturningFairSpec).

ReturningFairSpec == FairSpec /\ \A x \in Threads : WF_vars(Unblock(x))
\* As FairSpec, and every blocking call eventually returns.

-----------------------------------------------------------------------------
(* Invariants *)

TypeOK ==
    /\ phase \in Phases
    /\ deque \in [Threads -> Seq(Tasks)]
    /\ running \in [Threads -> Tasks \cup {NoTask}]
    /\ outstanding \in Nat
    /\ submitted \subseteq Tasks
    /\ finished \subseteq Tasks
    /\ cancelled \subseteq Tasks
    /\ runs \in [Tasks -> Nat]
    /\ parent \in [Tasks -> Tasks \cup {NoTask}]
    /\ blocked \subseteq Threads
    /\ spare \in [Spares -> {"off", "starting", "on"}]
    /\ blocker \in [Spares -> SUBSET Threads]
\* Every variable holds a value of its type.

ExecutedAtMostOnce == \A t \in Tasks : runs[t] + Copies(t) <= 1
\* Every task is taken to run at most once; and once taken it is in no deque, nor is any
\* task in two deque slots: no later step can run it a second time.

OutstandingIsQueuedPlusRunning == outstanding = Cardinality(Queued \cup Running)
\* The pool's count is the number of tasks queued plus those running.  (ExecutedAtMostOnce
\* keeps the two apart and each task in one slot; counting the union leaves that fault to it.)

TerminatedOnlyWhenIdle ==
    phase = "terminated" =>
        /\ outstanding = 0
        /\ \A w \in Threads : deque[w] = <<>> /\ running[w] = NoTask
\* The pool is terminated only when nothing is outstanding, every deque is empty and no
\* worker (nor spare) runs a task.

NoTaskLost == submitted = Queued \cup Running \cup finished \cup cancelled
\* Every submitted task is queued, running, finished or cancelled, and nothing else is
\* anywhere.

CancelledNeverRan == \A t \in cancelled : runs[t] = 0
\* Only a task that never started is cancelled.

HaltsOnlyWhenTerminated == phase = "draining" => Queued \cup Running # {}
\* A pool that is not terminated can always take a step: an accepting pool can be shut
\* down, and a draining one has a task to take or to end (an idle worker pops or steals a
\* queued task, a running one finishes).  So only a terminated pool halts: a draining pool
\* left with nothing to do, which never terminates, is a violation here, not a deadlock
\* that -deadlock would let pass.

-----------------------------------------------------------------------------
(* Action properties *)

Spawned(t) == t \notin submitted /\ t \in submitted'
\* t is submitted in this step.

StartsRunning(w) == running[w] = NoTask /\ running'[w] # NoTask
\* The idle worker w takes a task in this step.

ChildCountedBeforeParentCompletes ==
    [][\A t \in Tasks :
          (Spawned(t) /\ parent'[t] # NoTask)
              => parent'[t] \in Running /\ parent'[t] \notin finished']_vars
\* A child is submitted while its parent runs, never after the parent ended; and as it is
\* queued it is counted (OutstandingIsQueuedPlusRunning), so the count never drops to zero
\* between a parent's end and its children.

OwnerTakesBottom ==
    [][\A w \in Threads :
          (StartsRunning(w) /\ deque[w] # <<>>) => running'[w] = Bottom(deque[w])]_vars
\* A worker with tasks of its own takes the one at the bottom of its deque (LIFO).

ThiefTakesTop ==
    [][\A w \in Threads :
          (StartsRunning(w) /\ deque[w] = <<>>)
              => \E v \in Threads \ {w} : deque[v] # <<>> /\ running'[w] = Head(deque[v])]_vars
\* A worker with an empty deque takes the task at the top of another worker's deque (FIFO).

RootsOnlyWhileAccepting ==
    [][\A t \in Tasks : (Spawned(t) /\ parent'[t] = NoTask) => phase = "accepting"]_vars
\* No task is submitted from outside once shutdown() was called.

PhasesInOrder ==
    [][/\ phase = "draining" => phase' \in {"draining", "terminated"}
       /\ phase = "terminated" => phase' = "terminated"
       /\ phase = "accepting" /\ phase' # "accepting"
              => UNCHANGED <<deque, running, outstanding>>]_vars
\* accepting -> draining -> terminated, never back; and only shutdown(), which moves no task,
\* ends accepting: the pool does not close itself when it runs out of work.

-----------------------------------------------------------------------------
(* Batch steals: action properties *)

StolenInOrder ==
    [][\A w \in Threads :
          (StartsRunning(w) /\ deque[w] = <<>>)
              => \E v \in Threads \ {w} : \E i \in 1..Len(deque[v]) :
                     LET d == deque[v]
                         j == i + Len(deque'[w])
                     IN  /\ d[i] = running'[w]
                         /\ j <= Len(d)
                         /\ deque'[w] = SubSeq(d, i + 1, j)
                         /\ deque'[v] = SubSeq(d, 1, i - 1) \o SubSeq(d, j + 1, Len(d))]_vars
\* A thief takes consecutive tasks of one victim's deque and nothing else of it: it runs the
\* first and keeps the others as its own deque, in the order they had.  (That the first is
\* the victim's top is ThiefTakesTop.)

StealTakesAtMostHalf ==
    [][\A w \in Threads :
          (StartsRunning(w) /\ deque[w] = <<>> /\ deque'[w] # <<>>)
              => \E v \in Threads \ {w} : 2 * (1 + Len(deque'[w])) <= Len(deque[v])]_vars
\* A steal of several tasks takes at most half of the victim's deque: a thief never leaves
\* a victim with fewer tasks than it took.  (How many it takes, StealCap included, is
\* StealSize's; the model's step is that number, and the lock-step walks hold the pool to it.)

-----------------------------------------------------------------------------
(* Liveness *)

EverySubmittedTaskRuns ==
    \A t \in Tasks : t \in submitted ~> (t \in finished \/ t \in cancelled)
\* Every submitted task runs to its end, unless shutdown(cancel_futures=True) cancels it
\* before it starts.

ShutdownTerminates == phase = "draining" ~> phase = "terminated"
\* A draining pool is eventually terminated.
-----------------------------------------------------------------------------
(* Managed blocking: invariants and liveness *)

CompensationBounded == Cardinality(ActiveSpares) <= MaxSpares
\* At most MaxSpares spares are active at once (a spare still finishing its last task after
\* its blocker returned counts too).

ReleasedSpares == {s \in ActiveSpares : blocker[s] = {}}
\* The active spares whose blocker returned: each finishes what it runs, then retires.

RunnableBounded == Cardinality(Runnable) <= Cardinality(Workers) + Cardinality(ReleasedSpares)
\* Beyond Workers threads, only released spares can run tasks: a spare never runs alongside
\* the thread it stands in for.  With CompensationBounded, at most Workers + MaxSpares
\* threads run tasks at once.

SparesStandInForBlockers ==
    \A s \in Spares :
        /\ spare[s] = "off" => blocker[s] = {} /\ running[s] = NoTask /\ deque[s] = <<>>
        /\ blocker[s] \subseteq blocked
\* An off spare runs nothing and holds no task; an active one stands in for a thread that
\* is still blocked, or for none.

QueuedTasksRunDespiteBlockers == \A t \in Tasks : t \in Queued ~> t \notin Queued
\* Under FairSpec, with MaxSpares as large as the blockers there can be: a queued task is
\* taken even if every blocking call blocks for ever, since a spare stands in for each.

SparesRetire == \A s \in Spares : (spare[s] # "off" /\ blocker[s] = {}) ~> spare[s] = "off"
\* Under ReturningFairSpec: a released spare gives its thread back.
=============================================================================

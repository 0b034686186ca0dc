--------------------------- MODULE MCTimerQueue ----------------------------
(***************************************************************************)
(* Model-checking constants, bounds and symmetry for TimerQueue; nothing   *)
(* else.  MCTimerQueue.cfg checks safety; MCTimerQueueTraces.cfg is the    *)
(* small instance whose whole state graph the trace corpus covers.         *)
(***************************************************************************)
EXTENDS TimerQueue, TLC

CONSTANTS
    MaxTime,      \* time stops here; Schedule names the times 0..MaxTime
    MaxVersion,   \* no id gets more than this many versions
    MaxSchedules  \* no behaviour makes more than this many schedule() calls in all

MCTimes == 0..MaxTime
\* Replaces Times: every time up to MaxTime, the past as well as the future.

TimeBound == now <= MaxTime
\* State constraint: stop exploring once the clock passes MaxTime.

VersionBound ==
    /\ \A t \in Tasks : version[t] <= MaxVersion
    /\ nextSeq <= MaxSchedules + 1
\* State constraint: stop exploring past MaxVersion versions of an id, or past
\* MaxSchedules schedules in all.

TaskSymmetry == Permutations(Tasks)
\* Ids are interchangeable (the spec orders entries by seq, never by id): safety only.
=============================================================================

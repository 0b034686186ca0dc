----------------------------- MODULE MCSchedule -----------------------------
(***************************************************************************)
(* Model-checking bounds for Schedule; nothing else.  One config per       *)
(* overlap policy, so that each property is checked where it can fail:     *)
(* MCSchedule.cfg (skip), MCScheduleBuffer.cfg (buffer_one),               *)
(* MCScheduleAllow.cfg (allow, no catch-up), and MCScheduleLiveness.cfg    *)
(* (EverySlotDecided under FairSpec).                                       *)
(***************************************************************************)
EXTENDS Schedule

CONSTANT
    MaxTime  \* time stops here

TimeBound == now <= MaxTime
\* State constraint: stop exploring once the clock passes MaxTime.
=============================================================================

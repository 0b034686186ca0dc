---------------------------- MODULE MCScheduler ----------------------------
(***************************************************************************)
(* Model-checking constants, bounds and symmetry for Scheduler; nothing    *)
(* else.  MCScheduler.cfg checks safety, MCSchedulerLiveness.cfg liveness. *)
(***************************************************************************)
EXTENDS Scheduler, TLC

CONSTANT MaxGeneration
\* No id gets more than this many versions (Submit and Retry both add one).

GenerationBound == \A t \in Tasks : generation[t] <= MaxGeneration
\* State constraint: stop exploring past MaxGeneration versions of any id.

MCGenerations == 1..MaxGeneration
\* Replaces Generations (= Nat) in EveryVersionEnds: every generation the bound allows.

TaskSymmetry == Permutations(Tasks)
\* Ids are interchangeable (the spec only compares them by seq): safety only, never liveness.
=============================================================================

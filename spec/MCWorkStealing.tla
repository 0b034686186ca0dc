--------------------------- MODULE MCWorkStealing ---------------------------
(***************************************************************************)
(* Model-checking symmetry for WorkStealing; nothing else (the spec is     *)
(* finite as it stands: each task is submitted at most once).              *)
(* MCWorkStealing.cfg checks safety, MCWorkStealingLiveness.cfg liveness;  *)
(* MCWorkStealingTraces.cfg is the small instance whose whole state graph  *)
(* a trace corpus can cover.                                               *)
(***************************************************************************)
EXTENDS WorkStealing, TLC

Symmetry ==
    {p @@ q @@ r : p \in Permutations(Workers),
                   q \in Permutations(Tasks \ Children),
                   r \in Permutations(Children)}
\* Workers are interchangeable, and so are the roots among themselves and the children
\* among themselves (the spec tells them apart by name only): safety only, never liveness.
=============================================================================

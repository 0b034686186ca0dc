--------------------------- MODULE MCPoolBlocking ---------------------------
(***************************************************************************)
(* Model-checking instances of WorkStealing with managed blocking on       *)
(* (MaxSpares > 0): MCPoolBlocking.cfg checks safety, MCPoolBlockingLive.cfg *)
(* and MCPoolBlockingReturns.cfg liveness, without and with blocking calls  *)
(* that return.  No symmetry: the liveness checks would be unsound, and    *)
(* the instances are small.                                                 *)
(***************************************************************************)
EXTENDS WorkStealing
=============================================================================

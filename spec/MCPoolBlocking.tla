--------------------------- MODULE MCPoolBlocking ---------------------------
(***************************************************************************)
(* The instances of WorkStealing with managed blocking on (MaxSpares > 0). *)
(* MCPoolBlocking.cfg checks safety; MCPoolBlockingLive.cfg liveness when  *)
(* a blocking call may never return (FairSpec), MCPoolBlockingReturns.cfg  *)
(* when every one returns (ReturningFairSpec); MCPoolBlockingBatch.cfg     *)
(* safety with batch steals (StealCap 2).  No symmetry: TLC's              *)
(* liveness check is unsound under it, and the instances are small.        *)
(***************************************************************************)
EXTENDS WorkStealing
=============================================================================

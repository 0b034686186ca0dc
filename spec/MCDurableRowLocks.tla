------------------------- MODULE MCDurableRowLocks -------------------------
(* The instances of DurableRowLocks that TLC checks: the dependencies as an operator, which *)
(* a config cannot write. *)
EXTENDS DurableRowLocks

CONSTANTS a, b, c

FanIn == [t \in Tasks |-> IF t = c THEN {a, b} ELSE {}]
\* c depends on a and b.

Independent == [t \in Tasks |-> {}]
\* No edges.
=============================================================================

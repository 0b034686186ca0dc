------------------------- MODULE MCDurableRowLocks -------------------------
(* The instances of DurableRowLocks that TLC checks: the dependencies as an operator, which *)
(* a config cannot write. *)
EXTENDS DurableRowLocks

CONSTANTS a, b, c

FanIn == [t \in Tasks |-> IF t = c THEN {a, b} ELSE {}]
\* c depends on a and b.

Independent == [t \in Tasks |-> {}]
\* No edges.

Relative(r) ==
    [r EXCEPT !.deadline = IF @ = 0 THEN 0 ELSE IF @ < now THEN -1 ELSE @ - now + 1,
              !.due = 0]
\* A row without its absolute times: a deadline as past (-1) or how far ahead (1 is now),
\* 0 for none; no due time.

TimeView ==
    <<started, [t \in Tasks |-> Relative(row[t])], slot, nextSeq, lock, share, slotLock,
      [x \in Agents |-> [t \in DOMAIN writes[x] |-> Relative(writes[x][t])]], slotWrites, pc,
      target, lease, todo, unsettled, held, claims, ends, endedAttempt>>
\* The state without its absolute time.  The clock is read only to write a deadline
\* LeaseTime ahead or a due time of now, and to compare a deadline with it (Expire, Tick),
\* and a deadline once past stays past; a due time is never after the clock, and two due
\* times are in the order of their seqs (a later submit draws a later seq), so they add
\* nothing to the view.  Every check is the same on two states a shift of time apart.
=============================================================================

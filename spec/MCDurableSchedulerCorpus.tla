--------------------- MODULE MCDurableSchedulerCorpus ---------------------
(***************************************************************************)
(* MCDurableScheduler with one more state constraint, for corpus           *)
(* instances whose graph of tasks is fixed: FixedGraph keeps only the      *)
(* behaviours that submit a given layered graph, layer by layer, all of it *)
(* before Start (LayeredGraph: edges free, each to an earlier layer).      *)
(* Nothing else changes: Next is the same, and the state                   *)
(* graph is MCDurableScheduler's restricted to those states.  The          *)
(* reference model explores it under the same constraint                  *)
(* (refsched/verify/durable/system.py), and the two graphs must be equal.  *)
(***************************************************************************)
EXTENDS MCDurableScheduler

CONSTANTS
    Sources, \* ids with no dependency
    Middle,  \* ids that depend on every id of Sources
    Sinks    \* ids that depend on every id of Middle

ASSUME Sources \cup Middle \cup Sinks = Tasks

FixedDeps(t) == IF t \in Middle THEN Sources ELSE IF t \in Sinks THEN Middle ELSE {}
\* The dependencies every version of t has.

Layer(t) == IF t \in Sources THEN 1 ELSE IF t \in Middle THEN 2 ELSE 3

FixedGraph ==
    /\ \A t \in Tasks : generation[t] > 0 => deps[t] = FixedDeps(t)
    /\ \A t, u \in Tasks : Layer(u) < Layer(t) /\ generation[t] > 0 => generation[u] > 0
    /\ started => \A t \in Tasks : generation[t] > 0
\* State constraint: the graph of tasks is the fixed one, an id is first submitted after
\* every id of the layers before its own, and all of them before Start.  What varies is
\* what happens to the graph: claims, batches, ends, cancels, close.

LayeredGraph ==
    /\ \A t \in Tasks : \A d \in deps[t] : Layer(d) < Layer(t)
    /\ \A t, u \in Tasks : Layer(u) < Layer(t) /\ generation[t] > 0 => generation[u] > 0
    /\ started => \A t \in Tasks : generation[t] > 0
\* State constraint: FixedGraph with the deps free, each edge pointing to an earlier layer
\* (required or optional, given at submission or added by AddDeps), so the graph of the
\* edges instance stays small and acyclic.
=============================================================================

------------------------- MODULE MCSchedulerCorpus -------------------------
(***************************************************************************)
(* A bound for the corpus instance MCSchedulerCorpusAddDeps.cfg: AddDeps  *)
(* with both kinds of edge on 3 ids, small enough to replay in every      *)
(* check (on 3 ids the whole graph of AddDeps alone has 722,027 edges:    *)
(* MCSchedulerAddDepsTraces.cfg, whose graph the model's must equal).     *)
(***************************************************************************)
EXTENDS MCScheduler

Edges == {e \in Tasks \X Tasks : e[2] \in deps[e[1]]}
\* Every dependency edge, as <<child, parent>>.

CorpusBound ==
    /\ ~closed
    /\ \A t \in Tasks : state[t] \notin {"running", "failed"}
    /\ Cardinality(Edges) <= 2
    /\ Cardinality({e \in Edges : e[2] \in optional[e[1]]}) <= 1
\* State constraint: no Close, no claim, at most two edges and one of them optional.  What it
\* keeps is what the 2-id corpus cannot show: a third id to add as a dep, and a parent blocked
\* by a cancelled grandparent, through either kind of edge.  Succeeded and failed parents, and
\* replaced ones, are the 2-id corpus's (MCSchedulerCorpusEdges.cfg).
=============================================================================

// A dependency scheduler in JavaScript, written from docs/semantics.md and docs/conformance.md
// alone, speaking the conformance protocol on stdin/stdout: the kind of program a user of
// another language checks with `refsched conform -- node dag_scheduler.mjs`.
//
// DAG_BUG=<name> switches on one deliberate bug (see BUGS below), so the tests can show that the
// oracle reports each as a divergence, and a wire-shape bug as a protocol violation.

import { createInterface } from "node:readline";

const BUGS = new Set([
  "duplicate_dep_accepted",      // submit accepts a dependency named twice
  "negative_limit_accepted",     // ready(-1) claims nothing instead of refusing
  "boolean_limit_accepted",      // ready(true) is taken as ready(1)
  "fractional_limit_accepted",   // ready(1.5) is taken as ready(1)
  "negative_concurrency_accepted", // new(max_concurrency=-1) succeeds
  "close_reports_newest_first",  // close() lists what it cancelled newest first
  "missing_pairs_dropped",       // an unknown-dependency error carries no missing pairs
  "negative_generation_invalid", // a negative generation answers InvalidArgumentError
  "third_cancel_ends",           // the third cancel of a running version cancels it outright
  "claims_newest_first",         // ready() claims the newest ready versions first
  "extra_answer_key",            // every answer carries a key the protocol does not have
  "optional_failure_blocks",     // a failed optional dependency blocks its dependent
  "add_deps_on_ready",           // add_deps is accepted on a ready version (it becomes pending)
  "add_deps_keeps_count",        // add_deps adds the edges but does not raise remaining_deps
  "provenance_path_from_parent", // a blocked version's provenance path starts at its blocking parent
]);
const BUG = process.env.DAG_BUG || "";
if (BUG && !BUGS.has(BUG)) {
  process.stderr.write(`unknown DAG_BUG ${BUG}; one of ${[...BUGS].join(", ")}\n`);
  process.exit(2);
}

const DEAD = new Set(["failed", "blocked", "cancelled"]);
const WAITING = new Set(["pending", "ready"]);
const TERMINAL = new Set(["succeeded", ...DEAD]);

class ContractError extends Error {
  constructor(type, message, extra = {}) {
    super(message);
    this.type = type;
    this.extra = extra;
  }
}

const isInt = (v) => typeof v === "number" && Number.isInteger(v);

class Scheduler {
  constructor(maxConcurrency) {
    const bad = !isInt(maxConcurrency) || (maxConcurrency < 0 && BUG !== "negative_concurrency_accepted");
    if (bad) {
      throw new ContractError("InvalidArgumentError",
        `TaskScheduler(${JSON.stringify(maxConcurrency)}): max_concurrency must be an int >= 0`);
    }
    this.max = maxConcurrency;
    this.started = false;
    this.closed = false;
    this.nextSeq = 1;
    this.tasks = new Map(); // id -> the current version's variables
    this.cancels = new Map(); // id -> cancel requests of the running version (third_cancel_ends)
    this.records = new Map(); // id -> the provenance of its blocked or cancelled current version
    this.notes = new Map(); // JSON [id, generation] of a version a call ended -> {actor, reason}
  }

  // The provenance of a version that ended itself (failed or cancelled): its own root.
  endRecord(t, end) {
    const v = this.tasks.get(t);
    const note = this.notes.get(JSON.stringify([t, v.generation])) ?? { actor: null, reason: null };
    return { root: t, generation: v.generation, end, path: [t], actor: note.actor, reason: note.reason };
  }

  // The version t was just ended by a call that said `actor` and `reason`.
  note(t, actor, reason) {
    this.notes.set(JSON.stringify([t, this.tasks.get(t).generation]), { actor, reason });
  }

  // The records of the versions Settle blocks (`blame`: each one's blamed dep): its blamed
  // dep's path extended by itself, when the chain of blame leads to a dead version; where it
  // loops (a cycle, before start), through the dep of smallest seq one edge nearer to a dead
  // version.
  blockedRecords(dead, blame) {
    const sound = new Set(dead);
    for (let grew = true; grew;) {
      grew = false;
      for (const [x, b] of blame) {
        if (!sound.has(x) && sound.has(b)) {
          sound.add(x);
          grew = true;
        }
      }
    }
    const level = new Map([...dead].map((d) => [d, 0]));
    const left = new Set(blame.keys());
    for (let k = 1; left.size; k++) {
      const near = [...left].filter((x) => this.blocking(this.tasks.get(x)).some((d) => level.has(d) && level.get(d) < k));
      for (const x of near) {
        level.set(x, k);
        left.delete(x);
      }
    }
    const seq = (d) => this.tasks.get(d).seq;
    const via = (x) => {
      if (sound.has(x)) return blame.get(x);
      const nearer = this.blocking(this.tasks.get(x)).filter((d) => level.get(d) === level.get(x) - 1);
      return nearer.sort((a, b) => seq(a) - seq(b))[0];
    };
    const made = new Map();
    const record = (x) => {
      if (!made.has(x)) {
        const d = via(x);
        let root;
        if (blame.has(d)) root = record(d);
        else if (this.tasks.get(d).state === "failed") root = this.endRecord(d, "failed");
        else root = this.records.get(d);
        const path = BUG === "provenance_path_from_parent" ? [d, x] : [...root.path, x];
        made.set(x, { ...root, path });
      }
      return made.get(x);
    };
    for (const x of blame.keys()) record(x);
    return made;
  }

  provenance(t) {
    if (!this.tasks.has(t)) throw new ContractError("UnknownTaskError", `provenance(${JSON.stringify(t)}): unknown task`);
    return this.records.get(t) ?? null;
  }

  dependents(t) {
    return [...this.tasks].filter(([, v]) => v.deps.includes(t)).map(([x]) => x);
  }

  // Whether the current version of d no longer holds back a child through an edge of that
  // kind: a required edge once it succeeded, an optional one once it ended in any state.
  settles(d, optional) {
    const v = this.tasks.get(d);
    return v !== undefined && (optional ? TERMINAL.has(v.state) : v.state === "succeeded");
  }

  unsettled(deps, optional) {
    return deps.filter((d) => !this.settles(d, optional.includes(d))).length;
  }

  // The deps whose edge blocks: the required ones.
  blocking(v) {
    return BUG === "optional_failure_blocks" ? v.deps : v.deps.filter((d) => !v.optional.includes(d));
  }

  // Settle: every pending or ready version that reaches a dead one through required edges of
  // pending or ready versions becomes blocked, by its oldest such dependency. Then the
  // versions that ended in this step (`ended`) and those it blocked settle their optional
  // edges: a waiting version has that many fewer deps to wait for, and is ready at none.
  settle(ended = []) {
    const dead = new Set([...this.tasks].filter(([, v]) => DEAD.has(v.state)).map(([x]) => x));
    const inB = new Set();
    for (let grew = true; grew;) {
      grew = false;
      for (const [x, v] of this.tasks) {
        if (inB.has(x) || !WAITING.has(v.state)) continue;
        if (this.blocking(v).some((d) => inB.has(d) || DEAD.has(this.tasks.get(d)?.state))) {
          inB.add(x);
          grew = true;
        }
      }
    }
    const causes = new Map();
    for (const x of inB) {
      const v = this.tasks.get(x);
      const candidates = this.blocking(v).filter((d) => inB.has(d) || DEAD.has(this.tasks.get(d)?.state));
      candidates.sort((a, b) => this.tasks.get(a).seq - this.tasks.get(b).seq);
      causes.set(x, candidates[0]);
    }
    for (const [x, record] of this.blockedRecords(dead, causes)) this.records.set(x, record);
    for (const [x, cause] of causes) {
      const v = this.tasks.get(x);
      v.state = "blocked";
      v.blockedBy = cause;
    }
    const gone = new Set([...ended, ...inB]);
    for (const v of this.tasks.values()) {
      const freed = v.optional.filter((d) => gone.has(d)).length;
      if (WAITING.has(v.state) && freed) this.waiting(v, v.remainingDeps - freed);
    }
  }

  waiting(v, remaining) {
    v.remainingDeps = remaining;
    v.state = remaining === 0 ? "ready" : "pending";
  }

  // The checks of new edges from t to deps after start: known ids, no cycle.
  checkEdges(call, t, deps) {
    if (!this.started) return;
    const missing = deps.filter((d) => !this.tasks.has(d)).map((d) => [t, d]);
    if (missing.length) {
      const extra = BUG === "missing_pairs_dropped" ? {} : { missing };
      throw new ContractError("UnknownDependencyError", `${call}: unknown dependencies`, extra);
    }
    for (const d of deps) {
      const path = this.pathToDependent(t, d);
      if (path) {
        const cycle = [...path, t];
        throw new ContractError("CycleError", `${call}: cycle`, { cycle, cycles: [cycle] });
      }
    }
  }

  // A path from `from` to `to` following dependents (each entry a dependency of the next).
  pathToDependent(from, to) {
    const previous = new Map([[from, null]]);
    const queue = [from];
    while (queue.length) {
      const x = queue.shift();
      if (x === to) {
        const path = [];
        for (let y = x; y !== null; y = previous.get(y)) path.unshift(y);
        return path;
      }
      for (const y of this.dependents(x)) {
        if (!previous.has(y)) {
          previous.set(y, x);
          queue.push(y);
        }
      }
    }
    return null;
  }

  findCycle() {
    const colour = new Map();
    const stack = [];
    const visit = (x) => {
      colour.set(x, "grey");
      stack.push(x);
      for (const d of this.tasks.get(x).deps) {
        if (colour.get(d) === "grey") {
          // The stack from d to x follows dependency edges and x depends on d: read backwards,
          // each entry is a dependency of the next.
          const walked = stack.slice(stack.indexOf(d)).reverse();
          return [d, ...walked.slice(0, -1), d];
        }
        if (!colour.has(d)) {
          const found = visit(d);
          if (found) return found;
        }
      }
      colour.set(x, "black");
      stack.pop();
      return null;
    };
    for (const x of this.tasks.keys()) {
      if (!colour.has(x)) {
        const found = visit(x);
        if (found) return found;
      }
    }
    return null;
  }

  submit(t, required, optional) {
    const call = `submit(${JSON.stringify(t)}, ${JSON.stringify(required)}, ${JSON.stringify(optional)})`;
    let deps = [...required, ...optional];
    if (new Set(deps).size !== deps.length && BUG !== "duplicate_dep_accepted") {
      throw new ContractError("InvalidArgumentError", `${call}: a dependency is named twice`);
    }
    deps = [...new Set(deps)];
    if (deps.includes(t)) throw new ContractError("InvalidArgumentError", `${call}: depends on itself`);
    if (this.closed) throw new ContractError("SchedulerClosedError", `${call}: closed`);
    const old = this.tasks.get(t);
    if (old && old.state === "running") throw new ContractError("TaskRunningError", `${call}: running`);
    this.checkEdges(call, t, deps);
    const remaining = this.unsettled(deps, optional);
    const version = {
      generation: old ? old.generation + 1 : 1,
      state: remaining === 0 ? "ready" : "pending",
      deps,
      optional: [...optional],
      remainingDeps: remaining,
      blockedBy: null,
      cancelRequested: false,
      claims: 0,
      seq: this.nextSeq++,
      inputs: null,
    };
    if (old) {
      // A replaced version that had settled an edge of a waiting dependent no longer does.
      for (const x of this.dependents(t)) {
        const v = this.tasks.get(x);
        const optionalEdge = v.optional.includes(t);
        const settled = optionalEdge ? TERMINAL.has(old.state) : old.state === "succeeded";
        if (WAITING.has(v.state) && settled) this.waiting(v, v.remainingDeps + 1);
      }
    }
    this.tasks.set(t, version);
    this.records.delete(t);
    this.cancels.delete(t);
    this.settle();
    return version.generation;
  }

  addDeps(t, required, optional) {
    const call = `add_deps(${JSON.stringify(t)}, ${JSON.stringify(required)}, ${JSON.stringify(optional)})`;
    const deps = [...required, ...optional];
    if (new Set(deps).size !== deps.length) {
      throw new ContractError("InvalidArgumentError", `${call}: a dependency is named twice`);
    }
    const v = this.tasks.get(t);
    if (v === undefined) throw new ContractError("UnknownTaskError", `${call}: unknown task`);
    if (deps.length === 0) throw new ContractError("InvalidArgumentError", `${call}: no dependency given`);
    if (deps.includes(t)) throw new ContractError("InvalidArgumentError", `${call}: depends on itself`);
    if (deps.some((d) => v.deps.includes(d))) {
      throw new ContractError("InvalidArgumentError", `${call}: already a dependency`);
    }
    if (this.closed) throw new ContractError("SchedulerClosedError", `${call}: closed`);
    const accepted = v.state === "pending" || (BUG === "add_deps_on_ready" && v.state === "ready");
    if (!accepted) {
      throw new ContractError("InvalidTransitionError", `${call}: the version is ${v.state}, not pending`);
    }
    this.checkEdges(call, t, deps);
    const added = BUG === "add_deps_keeps_count" ? 0 : this.unsettled(deps, optional);
    v.deps = [...v.deps, ...deps];
    v.optional = [...v.optional, ...optional];
    this.waiting(v, v.remainingDeps + added);
    this.settle();
    return v.state;
  }

  // How each optional dependency of t's current version ended: as at its claim once claimed.
  inputSummary(t) {
    const v = this.tasks.get(t);
    if (v === undefined) throw new ContractError("UnknownTaskError", `input_summary(${JSON.stringify(t)}): unknown task`);
    return v.inputs ?? this.ended(v);
  }

  ended(v) {
    const summary = {};
    for (const d of [...v.optional].sort()) {
      const p = this.tasks.get(d);
      if (p !== undefined && TERMINAL.has(p.state)) {
        summary[d] = { generation: p.generation, state: p.state, blocked_by: p.blockedBy };
      }
    }
    return summary;
  }

  start() {
    if (this.closed) throw new ContractError("SchedulerClosedError", "start(): closed");
    if (this.started) throw new ContractError("InvalidTransitionError", "start(): already started");
    const missing = [];
    for (const [t, v] of this.tasks) {
      for (const d of v.deps) if (!this.tasks.has(d)) missing.push([t, d]);
    }
    if (missing.length) {
      const extra = BUG === "missing_pairs_dropped" ? {} : { missing };
      throw new ContractError("UnknownDependencyError", "start(): unknown dependencies", extra);
    }
    const cycle = this.findCycle();
    if (cycle) throw new ContractError("CycleError", "start(): cycle", { cycle, cycles: [cycle] });
    this.started = true;
    return null;
  }

  ready(limit) {
    const badLimit = limit !== null && (
      (typeof limit === "boolean" && BUG !== "boolean_limit_accepted")
      || (typeof limit === "number" && !Number.isInteger(limit) && BUG !== "fractional_limit_accepted")
      || (isInt(limit) && limit < 0 && BUG !== "negative_limit_accepted")
      || (typeof limit !== "boolean" && typeof limit !== "number"));
    if (badLimit) {
      throw new ContractError("InvalidArgumentError", `ready(${JSON.stringify(limit)}): bad limit`);
    }
    if (!this.started) throw new ContractError("InvalidTransitionError", "ready(): not started");
    if (this.closed) return [];
    const all = [...this.tasks].filter(([, v]) => v.state === "ready");
    all.sort(([, a], [, b]) => (BUG === "claims_newest_first" ? b.seq - a.seq : a.seq - b.seq));
    const running = [...this.tasks.values()].filter((v) => v.state === "running").length;
    const wanted = limit === null ? Infinity : Math.max(0, Math.floor(Number(limit)));
    const k = Math.min(wanted, this.max - running, all.length);
    const claimed = all.slice(0, Math.max(0, k));
    claimed.sort(([, a], [, b]) => a.seq - b.seq);
    for (const [, v] of claimed) {
      v.state = "running";
      v.claims += 1;
      v.inputs = this.ended(v);
    }
    return claimed.map(([t, v]) => [t, v.generation]);
  }

  // The checks every callback makes first; the current version when they pass.
  callback(call, t, g) {
    const v = this.tasks.get(t);
    if (v === undefined) throw new ContractError("UnknownTaskError", `${call}: unknown task`);
    if (!isInt(g)) throw new ContractError("InvalidArgumentError", `${call}: bad generation`);
    if (g < 0 && BUG === "negative_generation_invalid") {
      throw new ContractError("InvalidArgumentError", `${call}: negative generation`);
    }
    if (g !== v.generation) {
      throw new ContractError("StaleGenerationError", `${call}: stale generation`,
        { generation: g, current: v.generation });
    }
    return v;
  }

  end(op, t, g, from, to, actor = null, reason = null) {
    const call = `${op}(${JSON.stringify(t)}, ${g})`;
    const v = this.callback(call, t, g);
    if (!DEAD.has(v.state) && v.state !== "succeeded" && v.state !== from) {
      throw new ContractError("InvalidTransitionError", `${call}: the version is ${v.state}`);
    }
    if (v.state !== from) return v.state;
    v.state = to;
    if (to !== "succeeded") this.note(t, actor, reason);
    if (to === "cancelled") this.records.set(t, this.endRecord(t, "cancelled"));
    if (to === "succeeded") {
      for (const x of this.dependents(t)) {
        const w = this.tasks.get(x);
        if (w.state === "pending") this.waiting(w, w.remainingDeps - 1);
      }
    } else {
      this.settle([t]);
    }
    return v.state;
  }

  cancel(t, g, actor = null, reason = null) {
    const call = `cancel(${JSON.stringify(t)}, ${g})`;
    const v = g === null ? this.tasks.get(t) : this.callback(call, t, g);
    if (v === undefined) throw new ContractError("UnknownTaskError", `${call}: unknown task`);
    if (WAITING.has(v.state)) {
      v.state = "cancelled";
      this.note(t, actor, reason);
      this.records.set(t, this.endRecord(t, "cancelled"));
      this.settle([t]);
    } else if (v.state === "running") {
      const requests = (this.cancels.get(t) || 0) + 1;
      this.cancels.set(t, requests);
      if (BUG === "third_cancel_ends" && requests >= 3) {
        v.state = "cancelled";
        this.note(t, actor, reason);
        this.records.set(t, this.endRecord(t, "cancelled"));
        this.settle([t]);
      } else {
        v.cancelRequested = true;
      }
    }
    return v.state;
  }

  retry(t) {
    const v = this.tasks.get(t);
    if (v === undefined) throw new ContractError("UnknownTaskError", `retry(${JSON.stringify(t)}): unknown task`);
    if (this.closed) throw new ContractError("SchedulerClosedError", `retry(${JSON.stringify(t)}): closed`);
    if (!DEAD.has(v.state)) {
      throw new ContractError("InvalidTransitionError", `retry(${JSON.stringify(t)}): the version is ${v.state}`);
    }
    const members = new Set([t]);
    for (let grew = true; grew;) {
      grew = false;
      for (const [x, w] of this.tasks) {
        if (!members.has(x) && w.state === "blocked" && members.has(w.blockedBy)) {
          members.add(x);
          grew = true;
        }
      }
    }
    const ordered = [...members].sort((a, b) => this.tasks.get(a).seq - this.tasks.get(b).seq);
    // The members were dead: a waiting version's optional edge to one was settled, no longer.
    for (const w of this.tasks.values()) {
      const bumps = w.optional.filter((d) => members.has(d)).length;
      if (WAITING.has(w.state) && bumps) this.waiting(w, w.remainingDeps + bumps);
    }
    for (const x of ordered) {
      const w = this.tasks.get(x);
      Object.assign(w, { generation: w.generation + 1, seq: this.nextSeq++, claims: 0,
        cancelRequested: false, blockedBy: null, state: "pending", inputs: null });
      this.records.delete(x);
      this.cancels.delete(x);
    }
    for (const x of ordered) {
      const w = this.tasks.get(x);
      this.waiting(w, this.unsettled(w.deps, w.optional));
    }
    this.settle();
    return v.generation;
  }

  close(cancelPending) {
    if (typeof cancelPending !== "boolean") {
      throw new ContractError("InvalidArgumentError", "close(): cancel_pending must be a bool");
    }
    if (!this.closed) {
      this.closed = true;
      if (cancelPending) {
        for (const [t, v] of this.tasks) {
          if (!WAITING.has(v.state)) continue;
          v.state = "cancelled";
          this.note(t, null, "close");
          this.records.set(t, this.endRecord(t, "cancelled"));
        }
      }
    }
    const report = { succeeded: [], failed: [], blocked: [], cancelled: [], running: [],
      pending: [], ready: [] };
    const bySeq = [...this.tasks].sort(([, a], [, b]) => a.seq - b.seq);
    for (const [t, v] of bySeq) report[v.state].push(t);
    if (BUG === "close_reports_newest_first") report.cancelled.reverse();
    return report;
  }

  snapshot() {
    const tasks = {};
    for (const [t, v] of this.tasks) {
      tasks[t] = { generation: v.generation, state: v.state, deps: [...v.deps].sort(),
        remaining_deps: v.remainingDeps, blocked_by: v.blockedBy,
        cancel_requested: v.cancelRequested, claims: v.claims, seq: v.seq };
      // the optional deps travel only when there are some
      if (v.optional.length) tasks[t].optional = [...v.optional].sort();
    }
    return { started: this.started, closed: this.closed, next_seq: this.nextSeq, tasks };
  }

  state(t) {
    const v = this.tasks.get(t);
    if (v === undefined) throw new ContractError("UnknownTaskError", `state(${JSON.stringify(t)}): unknown task`);
    return v.state;
  }
}

let current = null;

function answer(request) {
  const { op } = request;
  if (op === "hello") {
    // edge kinds, add_deps and provenance are declared: a hello that leaves them out is
    // asked none of them
    const profile = { optional_edges: true, add_deps: true, provenance: true };
    return { name: "dag_scheduler.mjs", protocol: 1, system: "scheduler", profile };
  }
  if (op === "new") {
    current = new Scheduler(request.max_concurrency);
    return null;
  }
  if (op === "bye") return null;
  if (current === null) throw new ContractError("BadRequest", `${op} before new`);
  const s = current;
  switch (op) {
    case "submit": return s.submit(request.task, request.deps ?? [], request.optional ?? []);
    case "add_deps": return s.addDeps(request.task, request.deps ?? [], request.optional ?? []);
    case "input_summary": return s.inputSummary(request.task);
    case "start": return s.start();
    case "ready": return s.ready(request.limit ?? null);
    case "complete": return s.end("complete", request.task, request.generation, "running", "succeeded");
    case "fail":
      return s.end("fail", request.task, request.generation, "running", "failed",
        request.actor ?? null, request.reason ?? null);
    case "acknowledge_cancel":
      return s.end("acknowledge_cancel", request.task, request.generation, "running", "cancelled",
        request.actor ?? null, request.reason ?? null);
    case "cancel":
      return s.cancel(request.task, request.generation ?? null, request.actor ?? null, request.reason ?? null);
    case "provenance": return s.provenance(request.task);
    case "retry": return s.retry(request.task);
    case "close": return s.close(request.cancel_pending ?? true);
    case "snapshot": return s.snapshot();
    case "state": return s.state(request.task);
    default: throw new ContractError("Unsupported", `${op}: no such operation`);
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    process.stdout.write(JSON.stringify({ id: null, error: { type: "BadRequest", message: "not JSON" } }) + "\n");
    continue;
  }
  let out;
  try {
    out = { id: request.id, ok: answer(request) };
  } catch (error) {
    if (!(error instanceof ContractError)) throw error;
    out = { id: request.id, error: { type: error.type, message: error.message, ...error.extra } };
  }
  if (BUG === "extra_answer_key") out.note = "extra";
  process.stdout.write(JSON.stringify(out) + "\n");
  if (request.op === "bye") process.exit(0);
}

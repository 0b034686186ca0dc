// Check a scheduler against refsched's test vectors: node run-vectors.mjs VECTORS COMMAND [ARGS...]
// Exit status: 0 every answer is the expected one, 1 one is not, 2 the session could not run.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { gunzipSync } from 'node:zlib';

const [file, ...command] = process.argv.slice(2);
if (!file || command.length === 0) { console.error('usage: run-vectors.mjs VECTORS COMMAND [ARGS...]'); process.exit(2); }
const raw = readFileSync(file);
const [header, ...lines] = (file.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const child = spawn(command[0], command.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
child.on('error', (e) => { console.error(`cannot start ${command[0]}: ${e.message}`); process.exit(2); });
const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
async function ask(line) {
  child.stdin.write(line + '\n');
  const { value, done } = await answers.next();
  if (done) { console.error(`no answer to ${line}: the implementation exited`); process.exit(2); }
  return JSON.parse(value);
}
// A value as canonical text: keys sorted, numbers by value, the lists at `unordered` sorted.
const matches = (pattern, at) => pattern.length === at.length && pattern.every((p, i) => p === '*' || p === at[i]);
function canon(value, at, unordered) {
  if (Array.isArray(value)) {
    const items = value.map((item) => canon(item, [...at, '*'], unordered));
    if (unordered.some((p) => matches(p, at))) items.sort();
    return `[${items.join(',')}]`;
  }
  if (value !== null && typeof value === 'object') return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canon(value[k], [...at, k], unordered)}`).join(',')}}`;
  return JSON.stringify(value);
}
function agrees(expect, got, unordered) {
  if (got.id !== expect.id) return false;
  if ('error' in expect) return got.error != null && Object.keys(expect.error).every((k) => canon(expect.error[k], [], []) === canon(got.error[k], [], []));
  const paths = unordered.map((p) => p.split('/').slice(1));
  return 'ok' in got && canon(expect.ok, [], paths) === canon(got.ok, [], paths);
}
const hello = await ask(header.hello);
if ((hello.ok?.system ?? 'scheduler') !== header.system) { console.error(`the hello answered ${JSON.stringify(hello)}, not a ${header.system}`); process.exit(2); }
let trace = '', checked = 0;
for (const line of lines) {
  if ('trace' in line) { trace = line.trace; continue; }
  const got = await ask(line.send);
  if (!agrees(line.expect, got, line.unordered ?? [])) {
    console.error(`trace ${trace}: sent ${line.send}\n  expected ${JSON.stringify(line.expect)}\n  got      ${JSON.stringify(got)}`);
    child.kill(); process.exit(1);
  }
  checked += 1;
}
await ask(header.bye);
child.stdin.end();
console.log(`${checked} of ${header.requests} answers as expected, ${header.traces} traces`);

// Check a scheduler against refsched's test vectors: node run-vectors.mjs VECTORS COMMAND [ARGS...]
// Exit status: 0 every answer is the expected one, 1 one is not, 2 the session could not run.
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';

const [file, ...command] = process.argv.slice(2);
if (!file || command.length === 0) {
  console.error('usage: node run-vectors.mjs VECTORS COMMAND [ARGS...]');
  process.exit(2);
}
const input = createReadStream(file).on('error', (e) => { console.error(e.message); process.exit(2); });
const vectors = createInterface({ input: file.endsWith('.gz') ? input.pipe(createGunzip()) : input });
const child = spawn(command[0], command.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] });
child.on('error', (e) => { console.error(`cannot start ${command[0]}: ${e.message}`); process.exit(2); });
const answers = createInterface({ input: child.stdout })[Symbol.asyncIterator]();

async function ask(line) {
  child.stdin.write(line + '\n');
  const { value, done } = await answers.next();
  if (done) { console.error(`no answer to ${line}: the implementation exited`); process.exit(2); }
  try { return JSON.parse(value); } catch { return { notJson: value }; }  // agrees with nothing
}

// A value as canonical text: keys sorted, numbers by value, the lists at `unordered` paths
// sorted, the fields at `ignore` paths left out. In a path, '*' stands for any key or index.
const parse = (paths) => (paths ?? []).map((path) => path.split('/').slice(1));
const at = (paths, where) => paths.some((p) => p.length === where.length
  && p.every((part, i) => part === '*' || part === where[i]));
function canon(value, where, rules) {
  if (Array.isArray(value)) {
    const items = value.map((item) => canon(item, [...where, '*'], rules));
    if (at(rules.unordered, where)) items.sort();
    return `[${items.join(',')}]`;
  }
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const keys = Object.keys(value).filter((k) => !at(rules.ignore, [...where, k])).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canon(value[k], [...where, k], rules)}`)}}`;
}

function agrees(vector, got) {
  const expect = vector.expect;
  if (got.id !== expect.id) return false;
  const none = { unordered: [], ignore: [] };
  if ('error' in expect) {  // an error: its type and the fields the vector names
    return got.error != null && Object.keys(expect.error).every(
      (k) => canon(expect.error[k], [], none) === canon(got.error[k], [], none));
  }
  const rules = { unordered: parse(vector.unordered), ignore: parse(vector.ignore) };
  return 'ok' in got && canon(expect.ok, [], rules) === canon(got.ok, [], rules);
}

let header = null;
let trace = '';
let checked = 0;
for await (const line of vectors) {  // one line at a time: a whole corpus is hundreds of MB
  if (!line) continue;
  const vector = JSON.parse(line);
  if (header === null) {  // the first line: the system, and the hello and bye to send
    header = vector;
    const hello = await ask(header.hello);
    if ((hello.ok?.system ?? 'scheduler') !== header.system) {
      console.error(`the hello answered ${JSON.stringify(hello)}, not a ${header.system}`);
      process.exit(2);
    }
    continue;
  }
  if ('trace' in vector) { trace = vector.trace; continue; }  // a new instance starts
  const got = await ask(vector.send);
  if (!agrees(vector, got)) {
    console.error(`trace ${trace}: sent ${vector.send}`);
    console.error(`  expected ${JSON.stringify(vector.expect)}\n  got      ${JSON.stringify(got)}`);
    child.kill();
    process.exit(1);
  }
  checked += 1;
}
if (header === null) { console.error(`${file}: no vectors`); process.exit(2); }
await ask(header.bye);
child.stdin.end();
console.log(`${checked} of ${header.requests} answers as expected, ${header.traces} traces`);

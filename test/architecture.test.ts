// The walls between src/'s rooms, read from the import graph of the sources themselves: a change that
// breaks one fails here with the file and the import that broke it.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'src');

interface Edge {
  /** the imported module: a path relative to src/ for our files ('routing/pool.ts'), else the specifier */
  to: string;
  typeOnly: boolean;
  line: number;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Comments blanked out (keeping line breaks), so an import named in a comment is not an import. */
function withoutComments(code: string): string {
  return code
    .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' '))
    .replace(/(^|[^:'"`])\/\/[^\n]*/g, (_m, pre: string) => pre);
}

const IMPORT = /\b(import|export)\s+(type\s+)?[^'";]*?\bfrom\s*'([^']+)'|\bimport\s*'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g;

function edgesOf(file: string): Edge[] {
  const code = withoutComments(readFileSync(file, 'utf8'));
  const edges: Edge[] = [];
  for (const m of code.matchAll(IMPORT)) {
    const spec = m[3] ?? m[4] ?? m[5];
    const line = code.slice(0, m.index).split('\n').length;
    const to = spec.startsWith('.') ? relative(SRC, resolve(dirname(file), spec)).replace(/\.js$/, '.ts') : spec;
    edges.push({ to, typeOnly: m[2] !== undefined, line });
  }
  return edges;
}

const graph = new Map<string, Edge[]>();
for (const f of sourceFiles(SRC)) graph.set(relative(SRC, f), edgesOf(f));

const room = (path: string): string => (path.includes('/') ? path.slice(0, path.indexOf('/')) : path);
const isOurs = (to: string): boolean => graph.has(to);

/** Every file reachable from `start` through run-time (not type-only) imports. */
function reachable(start: string): Set<string> {
  const seen = new Set<string>();
  const stack = [start];
  while (stack.length) {
    const f = stack.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const e of graph.get(f) ?? []) if (!e.typeOnly && isOurs(e.to)) stack.push(e.to);
  }
  return seen;
}

t.test('the import graph is read (the walls below are not checked against nothing)', async (t) => {
  t.ok(graph.size > 50, `${graph.size} source files`);
  const serverEdges = graph.get('gateway/server.ts')?.map((e) => e.to) ?? [];
  t.ok(serverEdges.includes('routing/index.ts'), 'gateway/server.ts → routing/index.ts is seen');
  t.ok([...graph.values()].flat().some((e) => e.typeOnly), 'type-only imports are told apart');
  t.ok(reachable('cli.ts').has('sim/loop.ts'), 'the CLI reaches the simulator through its dynamic imports');
  for (const [file, edges] of graph) {
    for (const e of edges) {
      if (e.to.startsWith('.') || (e.to.endsWith('.ts') && !isOurs(e.to))) t.fail(`${file}:${e.line} imports ${e.to}, which is not a source file`);
    }
  }
});

// Pure helpers the cores may use besides each other: no I/O, no clock.
const PURE_COMMON = new Set(['common/random.ts', 'common/units.ts']);
// node:util: parseArgs (engine/flags.ts reads the engine's flags from an argument list it is given).
const PURE_BUILTINS = new Set(['node:util']);

t.test('routing/ and engine/ import only each other, the wire format and pure helpers', async (t) => {
  for (const [file, edges] of graph) {
    const r = room(file);
    if (r !== 'routing' && r !== 'engine') continue;
    for (const e of edges) {
      const ok = isOurs(e.to)
        ? ['routing', 'engine', 'openai'].includes(room(e.to)) || PURE_COMMON.has(e.to)
        : PURE_BUILTINS.has(e.to);
      if (!ok) t.fail(`${file}:${e.line} imports ${e.to}`);
    }
  }
  t.pass('checked');
});

t.test('the wire format (openai/) is pure too', async (t) => {
  for (const [file, edges] of graph) {
    if (room(file) !== 'openai') continue;
    for (const e of edges) {
      // node:http only for its table of reason phrases (STATUS_CODES)
      const ok = isOurs(e.to) ? room(e.to) === 'openai' : e.to === 'node:http';
      if (!ok) t.fail(`${file}:${e.line} imports ${e.to}`);
    }
  }
  t.pass('checked');
});

t.test('the cores never read the clock, set a timer or draw their own random numbers', async (t) => {
  const banned = /\b(Date\.now|performance\.now|setTimeout|setInterval|setImmediate|process\.hrtime)\b|Math\.random(?!\s*;)/;
  for (const file of graph.keys()) {
    const r = room(file);
    if (r !== 'routing' && r !== 'engine' && r !== 'openai') continue;
    const lines = withoutComments(readFileSync(join(SRC, file), 'utf8')).split('\n');
    lines.forEach((line, i) => {
      // the one allowed form: Math.random as the default when the caller passes no random source
      if (banned.test(line.replace(/\?\?\s*Math\.random\b/, ''))) t.fail(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  t.pass('checked');
});

t.test('the live gateway never loads the simulator or the mock', async (t) => {
  for (const file of graph.keys()) {
    if (room(file) !== 'gateway') continue;
    for (const f of reachable(file)) {
      if (room(f) === 'sim' || room(f) === 'mock') t.fail(`${file} reaches ${f}`);
    }
  }
  t.pass('checked');
});

t.test('the simulator and the mock never use the gateway', async (t) => {
  for (const [file, edges] of graph) {
    const r = room(file);
    if (r !== 'sim' && r !== 'mock') continue;
    for (const e of edges) if (isOurs(e.to) && room(e.to) === 'gateway') t.fail(`${file}:${e.line} imports ${e.to}`);
  }
  t.pass('checked');
});

// Who may know uWebSockets.js: the one loader, the listen helper, the gateway's front adapter and the
// mock's HTTP server. Everything else talks to them.
const UWS_ALLOWED = new Set(['common/uws.ts', 'common/listen.ts', 'gateway/uws-front.ts', 'mock/server.ts']);

t.test('only the front adapter and the mock server know uWebSockets.js', async (t) => {
  for (const [file, edges] of graph) {
    for (const e of edges) if (e.to === 'uWebSockets.js' && !UWS_ALLOWED.has(file)) t.fail(`${file}:${e.line} imports uWebSockets.js`);
  }
  for (const f of UWS_ALLOWED) t.ok(graph.has(f), `${f} exists`);
});

t.test('no source file imports undici outside the gateway and the scraper (the cores stay socket-free)', async (t) => {
  for (const [file, edges] of graph) {
    const r = room(file);
    for (const e of edges) {
      if (e.to === 'undici' && r !== 'gateway' && r !== 'signals') t.fail(`${file}:${e.line} imports undici`);
    }
  }
  t.pass('checked');
});

t.test('auth/ knows no sockets and no gateway: it decides, the gateway answers', async (t) => {
  for (const [file, edges] of graph) {
    if (room(file) !== 'auth') continue;
    for (const e of edges) {
      if (e.to === 'uWebSockets.js' || e.to === 'undici' || (isOurs(e.to) && ['gateway', 'mock', 'sim'].includes(room(e.to)))) {
        t.fail(`${file}:${e.line} imports ${e.to}`);
      }
    }
  }
  t.ok([...graph.keys()].some((f) => room(f) === 'auth'), 'the auth room exists');
});

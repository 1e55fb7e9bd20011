// The keys this API work added, as check-config reads them: a bad cors section is named with its path and
// line; a good one (and prefix.embeddings) passes.
import t from 'tap';
import { tempDir } from '../helpers/process.js';
import { checkConfigText } from '../helpers/check-config.js';

const dir = tempDir();
const BASE = ['auth: {mode: none, allow_unauthenticated: true}', 'models: [{name: a, pool: p}]', 'pools: {p: {endpoints: ["127.0.0.1:1"], prefix: {embeddings: true}}}'];

const check = (name: string, lines: string[]) => checkConfigText(dir, name, [...BASE, ...lines].join('\n') + '\n', 20_000);

t.test('a good cors section, a list or "*"', async (t) => {
  const list = await check('list.yaml', ['cors:', '  origins: [https://app.example.com, "http://localhost:3000"]', '  allow_headers: [authorization, content-type]', '  max_age: 1h']);
  t.equal(list.code, 0, list.err);
  t.equal(list.out, 'ok\n');
  const star = await check('star.yaml', ['cors: {origins: "*"}']);
  t.equal(star.code, 0, star.err);
});

t.test('bad cors values: each named with its path and line', async (t) => {
  const r = await check('bad.yaml', ['cors:', '  origins: [https://app.example.com/, "*.example.com"]', '  allow_headers: ["bad header"]', '  max_age: 600', '  credentials: true']);
  t.equal(r.code, 1);
  t.match(r.err, /bad\.yaml:5: cors\.origins\.0: an origin is scheme:\/\/host\[:port\]/, 'a trailing slash');
  t.match(r.err, /cors\.origins\.1: an origin is/, 'a pattern is not an origin');
  t.match(r.err, /bad\.yaml:6: cors\.allow_headers\.0: not a header name/);
  t.match(r.err, /bad\.yaml:7: cors\.max_age: a duration needs a unit/);
  t.match(r.err, /cors\.credentials/, 'an unknown key');
  const empty = await check('empty.yaml', ['cors: {origins: []}']);
  t.equal(empty.code, 1, 'an empty list allows nobody: refused (leave cors out instead)');
  const missing = await check('missing.yaml', ['cors: {}']);
  t.equal(missing.code, 1, 'origins is required');
});

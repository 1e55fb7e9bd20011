// The config file's JSON Schema as editors and CI linters use it: `infergate schema` prints exactly the
// committed config/gateway.schema.json, which Ajv compiles in strict mode; every key carries a description,
// durations and sizes carry patterns; every shipped example config has the editor modeline and validates;
// and on known-bad configs, and on generated durations and sizes, Ajv (what an editor flags) and zod (what the
// gateway enforces) agree.
import t from 'tap';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import fc from 'fast-check';
import { ROOT, runCli, tempDir } from '../helpers/process.js';
import { parseConfigText } from '../../src/config/load.js';
import { DURATION_PATTERN, SIZE_PATTERN, configSchema } from '../../src/config/schema.js';
import { parseDuration, parseSize } from '../../src/common/units.js';

type Obj = Record<string, unknown>;

const SCHEMA_FILE = join(ROOT, 'config', 'gateway.schema.json');
const schemaText = readFileSync(SCHEMA_FILE, 'utf8');
const schema = JSON.parse(schemaText) as Obj;

/** Ajv as strict as it goes; anything it would only log is collected, and fails the test too. */
function strictAjv(): { ajv: Ajv2020; logged: string[] } {
  const logged: string[] = [];
  const note = (...args: unknown[]) => logged.push(args.map(String).join(' '));
  const ajv = new Ajv2020({ strict: true, allErrors: true, logger: { log: note, warn: note, error: note } });
  ajvFormats.default(ajv); // a CommonJS module: its plugin is both the module and its .default
  return { ajv, logged };
}

const { ajv, logged } = strictAjv();
let compileError: unknown;
const validate = (() => {
  try {
    return ajv.compile(schema);
  } catch (err) {
    compileError = err; // reported by the strict-mode test; the others then fail on it
    return null;
  }
})();
function ajvErrors(data: unknown): string[] {
  if (!validate) throw new Error(`the schema does not compile: ${String(compileError)}`);
  return validate(data) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
}

t.test('`infergate schema` prints exactly the committed config/gateway.schema.json', async (t) => {
  const p = runCli(['schema']);
  t.equal(await p.exited(), 0, p.stderr());
  t.equal(p.stdout(), schemaText, 'stale: regenerate it with `npm run build && node dist/cli.js schema > config/gateway.schema.json`');
});

t.test('the schema compiles under Ajv strict mode (draft 2020-12) with nothing logged', async (t) => {
  t.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
  t.equal(compileError, undefined, `Ajv strict refuses it: ${String(compileError)}`);
  t.strictSame(logged, [], 'no strict-mode warning');
});

/** Every schema reachable from `node`, with a readable path, and whether it is a key (needs a description). */
function* nodes(node: unknown, path: string): Generator<{ path: string; node: Obj }> {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) return;
  const n = node as Obj;
  yield { path, node: n };
  for (const k of ['properties', 'patternProperties', '$defs']) {
    for (const [name, sub] of Object.entries((n[k] as Obj | undefined) ?? {})) yield* nodes(sub, `${path}.${name}`);
  }
  if (typeof n.additionalProperties === 'object') yield* nodes(n.additionalProperties, `${path}.*`);
  if (typeof n.items === 'object') yield* nodes(n.items, `${path}[]`);
  for (const k of ['anyOf', 'oneOf', 'allOf', 'prefixItems']) {
    for (const [i, sub] of ((n[k] as unknown[] | undefined) ?? []).entries()) yield* nodes(sub, `${path}<${k} ${i}>`);
  }
}

const all = [...nodes(schema, '')].filter((x) => x.path !== '');

t.test('every key, record value, list item and union member has a description', async (t) => {
  t.ok(all.length > 100, `the walk reached the whole schema (${all.length} nodes)`);
  const missing = all.filter(({ node }) => typeof node.description !== 'string' || node.description.trim().length < 10).map((x) => x.path);
  t.strictSame(missing, [], 'add a .describe("…") to these in src/config/schema.ts');
  for (const { path, node } of all) {
    if (node.default !== undefined && typeof node.default !== 'object') {
      if (!String(node.description).endsWith(`Default: ${JSON.stringify(node.default)}.`)) t.fail(`${path}: the description names the default`);
    }
  }
  t.ok(typeof schema.title === 'string' && typeof schema.description === 'string', 'the file itself has a title and a description');
});

t.test('durations and sizes carry their patterns', async (t) => {
  let durations = 0;
  let sizes = 0;
  for (const { path, node } of all) {
    const d = node.default;
    if (typeof d !== 'string' || path.endsWith('>')) continue;
    if (parseDuration(d) !== null && /[a-z]$/.test(d)) {
      durations++;
      t.equal(node.pattern, DURATION_PATTERN, `${path} (a duration) has the duration pattern`);
      t.equal(node.type, 'string', `${path}: a string, never a bare number`);
    } else if (parseSize(d) !== null && /b$/i.test(d)) {
      sizes++;
      const forms = (node.anyOf as Obj[] | undefined) ?? [];
      t.strictSame(
        forms.map((f) => [f.type, f.pattern]),
        [['string', SIZE_PATTERN], ['integer', undefined]],
        `${path} (a size): a string with the size pattern, or a whole number of bytes`,
      );
    }
  }
  t.ok(durations >= 10 && sizes >= 3, `found the durations (${durations}) and sizes (${sizes})`);
  // the pattern is what the gateway's own parser reads, no more, no less
  const size = new RegExp(SIZE_PATTERN, 'u');
  for (const s of ['4mb', '512kb', '16KB', '1.5 MiB', '10b', '1048576', '2gib']) t.ok(size.test(s) && parseSize(s) !== null, `${s} is a size`);
  for (const s of ['lots', '4 megabytes', '-1mb', '4tb', 'mb', '1e6', ' 4mb']) t.notOk(size.test(s), `${s} is not a size`);
});

/** The example configs the repository ships or documents, as text. */
function examples(): { name: string; text: string }[] {
  const out = readdirSync(join(ROOT, 'config'))
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => ({ name: `config/${f}`, text: readFileSync(join(ROOT, 'config', f), 'utf8') }));
  out.push({ name: 'docker/gateway.yaml', text: readFileSync(join(ROOT, 'docker', 'gateway.yaml'), 'utf8') });
  const k8s = parseAllDocuments(readFileSync(join(ROOT, 'docker', 'k8s', 'infergate.yaml'), 'utf8')).map((d) => d.toJS() as Obj);
  const configMap = k8s.find((d) => d.kind === 'ConfigMap') as { data?: Record<string, string> } | undefined;
  out.push({ name: 'docker/k8s/infergate.yaml (ConfigMap gateway.yaml)', text: configMap?.data?.['gateway.yaml'] ?? '' });
  return out;
}

// The user contract's example lives beside the checkout (../shared/spec); it is read when it is there.
const SPEC_EXAMPLE = resolve(ROOT, '..', 'shared', 'spec', 'gateway.example.yaml');

t.test('every example config validates, with Ajv and with check-config alike', async (t) => {
  const list = examples();
  t.ok(list.length >= 4, 'config/*.yaml (2 or more), docker/gateway.yaml and the k8s ConfigMap');
  if (existsSync(SPEC_EXAMPLE)) list.push({ name: '../shared/spec/gateway.example.yaml', text: readFileSync(SPEC_EXAMPLE, 'utf8') });
  else t.comment(`${SPEC_EXAMPLE} is not beside this checkout: not checked`);
  for (const { name, text } of list) {
    t.ok(text.length > 0, `${name}: found`);
    t.strictSame(ajvErrors(parse(text)), [], `${name}: Ajv`);
    const zod = parseConfigText(text);
    t.ok(zod.ok, `${name}: zod ${zod.ok ? '' : JSON.stringify(zod.problems)}`);
  }
});

t.test('config/*.yaml and docker/gateway.yaml start with the yaml-language-server modeline', async (t) => {
  const files = [
    ...readdirSync(join(ROOT, 'config'))
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => join(ROOT, 'config', f)),
    join(ROOT, 'docker', 'gateway.yaml'),
  ];
  for (const file of files) {
    const first = readFileSync(file, 'utf8').split('\n')[0];
    const m = /^# yaml-language-server: \$schema=(\S+)$/.exec(first);
    t.ok(m, `${file}: first line is the modeline`);
    if (m) t.equal(resolve(dirname(file), m[1]), SCHEMA_FILE, `${file}: it names config/gateway.schema.json, relative to the file`);
  }
});

// A small valid config; each case changes one thing.
const BASE = { auth: { mode: 'none', allow_unauthenticated: true }, models: [{ name: 'm', pool: 'p' }], pools: { p: { endpoints: ['127.0.0.1:8001'] } } };
type Change = (c: Obj & typeof BASE) => void;
const pool = (c: typeof BASE) => c.pools.p as Obj;

const GOOD: Record<string, Change> = {
  'the base': () => {},
  'a size in bytes': (c) => void ((c as Obj).limits = { max_body_bytes: 1048576 }),
  'sizes with units in any case': (c) => void ((c as Obj).limits = { max_body_bytes: '1.5MiB', max_header_bytes: '16KB', max_buffered_body_bytes: '1gb' }),
  'durations with units': (c) => void ((c as Obj).limits = { request_timeout: '1.5m', first_byte_timeout: '250ms', drain_timeout: '2s' }),
  'retry_after auto': (c) => void (pool(c).saturation = { retry_after: 'auto' }),
  'retry_after a duration': (c) => void (pool(c).saturation = { retry_after: '2s' }),
  'trusted proxies of both families': (c) => void ((c as Obj).trusted_proxies = ['10.0.0.0/8', '192.168.1.7', 'fd00::/8', '::ffff:10.1.2.3', 'fe80::1%eth0']),
  'a tenant override': (c) => void ((c as Obj).tenants = { overrides: { team: { requests_per_minute: 5, priority: 'sheddable' } } }),
};

const BAD: Record<string, Change> = {
  'a bare duration (request_timeout: 600)': (c) => void ((c as Obj).limits = { request_timeout: 600 }),
  'a quoted bare duration': (c) => void ((c as Obj).limits = { first_byte_timeout: '10' }),
  'a duration with an unknown unit': (c) => void ((c as Obj).limits = { drain_timeout: '2 weeks' }),
  'an unknown top-level key': (c) => void ((c as Obj).lisen = { port: 8080 }),
  'an unknown pool key': (c) => void (pool(c).polcy = 'scored'),
  'a size that is a word': (c) => void ((c as Obj).limits = { max_body_bytes: 'lots' }),
  'a size with an unknown unit': (c) => void ((c as Obj).limits = { max_body_bytes: '4tb' }),
  'a negative size': (c) => void ((c as Obj).limits = { max_header_bytes: -1 }),
  'a fractional number of bytes': (c) => void ((c as Obj).limits = { max_body_bytes: 1.5 }),
  'retry_after as a bare number': (c) => void (pool(c).saturation = { retry_after: 5 }),
  'retry_after as a word': (c) => void (pool(c).saturation = { retry_after: 'soon' }),
  'a metrics path without its slash': (c) => void (pool(c).metrics = { path: 'metrics' }),
  'an upstream key written in the file': (c) => void (pool(c).api_key = 'sk-123'),
  'a port out of range': (c) => void ((c as Obj).listen = { port: 70000 }),
  'an unknown log level': (c) => void ((c as Obj).logging = { level: 'verbose' }),
  'an endpoint without a port': (c) => void (pool(c).endpoints = ['localhost']),
  'no models': (c) => void (c.models = []),
  'no auth section': (c) => void delete (c as Obj).auth,
  'a trusted proxy that is no address': (c) => void ((c as Obj).trusted_proxies = ['10.0.0.0/8', 'lb.internal']),
  'a Redis URL that is not redis://': (c) => void ((c as Obj).quota = { redis: { url: 'http://x:6379' } }),
  'a JWKS URL that is not a URL': (c) => {
    (c as Obj).auth = { mode: 'jwt', jwt: { jwks_url: 'not a url', issuer: 'i', audience: 'a', algorithms: ['ES256'] } };
  },
};

function variant(change: Change): Obj {
  const c = structuredClone(BASE) as Obj & typeof BASE;
  change(c);
  return c;
}

t.test('Ajv and zod agree: these configs pass both', async (t) => {
  for (const [name, change] of Object.entries(GOOD)) {
    const c = variant(change);
    t.strictSame(ajvErrors(c), [], `${name}: Ajv accepts`);
    const zod = parseConfigText(stringify(c));
    t.ok(zod.ok, `${name}: zod accepts ${zod.ok ? '' : JSON.stringify(zod.problems)}`);
  }
});

t.test('Ajv and zod agree: these configs fail both', async (t) => {
  // Cross-key rules (a model's pool must exist, exactly one JWT key source, …) are check-config's alone:
  // JSON Schema cannot say them, so they are not among these cases.
  for (const [name, change] of Object.entries(BAD)) {
    const c = variant(change);
    t.not(ajvErrors(c).length, 0, `${name}: Ajv refuses`);
    t.notOk(parseConfigText(stringify(c)).ok, `${name}: zod refuses`);
  }
});

// Generated values for the keys whose forms are patterns: whatever is written, the editor's verdict (Ajv)
// is the gateway's (zod). Seeded like test/fuzz (FUZZ_SEED to vary it).
const SEED = Number(process.env.FUZZ_SEED ?? 20261130);
const unit = fc.constantFrom('', 'b', 'B', 'kb', 'KB', 'mb', 'Mb', 'gb', 'kib', 'MiB', 'gIb', 'tb', 'ms', 's', 'm', 'h', 'H', 'sec', 'auto');
const numberText = fc.oneof(fc.nat(100_000).map(String), fc.double({ min: 0, max: 1e4, noNaN: true }).map(String), fc.constantFrom('1.', '.5', '1e3', '-1', '0x10', '01', '1,5'));
const space = fc.oneof({ arbitrary: fc.constant(''), weight: 6 }, fc.constantFrom(' ', '  ', '\t', '\n'));
const written = fc.oneof(
  { arbitrary: fc.tuple(space, numberText, space, unit, space).map((p) => p.join('')), weight: 4 },
  fc.string({ maxLength: 8 }),
  fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -0, 1.5, 2 ** 53, 2 ** 53 - 1, 1e21)),
  fc.constantFrom(null, true, [], {}, 'auto'),
);

t.test('Ajv and zod agree on generated durations, sizes and retry_after values', async (t) => {
  const keys: Array<[string, (v: unknown) => Obj]> = [
    ['limits.request_timeout', (v) => variant((c) => void ((c as Obj).limits = { request_timeout: v }))],
    ['limits.max_body_bytes', (v) => variant((c) => void ((c as Obj).limits = { max_body_bytes: v }))],
    ['pools.p.saturation.retry_after', (v) => variant((c) => void (pool(c).saturation = { retry_after: v }))],
  ];
  for (const [key, config] of keys) {
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(written, (v) => {
        const c = config(v);
        const ajvOk = ajvErrors(c).length === 0;
        const zodOk = configSchema.safeParse(c).success;
        if (zodOk) accepted++;
        else refused++;
        return ajvOk === zodOk;
      }),
      { seed: SEED, numRuns: 1500 },
    );
    t.ok(accepted >= 20 && refused >= 20, `${key}: agreed on ${accepted} accepted and ${refused} refused values`);
  }
});

t.test("trusted_proxies: the JSON Schema's pattern takes every address check-config takes", async (t) => {
  // the pattern is looser on purpose (an editor's hint); parseCidr decides, so only one direction holds
  const hex = fc.constantFrom(...'0123456789abcdefABCDEF.:'.split(''));
  const address = fc.oneof(
    fc.ipV4().map(String),
    fc.ipV6().map(String),
    fc.tuple(fc.oneof(fc.ipV4(), fc.ipV6()), fc.nat(140)).map(([a, n]) => `${a}/${n}`),
    fc.string({ unit: hex, maxLength: 20 }),
    fc.string({ maxLength: 12 }),
  );
  let taken = 0;
  fc.assert(
    fc.property(address, (a) => {
      const c = variant((c) => void ((c as Obj).trusted_proxies = [a]));
      if (!configSchema.safeParse(c).success) return true;
      taken++;
      return ajvErrors(c).length === 0;
    }),
    { seed: SEED, numRuns: 1500 },
  );
  t.ok(taken >= 200, `${taken} addresses taken by both`);
});

t.test('check-config names the key path and line of schema problems', async (t) => {
  const file = join(tempDir(), 'bad-units.yaml');
  writeFileSync(
    file,
    [
      'auth: { mode: none, allow_unauthenticated: true }',
      'limits:',
      '  max_body_bytes: 1.5',
      '  max_header_bytes: -1',
      '  request_timeout: 600',
      'models: [{ name: m, pool: p }]',
      'pools:',
      '  p:',
      '    endpoints: [127.0.0.1:8001]',
      '    metrics: { path: metrics }',
      '    saturation: { retry_after: soon }',
      '    api_key: sk-123',
    ].join('\n'),
  );
  const p = runCli(['check-config', file]);
  t.equal(await p.exited(), 1);
  const err = p.stderr();
  t.match(err, /bad-units\.yaml:3: limits\.max_body_bytes: not a size: 1\.5 /);
  t.match(err, /bad-units\.yaml:4: limits\.max_header_bytes: not a size: -1 /);
  t.match(err, /bad-units\.yaml:5: limits\.request_timeout: a duration needs a unit: write "600s"/);
  t.match(err, /bad-units\.yaml:10: pools\.p\.metrics\.path: a path starts with "\/"/);
  t.match(err, /bad-units\.yaml:11: pools\.p\.saturation\.retry_after: not a duration: "soon"/);
  t.match(err, /bad-units\.yaml:12: pools\.p\.api_key: a key is not written in the config file/);
});

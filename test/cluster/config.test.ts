// The cluster: keys as a user writes them: a good section passes check-config, each mistake is named with
// its line, and the section is optional (a gateway without it routes alone).
import t from 'tap';
import { tempDir } from '../helpers/process.js';
import { checkConfigText } from '../helpers/check-config.js';

const dir = tempDir();
const BASE = 'auth: {mode: none, allow_unauthenticated: true}\nmodels: [{name: a, pool: p}]\npools: {p: {endpoints: ["127.0.0.1:1"]}}\n';

const check = (name: string, text: string) => checkConfigText(dir, name, text);

t.test('a cluster on Redis with every key, and none at all', async (t) => {
  const r = await check('good.yaml', BASE + 'cluster:\n  backend: redis\n  url: "rediss://10.0.0.5:6380/1"\n  channel: "prod:routing"\n');
  t.equal(r.code, 0, r.err);
  t.equal(r.out, 'ok\n');
  const none = await check('none.yaml', BASE);
  t.equal(none.code, 0, none.err);
});

t.test('cluster mistakes are named with their line', async (t) => {
  const r = await check('bad.yaml', BASE + ['cluster:', '  backend: redis', '  channel: ""', '  retries: 3'].join('\n'));
  t.equal(r.code, 1);
  t.match(r.err, /bad\.yaml:\d+: cluster\.url: .*needs cluster\.url|cluster: .*cluster\.url/);
  t.match(r.err, /bad\.yaml:6: cluster\.channel: /);
  t.match(r.err, /retries/);
  const url = await check('url.yaml', BASE + 'cluster: {backend: redis, url: "http://10.0.0.5:6379"}\n');
  t.equal(url.code, 1);
  t.match(url.err, /cluster\.url: a Redis URL/);
  const backend = await check('backend.yaml', BASE + 'cluster: {backend: etcd}\n');
  t.equal(backend.code, 1);
  t.match(backend.err, /cluster\.backend: /);
});

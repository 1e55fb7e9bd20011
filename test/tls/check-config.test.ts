// check-config on listen.tls: a missing file, a key that is not the certificate's, an expired certificate.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { runCli, gatewayConfig, tempDir } from '../helpers/process.js';
import { makeExpiredPair, makePair } from './support.js';

const dir = tempDir();
const a = makePair(dir, 'a', 'a.test');
const b = makePair(dir, 'b', 'b.test');
const expired = makeExpiredPair(dir, 'old');

async function checkConfig(name: string, tls: Record<string, unknown>): Promise<{ code: number | null; out: string; err: string }> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(gatewayConfig(['127.0.0.1:9'], { over: { listen: { host: '127.0.0.1', port: 0, tls } } })));
  const p = runCli(['check-config', file]);
  const code = await p.exited(30_000);
  return { code, out: p.stdout(), err: p.stderr() };
}

t.test('a good pair passes', async (t) => {
  const r = await checkConfig('good', { cert: a.cert, key: a.key });
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^ok/m);
  t.equal(r.err, '', 'no warning');
});

t.test('a missing certificate or key file is an error naming the key and the path', async (t) => {
  const noCert = await checkConfig('no-cert', { cert: join(dir, 'absent.crt'), key: a.key });
  t.equal(noCert.code, 1);
  t.match(noCert.err, /listen\.tls\.cert: \S*absent\.crt: does not exist/);
  const noKey = await checkConfig('no-key', { cert: a.cert, key: join(dir, 'absent.key') });
  t.equal(noKey.code, 1);
  t.match(noKey.err, /listen\.tls\.key: \S*absent\.key: does not exist/);
});

t.test('a key that is not the certificate\'s is an error', async (t) => {
  const r = await checkConfig('mismatch', { cert: a.cert, key: b.key });
  t.equal(r.code, 1);
  t.match(r.err, /listen\.tls: the key in \S*b\.key does not belong to the certificate in \S*a\.crt/);
  const notPem = await checkConfig('not-pem', { cert: a.key, key: a.key });
  t.equal(notPem.code, 1);
  t.match(notPem.err, /listen\.tls\.cert: \S*a\.key is not a PEM certificate/);
});

t.test('an expired certificate is a warning', async (t) => {
  const r = await checkConfig('expired', { cert: expired.cert, key: expired.key });
  t.equal(r.code, 0, 'the check passes');
  t.match(r.err, /warning: listen\.tls\.cert: \S*old\.crt: the certificate expired on 2020-01-02T00:00:00\.000Z/);
});

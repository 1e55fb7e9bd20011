/**
 * `overhead --workers 2`: a tiny live run (one JSON cell of 1 s, no fixed-rate part) in which nginx runs 2
 * worker processes and infergate `serve --workers 2`, both answering every request, the CPU per request
 * counted over each one's processes (master or parent included). nginx is left out when it is not
 * installed, and the run skipped without wrk (the bench itself would apt-get them; a test does not).
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';
import { which } from '../../native-bench/common.js';
import { nginxConfig, DEFAULT_SIZING } from '../../native-bench/nginx.js';

t.test("nginx's config takes the worker count", async (t) => {
  t.match(nginxConfig('/tmp/x', 1, 2), /^worker_processes 1;$/m, 'one worker by default');
  t.match(nginxConfig('/tmp/x', 1, 2, { ...DEFAULT_SIZING, workers: 2 }), /^worker_processes 2;$/m, '--workers 2: two');
});

t.test('a tiny live run with 2 workers each', { skip: which('wrk') ? false : 'wrk is not installed' }, async (t) => {
  const out = mkdtempSync(path.join(os.tmpdir(), 'overhead-workers-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const targets = which('nginx') || which('/usr/sbin/nginx') ? ['direct', 'nginx', 'infergate'] : ['direct', 'infergate'];
  const r = await runBench(
    ['overhead', '--workers', '2', '--modes', 'json', '--connections', '10', '--duration', '1', '--fixed-duration', '0', '--targets', targets.join(','), '--out', out],
    110_000,
  );
  t.equal(r.code, 0, r.err.slice(-2000));
  const json = JSON.parse(readFileSync(path.join(out, 'overhead.json'), 'utf8'));
  t.match(json.settings, { workers: 2, targets });
  for (const name of targets) {
    const e = json.entries.find((x: { name: string }) => x.name === name);
    t.ok(e && e.rps > 0, `${name}: answered (${e?.rps} req/s)`);
    t.equal(e.errors + e.non2xx, 0, `${name}: no socket error, every answer 2xx`);
    if (name !== 'direct') t.equal(e.proxy_processes, 3, `${name}: CPU counted over 3 processes (2 workers and their parent)`);
  }
});

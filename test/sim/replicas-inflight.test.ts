// In-flight counts shared between gateway replicas, as the simulator measures them: the router's seam
// (setRemoteInFlight, read by the load scorer) and `simulate --share events+inflight`.
import t from 'tap';
import { Router } from '../../src/routing/index.js';
import { generateWorkload, runSimulation } from '../../src/sim/index.js';
import { simulateMain } from '../../src/sim/cli.js';

const prompt = { model: 'm', promptText: 'a short question', promptTokens: 4 };

t.test('the load scorer counts what the other replicas report in flight', async (t) => {
  const r = Router.fromPool('p', {}, ['a:1', 'b:1']);
  const before = r.pick('p', prompt, 1, { explain: true, dryRun: true });
  t.ok(before.kind === 'ok');
  const load = (res: typeof before, ep: string) => (res.kind === 'ok' ? res.explain!.candidates.find((c) => c.endpoint === ep)!.scores.load : NaN);
  t.equal(load(before, 'a:1'), 1, 'nothing in flight: a scores the best load');
  t.equal(load(before, 'b:1'), 1, 'and so does b');

  r.setRemoteInFlight('p', 'a:1', 9);
  const after = r.pick('p', prompt, 2, { explain: true, dryRun: true });
  t.equal(load(after, 'a:1'), 0.1, 'nine in flight elsewhere on a: (0 + 1) / (9 + 1)');
  t.equal(load(after, 'b:1'), 1);
  const first = r.pick('p', prompt, 3);
  t.equal(first.kind === 'ok' && first.endpoint, 'b:1', 'the pick avoids the endpoint the other replicas load');
  const loads = r.pick('p', prompt, 4, { explain: true, dryRun: true });
  t.equal(load(loads, 'b:1'), 1, 'b: our own one is the fewest in flight');
  t.equal(load(loads, 'a:1'), 0.2, 'a: remote and own counts add up, (1 + 1) / (9 + 1)');

  for (const bad of [NaN, -3, Infinity]) {
    r.setRemoteInFlight('p', 'a:1', bad);
    t.equal(load(r.pick('p', prompt, 10, { explain: true, dryRun: true }), 'a:1'), 1, `${bad} reads as 0`);
  }
  r.setRemoteInFlight('p', 'nope:1', 4); // an endpoint the pool does not list: ignored
  r.setRemoteInFlight('nope', 'a:1', 4); // a pool it does not have: ignored
  t.equal(load(r.pick('p', prompt, 11, { explain: true, dryRun: true }), 'a:1'), 1);
});

t.test('simulate --share events+inflight: one replica is the plain run; several account for every request', async (t) => {
  const reqs = generateWorkload('burst', { seed: 2, requests: 400 });
  const run = (replicas: number, share: 'none' | 'events' | 'events+inflight', inflightPeriodMs = 0) =>
    runSimulation({ requests: reqs, trace: 'burst', policies: ['scored'], seed: 2, replicas: { replicas, share, shareDelayMs: 5, inflightPeriodMs, spread: 'round_robin' } });
  const plain = runSimulation({ requests: reqs, trace: 'burst', policies: ['scored'], seed: 2 });
  t.equal(JSON.stringify(run(1, 'events+inflight').runs), JSON.stringify(plain.runs), 'one replica: nothing to share, the plain run');
  const events = run(4, 'events');
  const inflight = run(4, 'events+inflight');
  const periodic = run(4, 'events+inflight', 250);
  t.match(inflight.workload, { replicas: 4, share: 'events+inflight', share_delay_ms: 5, inflight_period_ms: 0 });
  t.match(periodic.workload, { inflight_period_ms: 250 });
  t.notOk('inflight_period_ms' in events.workload, 'only the in-flight mode has a period');
  for (const r of [events, inflight, periodic]) t.equal(r.runs[0].completed + r.runs[0].rejected + r.runs[0].errors, reqs.length, 'every request accounted for');
  // the shared counts reach the other replicas' picks: the requests land differently than with picks alone
  t.not(JSON.stringify(inflight.runs[0].per_endpoint), JSON.stringify(events.runs[0].per_endpoint), 'shared counts change where requests go');
});

t.test('simulate: --share takes events+inflight and a period; anything else is a usage error', async (t) => {
  const out: string[] = [];
  const err: string[] = [];
  const io = { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) };
  const code = await simulateMain(['--generate', 'burst', '--requests', '120', '--policies', 'scored', '--replicas', '2', '--share', 'events+inflight', '--share-inflight-period-ms', '100'], io);
  t.equal(code, 0);
  t.match(out.join(''), /2 gateway replicas \(round_robin, share events\+inflight after 5 ms, in-flight every 100 ms\)/);
  t.equal(await simulateMain(['--generate', 'burst', '--replicas', '2', '--share', 'inflight'], io), 2);
  t.match(err.join(''), /--share must be one of none, events, events\+inflight, not "inflight"/);
  t.equal(await simulateMain(['--generate', 'burst', '--replicas', '2', '--share', 'events+inflight', '--share-inflight-period-ms', '-1'], io), 2);
  t.match(err.join(''), /share-inflight-period-ms/);
});

// Several gateway replicas: each learns only its own picks unless they share; sharing restores affinity.
import t from 'tap';
import { Router } from '../../src/routing/index.js';
import { generateWorkload, runSimulation } from '../../src/sim/index.js';

t.test('a router applies what a replica learned (learnRemote) and reports its own learning (onLearn)', async (t) => {
  const eps = ['a:1', 'b:1', 'c:1'];
  const learned: Array<{ endpoint: string; chain: number[] }> = [];
  const one = Router.fromPool('p', {}, eps, { onLearn: (_p, endpoint, chain, total) => learned.push({ endpoint, chain: Array.from(chain).slice(0, total) }) });
  const two = Router.fromPool('p', {}, eps);
  const prompt = { model: 'm', promptText: 'the same long system prompt '.repeat(40), promptTokens: 300 };
  const first = one.pick('p', prompt, 1);
  t.ok(first.kind === 'ok');
  t.equal(learned.length, 1, 'the pick was reported once');
  t.equal(learned[0].endpoint, first.kind === 'ok' ? first.endpoint : '');
  t.ok(learned[0].chain.length > 10, 'with its prefix blocks');
  const before = two.pick('p', prompt, 2, { explain: true, dryRun: true });
  t.ok(before.kind === 'ok' && before.explain!.candidates.every((c) => c.matchedBlocks === 0), 'the other replica knows nothing yet');
  two.learnRemote('p', learned[0].endpoint, learned[0].chain, learned[0].chain.length, 3);
  const after = two.pick('p', prompt, 4, { explain: true, dryRun: true });
  t.ok(after.kind === 'ok');
  const row = after.kind === 'ok' ? after.explain!.candidates.find((c) => c.endpoint === learned[0].endpoint) : undefined;
  t.equal(row?.matchedBlocks, learned[0].chain.length, 'after learnRemote the endpoint matches the whole prefix');
  two.learnRemote('p', 'unknown:1', learned[0].chain, learned[0].chain.length, 5); // ignored, no throw
  two.learnRemote('nope', learned[0].endpoint, learned[0].chain, learned[0].chain.length, 5);
});

t.test('replicas: without sharing, conversations lose affinity; sharing events restores it', async (t) => {
  const reqs = generateWorkload('multi-turn', { seed: 3, requests: 500 });
  const run = (replicas: number, share: 'none' | 'events', shareDelayMs = 1) =>
    runSimulation({ requests: reqs, trace: 'multi-turn', policies: ['scored'], seed: 3, replicas: { replicas, share, shareDelayMs, spread: 'round_robin' } });
  const one = run(1, 'none');
  const plain = runSimulation({ requests: reqs, trace: 'multi-turn', policies: ['scored'], seed: 3 });
  t.equal(JSON.stringify(one), JSON.stringify(plain), 'one replica is the plain run, to the byte');
  const four = run(4, 'none');
  const shared = run(4, 'events');
  const hit = (r: typeof one) => r.runs[0].prefix_cache_hit_rate;
  t.ok(hit(four) < hit(one) - 0.05, `4 replicas alone: hit rate ${hit(four)} well under one replica's ${hit(one)}`);
  t.ok(hit(shared) > hit(one) - 0.03, `4 replicas sharing: hit rate ${hit(shared)} within 3 points of one replica's ${hit(one)}`);
  t.match(four.workload, { replicas: 4, share: 'none', spread: 'round_robin' });
  for (const r of [one, four, shared]) t.equal(r.runs[0].completed + r.runs[0].rejected + r.runs[0].errors, reqs.length, 'every request accounted for');
});

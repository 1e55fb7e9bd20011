// PickInput.prefer, the seam a Responses API follow-up is pinned through: a usable preferred endpoint wins
// over every policy and over saturation (only it holds what the request continues); an excluded, ejected
// or unknown one changes nothing.
import t from 'tap';
import { Router, POLICY_NAMES, type EndpointSignals } from '../../src/routing/index.js';

const sig = (o: Partial<EndpointSignals> = {}): EndpointSignals => ({
  waiting: 0, running: 0, kvUsage: 0.05, loraRunning: [], loraWaiting: [], maxLoras: 0, ...o,
});
const EPS = ['a:1', 'b:1', 'c:1'];
const req = (extra: Record<string, unknown> = {}) => ({ model: 'm', promptText: 'continue the story. '.repeat(10), promptTokens: 50, ...extra });

function pool(): Router {
  const r = Router.fromPool('p', { saturation: { queue_depth: 5, kv_cache: 0.8, retry_after: 'auto' } }, EPS, { random: () => 0.5 });
  for (const e of EPS) r.updateSignals(e, sig(), 0);
  return r;
}

t.test('a usable preferred endpoint wins under every policy, and is said to be pinned', async (t) => {
  for (const policy of POLICY_NAMES) {
    const r = pool();
    for (let i = 0; i < 6; i++) {
      const res = r.pick('p', req({ prefer: 'c:1' }), 10 + i, { policy, explain: true });
      t.equal(res.kind === 'ok' && res.endpoint, 'c:1', `${policy}: pick ${i}`);
      t.ok(res.kind === 'ok' && res.pinned && res.explain?.pinned, `${policy}: pinned`);
    }
    const free = r.pick('p', req(), 20, { policy });
    t.notOk(free.kind === 'ok' && free.pinned, `${policy}: a pick without prefer is not pinned`);
  }
});

t.test('over saturation: the pinned endpoint is chosen even when the pool would answer 429', async (t) => {
  const r = pool();
  for (const e of EPS) r.updateSignals(e, sig({ waiting: 50, kvUsage: 0.99 }), 100);
  t.equal(r.pick('p', req(), 101).kind, 'saturated', 'the pool is saturated');
  const res = r.pick('p', req({ prefer: 'b:1' }), 101);
  t.equal(res.kind === 'ok' && res.endpoint, 'b:1', 'only that server can answer: it gets the request');
});

t.test('an excluded, ejected or unknown preferred endpoint: the pick is made as without one', async (t) => {
  const r = pool();
  const excluded = r.pick('p', req({ prefer: 'a:1', exclude: new Set(['a:1']) }), 10);
  t.ok(excluded.kind === 'ok' && excluded.endpoint !== 'a:1' && !excluded.pinned, 'excluded (it failed this request)');
  const unknown = r.pick('p', req({ prefer: 'z:9' }), 11);
  t.ok(unknown.kind === 'ok' && !unknown.pinned, 'not in the pool');
  // eject a:1: consecutive failures
  for (let i = 0; i < 10; i++) {
    const p = r.pick('p', req({ prefer: 'a:1' }), 20 + i);
    if (p.kind === 'ok' && p.endpoint === 'a:1') r.onEnd(p.ticket, 20 + i, 'error');
  }
  const dbg = (r.debugPools(40) as Record<string, { endpoints: Array<{ endpoint: string; ejected_for_ms?: number }> }>).p;
  t.ok(dbg.endpoints.find((e) => e.endpoint === 'a:1')?.ejected_for_ms, 'a:1 is ejected');
  const ejected = r.pick('p', req({ prefer: 'a:1' }), 40);
  t.ok(ejected.kind === 'ok' && ejected.endpoint !== 'a:1' && !ejected.pinned, 'ejected: routed elsewhere');
});

// Saturation in the simulator (hardening item 10): spikes into idle capacity are admitted by every router
// policy; real overload is still refused: spikes beyond the engines' seats when the pool knows them
// (max_num_seqs), and a sustained rate beyond the pool (by the router and by the oracle that reads the
// engines' true queues).
import t from 'tap';
import { generateWorkload, runSimulation } from '../../src/sim/index.js';

const ROUTER_POLICIES = ['round_robin', 'least_request', 'random', 'scored'];

t.test('spikes of 20 simultaneous requests per idle endpoint: no router policy rejects one', async (t) => {
  const reqs = generateWorkload('spikes', { seed: 1, requests: 400 });
  const res = runSimulation({ requests: reqs, trace: 'spikes', policies: ROUTER_POLICIES });
  for (const r of res.runs) {
    t.equal(r.rejected, 0, `${r.policy}: 0 rejected`);
    t.equal(r.completed, reqs.length, `${r.policy}: all ${reqs.length} completed`);
  }
});

t.test('spikes beyond the engines\' seats, the pool told max_num_seqs: refused on arrival', async (t) => {
  const reqs = generateWorkload('spikes', { seed: 1, requests: 400 });
  const res = runSimulation({
    requests: reqs,
    trace: 'spikes',
    profile: { maxNumSeqs: 4 },
    pool: { max_num_seqs: 4 },
    policies: ROUTER_POLICIES,
  });
  for (const r of res.runs) {
    t.ok(r.rejected > 0, `${r.policy}: ${r.rejected} rejected`);
    t.equal(r.completed + r.rejected + r.errors, reqs.length, `${r.policy}: every request accounted for`);
  }
});

t.test('a sustained rate beyond the pool: the router and the oracle both refuse', async (t) => {
  const reqs = generateWorkload('no-sharing', { seed: 1, requests: 400 });
  const res = runSimulation({ requests: reqs, trace: 'no-sharing', rateScale: 6, endpoints: 4, policies: ['scored', 'oracle'] });
  for (const r of res.runs) t.ok(r.rejected > 0, `${r.policy}: ${r.rejected} of ${reqs.length} rejected`);
});

// `npm run bench -- reliability` in its smallest form (one try per attacker class, seconds of overload
// and soak), run as a user runs it: the JSON it writes has the documented shape, and the gateway neither
// crashed, hung, cut an answer short, leaked an upstream request nor forwarded what it must refuse.
import t from 'tap';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('bench reliability --cases 1 writes reliability.json with nothing broken', async (t) => {
  const out = mkdtempSync(path.join(tmpdir(), 'infergate-rel-'));
  const r = await runBench(['reliability', '--cases', '1', '--overload-s', '2', '--soak-s', '3', '--out', out], 170_000);
  t.equal(r.code, 0, `exit 0 (stderr: ${r.err.slice(-1500)})`);
  const j = JSON.parse(readFileSync(path.join(out, 'reliability.json'), 'utf8')) as {
    scenario: string;
    cases: Array<Record<string, unknown>>;
    overload: Record<string, unknown>;
    soak: Record<string, unknown>;
    parse: Array<Record<string, unknown>>;
    gateway_alive: boolean;
  };
  t.equal(j.scenario, 'reliability');
  const names = j.cases.map((c) => c.name);
  for (const n of ['deep_json', 'huge_token_ids', 'chunked_1byte', 'duplicate_keys', 'bad_utf8', 'bad_headers', 'smuggling', 'half_sent_body', 'never_read_stream', 'client_abort_mid_stream']) {
    t.ok(names.includes(n), `class ${n} ran`);
  }
  for (const c of j.cases) {
    for (const k of ['tried', 'crashes', 'hangs', 'silent_truncations', 'leaked_upstreams', 'wrong_accepts']) t.type(c[k], 'number', `${c.name}.${k} is a number`);
    t.equal(c.tried, 1, `${c.name}: one try`);
    t.same([c.crashes, c.hangs, c.silent_truncations, c.leaked_upstreams, c.wrong_accepts], [0, 0, 0, 0, 0], `${c.name}: no crash, hang, truncation, leak or wrong accept (${JSON.stringify(c.failures)})`);
  }
  for (const k of ['offered_x_capacity', 'admitted_ttft_p99_ms', 'rejected_share', 'event_loop_delay_p99_ms', 'admin_p99_ms', 'peak_rss_mb']) t.type(j.overload[k], 'number', `overload.${k}`);
  t.ok((j.overload.admitted as number) > 0, 'some requests were admitted under overload');
  t.ok((j.overload.event_loop_delay_p99_ms as number) > 0, 'the gateway reported its event-loop delay');
  for (const k of ['seconds', 'requests', 'rss_growth_mb']) t.type(j.soak[k], 'number', `soak.${k}`);
  t.ok((j.soak.requests as number) > 0, 'the soak sent requests');
  t.equal(j.parse.length, 3, 'parse cost for three body shapes');
  t.equal(j.gateway_alive, true);
});

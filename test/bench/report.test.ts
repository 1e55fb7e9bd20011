import t from 'tap';
import { cdfPoints, lineChart, niceTicks } from '../../src/report/svg.js';
import { renderReport, verdict, type ReportInput } from '../../src/report/report.js';
import { renderPoliciesReport } from '../../native-bench/report.js';
import { parseWrk, wrkScript, wrkTokenScript } from '../../native-bench/wrk.js';
import { promSums, vllmSample } from '../../native-bench/prom.js';
import { SseTokenCounter } from '../../native-bench/stream.js';
import { summarize, percentileSorted } from '../../native-bench/common.js';

t.test('svg helpers', async (t) => {
  t.same(niceTicks(0, 10, 5), [0, 2, 4, 6, 8, 10]);
  const cdf = cdfPoints([3, 1, 2, 4]);
  t.same(cdf, [[1, 0.25], [2, 0.5], [3, 0.75], [4, 1]]);
  const svg = lineChart([{ name: 'a<b', points: cdf }], { title: 'T', xLabel: 'x', yLabel: 'y', xLog: true });
  t.match(svg, /^<svg /);
  t.match(svg, /<path d="M/);
  t.match(svg, /a&lt;b/, 'names are escaped');
  t.match(lineChart([], { title: 'empty', xLabel: 'x', yLabel: 'y' }), /<\/svg>$/, 'an empty chart still renders');
});

t.test('report html is self-contained and has the charts', async (t) => {
  const s = { p50: 1, p90: 2, p99: 3, mean: 1.5 };
  const run = { policy: 'scored', requests: 2, completed: 2, errors: 0, rejected: 0, ttft_ms: s, itl_ms: s, e2e_ms: s, throughput_rps: 1, output_tokens_per_s: 10, prefix_cache_hit_rate: 0.5 };
  const html = renderPoliciesReport({
    settings: { x: 1 }, timeScale: 10, valid: false, invalidReason: 'late <client>',
    live: [{ ...run, ttft_offered_values_ms: [10, 20], timeseries: { 'a:1': [[0, 1, 0, 0.1], [0.25, 2, 1, 0.2]] }, per_endpoint: [{ endpoint: 'a:1', requests: 2, mean_running: 1, max_running: 2, mean_kv_cache: 0.1, busy_fraction: 1 }] }],
    sim: [run],
    comparison: [{ policy: 'scored', metric: 'ttft p50', live: 1, simulated: 1, ratio: 1, within_20pct: true }],
  });
  t.match(html, /<svg/);
  t.ok((html.match(/<svg/g) ?? []).length >= 3, 'TTFT CDF, load and KV charts');
  t.match(html, /NOT valid: late &lt;client&gt;/, 'the verdict says the run is not valid, escaped');
  t.match(html, /class="agreement"/, 'live vs simulated has its own table');
  t.notMatch(html, /<script|https?:\/\/(?!www\.w3\.org)/, 'no scripts, no external links');
});

t.test('the verdict names the goodput winner, the margin, and leaves yardsticks out', async (t) => {
  const s = { p50: 1, p90: 2, p99: 3, mean: 1.5 };
  const fig = (policy: string, good: number, rejected = 0) => ({
    policy, requests: 100, completed: 100 - rejected, errors: 0, rejected, ttft_ms: { ...s, p99: 10 + good }, itl_ms: s, e2e_ms: s,
    throughput_rps: 5, output_tokens_per_s: 10, prefix_cache_hit_rate: 0.1,
    shed_share: rejected / 100, slo: [{ ttft_ms: 2000, itl_ms: 100, attainment: good / 10, goodput_rps: good }], ttft_offered_ms: { p50: 1, p90: 2, p99: null },
  });
  const input: ReportInput = {
    title: 't', about: 'a', valid: true, settings: {}, yardsticks: ['oracle'],
    policies: [fig('round_robin', 2, 30), fig('scored', 3), fig('oracle', 4)].map((run) => ({ run, ttftOfferedMs: [5, 50, Infinity] })),
  };
  const v = verdict(input);
  t.equal(v.winner, 'scored', 'the oracle is never the winner');
  t.match(v.text, /scored wins on goodput at TTFT ≤ 2 s, ITL ≤ 100 ms: 3 req\/s, 50\.0% more than round_robin \(2 req\/s\)/);
  t.match(v.text, /oracle \(a yardstick, not a policy to deploy\) reaches 4 req\/s/);
  t.match(v.text, /The run is valid\./);
  const html = renderReport(input);
  t.match(html, /<p class="verdict" id="verdict">scored wins/);
  t.match(html, /class="warnbox">Warning: a large share of requests was rejected \(round_robin 30\.0%\)/, 'a heavy shedder is called out');
  const row = (p: string) => html.split('\n').find((l) => l.includes(`<tr><th>${p}`)) ?? '';
  t.match(row('scored'), /class="better">3</, 'the best goodput is marked better');
  t.match(row('round_robin'), /class="worse">2</, 'the worst goodput is marked worse');
  t.notMatch(row('oracle'), /class="(better|worse)"/, 'the yardstick is not coloured');
  t.match(row('round_robin'), /<td>shed<\/td>|>shed</, 'an offered percentile that falls on shed requests says so');
  t.same(verdict({ ...input, policies: input.policies.slice(0, 1), valid: false, invalidReason: 'x' }).text.endsWith('NOT valid: x.'), true);
});

t.test('the offered-request yardstick', async (t) => {
  const { headlineOf, offeredFigures, sloSpecs } = await import('../../src/sim/slo.js');
  // 4 offered: 2 completed fast, 1 completed slow (ITL too high), 1 shed
  const f = offeredFigures([100, 300, 200, NaN], [10, 20, 500, NaN], 1, 2, sloSpecs([250, 1000], 100));
  t.equal(f.shed_share, 0.25);
  t.same(f.slo, [
    { ttft_ms: 250, itl_ms: 100, attainment: 0.25, goodput_rps: 0.5, headline: true },
    { ttft_ms: 1000, itl_ms: 100, attainment: 0.5, goodput_rps: 1 },
  ], 'the first bound given is the headline');
  t.same(f.ttft_offered_ms, { p50: 200, p90: null, p99: null }, 'percentiles that fall on the shed request are null');
  t.same(sloSpecs(undefined, undefined), [
    { ttftMs: 1000, itlMs: 100 },
    { ttftMs: 2000, itlMs: 100, headline: true },
    { ttftMs: 5000, itlMs: 100 },
  ], 'the default objectives (issue #17: 1 s, 2 s, 5 s), 2 s the headline');
  t.same(sloSpecs([1000, 2000], 50, 2000), [{ ttftMs: 1000, itlMs: 50 }, { ttftMs: 2000, itlMs: 50, headline: true }], 'a headline named among the bounds');
  t.same(sloSpecs(undefined, undefined, 5000).map((s) => s.headline ?? false), [false, false, true], 'a headline among the default bounds');
  t.throws(() => sloSpecs([1000, 2000], undefined, 3000), /--slo-headline 3000ms is not one of the --slo-ttft bounds \(1000ms, 2000ms\)/);
  t.same(headlineOf([{ ttft_ms: 1 }, { ttft_ms: 2 }]), { ttft_ms: 1 }, 'a list without a mark (an older result file): the first');
  t.equal(headlineOf(undefined), undefined);
});

t.test('wrk output parsing and script', async (t) => {
  const out = `Running 2s test @ http://127.0.0.1:1/v1/chat/completions
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   465.37us  120.12us   5.01ms   90.00%
  Latency Distribution
     50%  409.00us
     75%  500.00us
     90%  600.00us
     99%    1.00ms
  216206 requests in 2.00s, 236.73MB read
  Non-2xx or 3xx responses: 3
Requests/sec: 108103.00
Transfer/sec:    118.36MB
`;
  const r = parseWrk(out);
  t.equal(r.rps, 108103);
  t.equal(r.latency_ms.p50, 0.409);
  t.equal(r.latency_ms.p99, 1);
  t.equal(r.non2xx, 3);
  t.equal(r.requests, 216206);
  t.match(wrkScript('{"a":"b"}'), /wrk.body = "\{\\"a\\":\\"b\\"\}"/);
  t.match(wrkScript('{}', { authorization: 'Bearer a"b' }), /wrk\.headers\["authorization"\] = "Bearer a\\"b"/, 'extra headers, quoted for Lua');
  const rotating = wrkTokenScript('{"m":1}', ['t1', 't2']);
  t.match(rotating, /local tokens = \{"t1","t2"\}/, 'the tokens, in a Lua table');
  t.match(rotating, /request = function\(\)[^]*"Bearer " \.\. tokens\[i\]/, 'each request takes the next one');
});

t.test('prometheus sums and vllm samples', async (t) => {
  const text = '# HELP x\nvllm:num_requests_running{model_name="m"} 3\nvllm:num_requests_running{model_name="l"} 1\nvllm:kv_cache_usage_perc{model_name="m"} 0.25\nvllm:prefix_cache_hits_total{model_name="m"} 10\nvllm:prefix_cache_queries_total{model_name="m"} 40\nplain 7\n';
  t.equal(promSums(text).get('plain'), 7);
  t.same(vllmSample(text), { running: 4, waiting: 0, kv: 0.25, prefixHits: 10, prefixQueries: 40 });
});

t.test('sse token counting across chunk boundaries', async (t) => {
  let n = 0;
  const c = new SseTokenCounter(() => n++);
  const ev = (s: string) => `data: {"choices":[{"delta":{"content":${JSON.stringify(s)}}}]}\n\n`;
  const all = `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n${ev('a')}${ev('b')}${ev('c')}data: [DONE]\n\n`;
  c.push(all.slice(0, 37));
  c.push(all.slice(37, 90));
  c.push(all.slice(90));
  t.equal(n, 3, 'the empty role chunk is not a token');
  t.equal(c.done, true);
});

t.test('percentiles', async (t) => {
  t.equal(percentileSorted([1, 2, 3, 4], 0.5), 2);
  t.same(summarize([]), { p50: 0, p90: 0, p99: 0, mean: 0 });
  t.equal(summarize([1, 2, 3, 4, 100]).p99, 100);
});

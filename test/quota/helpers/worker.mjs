// A gateway's quota room in a process of its own (the built dist/), driven over stdin/stdout one JSON line
// at a time, so tests can run several "gateways" sharing one Redis and kill them. Argument: the config's
// `tenants` and `quota` keys as JSON.
import { createInterface } from 'node:readline';
import { Quota, rateLimitHeaders } from '../../../dist/quota/index.js';
import { GatewayMetrics } from '../../../dist/observability/metrics.js';
import { configSchema } from '../../../dist/config/schema.js';

const given = JSON.parse(process.argv[2]);
const config = configSchema.parse({
  auth: { mode: 'none', allow_unauthenticated: true },
  models: [{ name: 'm', pool: 'p' }],
  pools: { p: { endpoints: ['127.0.0.1:1'] } },
  ...given,
});
const metrics = new GatewayMetrics({ endpointStates: () => [] }, { processMetrics: false });
const logs = [];
const logger = {
  warn: (obj, msg) => logs.push({ level: 'warn', msg, ...obj }),
  info: (obj, msg) => logs.push({ level: 'info', msg, ...obj }),
};
const quota = new Quota(config.tenants, config.quota, { logger, onBackendUp: (up) => metrics.quotaBackendUp.set(up ? 1 : 0) });
const leases = new Map();
let nextLease = 0;

function summary(d) {
  let lease;
  if (d.allowed) {
    lease = ++nextLease;
    leases.set(lease, d.lease);
  }
  return { allowed: d.allowed, source: d.source, reason: d.reason, retryAfterS: d.retryAfterS, headers: rateLimitHeaders(d), lease };
}

async function handle(m) {
  switch (m.op) {
    case 'admit':
      return summary(await quota.admit(m.tenant, m.tokens ?? 0));
    case 'burst': {
      // m.n admissions at once (all in flight together), the leases kept
      const all = await Promise.all(Array.from({ length: m.n }, () => quota.admit(m.tenant, m.tokens ?? 0)));
      const sums = all.map(summary);
      return { admitted: sums.filter((s) => s.allowed).length, sources: [...new Set(sums.map((s) => s.source))] };
    }
    case 'release':
      for (const id of m.leases ?? [...leases.keys()]) {
        leases.get(id)?.release();
        leases.delete(id);
      }
      return {};
    case 'reconcile':
      leases.get(m.lease)?.reconcile(m.prompt, m.completion);
      return {};
    case 'gauge': {
      const text = await metrics.registry.getSingleMetricAsString('infergate_quota_backend_up');
      return { value: Number(/^infergate_quota_backend_up (\S+)$/m.exec(text)?.[1]) };
    }
    case 'logs':
      return { logs };
    case 'state':
      return quota.debugState(m.tenant);
    case 'close':
      await quota.close();
      return {};
    default:
      throw new Error(`unknown op ${m.op}`);
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  handle(m).then(
    (r) => process.stdout.write(`${JSON.stringify({ id: m.id, ...r })}\n`),
    (err) => process.stdout.write(`${JSON.stringify({ id: m.id, error: String(err?.stack ?? err) })}\n`),
  );
});
process.stdin.on('end', () => {
  quota.close().then(() => process.exit(0));
});
process.stdout.write('ready\n');

// docker/k8s/infergate.yaml holds together: its embedded config passes check-config, the probes reach the
// admin port that config names, the shutdown timeline fits (preStop + drain < grace period), the two
// replicas have resources and a PodDisruptionBudget that selects them and lets a drain proceed. No
// cluster here: this reads the manifests and runs the real CLI on the config, as a user's CI would.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, parse } from 'yaml';
import { parseDuration, parseSize } from '../../src/common/units.js';
import { ROOT, runCli, tempDir } from '../helpers/process.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const docs = parseAllDocuments(readFileSync(join(ROOT, 'docker', 'k8s', 'infergate.yaml'), 'utf8')).map((d) => d.toJS() as Obj);
const byKind = (kind: string, name?: string) => docs.find((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
const configMap = byKind('ConfigMap');
const deployment = byKind('Deployment');
const pod = deployment?.spec?.template?.spec as Obj;
const container = pod?.containers?.[0] as Obj;
const configText = configMap?.data?.['gateway.yaml'] as string;
const config = parse(configText) as Obj;

t.test('the manifests parse and hold a ConfigMap, a Deployment, a PodDisruptionBudget and the Services', async (t) => {
  t.ok(configMap && deployment && container, 'ConfigMap, Deployment, a container');
  t.ok(byKind('PodDisruptionBudget', 'infergate'), 'the PodDisruptionBudget');
  for (const d of docs) t.ok(d.apiVersion && d.kind && d.metadata?.name, `${d.kind}/${d.metadata?.name}: apiVersion, kind, name`);
  t.ok(byKind('Service', 'infergate'), 'the gateway Service');
  t.ok(byKind('Service', 'vllm-headless'), 'the headless Service the pool discovers');
});

t.test('the embedded config passes check-config', async (t) => {
  const file = join(tempDir(), 'gateway.yaml');
  writeFileSync(file, configText);
  const p = runCli(['check-config', file]);
  t.equal(await p.exited(), 0, p.stderr());
  t.equal(p.stdout().trim(), 'ok');
});

t.test('the container runs that config, and its ports and probes are the config\'s', async (t) => {
  const mount = container.volumeMounts.find((m: Obj) => m.name === 'config');
  const args = container.args as string[];
  t.equal(args[args.indexOf('--config') + 1], `${mount.mountPath}/gateway.yaml`, 'serve --config names the mounted ConfigMap file');
  const port = (name: string) => container.ports.find((p: Obj) => p.name === name)?.containerPort;
  t.equal(port('http'), config.listen.port, 'the http port is listen.port');
  t.equal(port('admin'), config.admin.port, 'the admin port is admin.port');
  t.equal(config.admin.host, '0.0.0.0', 'admin listens beyond loopback, so the kubelet reaches it');
  t.same(container.readinessProbe.httpGet, { path: '/readyz', port: 'admin' });
  t.same(container.livenessProbe.httpGet, { path: '/healthz', port: 'admin' });
  t.equal(deployment.spec.template.metadata.annotations['prometheus.io/port'], String(config.admin.port));
});

t.test('shutdown: preStop sleep + drain_timeout fit inside terminationGracePeriodSeconds', async (t) => {
  const cmd = container.lifecycle.preStop.exec.command as string[];
  t.equal(cmd[0], 'sleep');
  const preStopMs = Number(cmd[1]) * 1000;
  const drainMs = parseDuration(config.limits.drain_timeout);
  const graceMs = pod.terminationGracePeriodSeconds * 1000;
  t.ok(drainMs !== null && preStopMs + drainMs! < graceMs, `${preStopMs} ms + ${drainMs} ms < ${graceMs} ms`);
});

t.test('the pod runs as the image\'s non-root user', async (t) => {
  t.equal(pod.securityContext.runAsNonRoot, true);
  t.equal(pod.securityContext.runAsUser, 1000);
});

t.test('the pool discovers the headless Service by its name and port', async (t) => {
  const svc = byKind('Service', 'vllm-headless')!;
  t.equal(svc.spec.clusterIP, 'None', 'headless: one A record per pod');
  const pool = Object.values(config.pools as Obj)[0] as Obj;
  t.equal(pool.discovery.dns, svc.metadata.name);
  t.equal(pool.discovery.port, svc.spec.ports[0].port);
});

/** Kubernetes quantities as used here: "1", "500m" (CPU); "256Mi", "1Gi", "512M" (bytes). */
function quantity(q: string | number): number {
  const m = /^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q));
  if (!m) throw new Error(`not a quantity: ${q}`);
  const unit = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
}

// checked present by the first test
const dep = deployment as Obj;
const cm = configMap as Obj;
const podLabels = dep.spec.template.metadata.labels as Obj;
const selects = (selector: Obj) => Object.entries(selector).every(([k, v]) => podLabels[k] === v);

t.test('two replicas, the Deployment\'s selector matches its pods, and a rollout never goes below two', async (t) => {
  t.equal(dep.spec.replicas, 2);
  t.ok(Object.keys(dep.spec.selector.matchLabels).length > 0 && selects(dep.spec.selector.matchLabels), 'selector matches the template labels');
  t.equal(dep.spec.strategy.type, 'RollingUpdate');
  t.equal(dep.spec.strategy.rollingUpdate.maxUnavailable, 0);
  t.ok(dep.spec.strategy.rollingUpdate.maxSurge >= 1, 'a new pod comes up first');
  const spread = pod.topologySpreadConstraints?.[0] as Obj;
  t.equal(spread?.topologyKey, 'kubernetes.io/hostname', 'replicas spread over nodes');
  t.ok(selects(spread.labelSelector.matchLabels), 'the spread counts these pods');
});

t.test('resources: a CPU and memory request, a memory limit that holds the buffered bodies, no CPU limit', async (t) => {
  const { requests, limits } = container.resources as Obj;
  t.equal(quantity(requests.cpu), 1, 'one CPU: the proxy is one Node.js thread');
  t.ok(quantity(requests.memory) > 0, `memory request ${requests.memory}`);
  t.ok(quantity(limits.memory) >= quantity(requests.memory), `limit ${limits.memory} >= request ${requests.memory}`);
  t.notOk('cpu' in limits, 'no CPU limit (throttling would delay streams)');
  // limits.max_buffered_body_bytes: the config's, else the gateway's default (check-config passes either way)
  const buffered = parseSize(config.limits?.max_buffered_body_bytes ?? '256mb')!;
  t.ok(quantity(limits.memory) >= buffered + quantity(requests.memory), `limit ${limits.memory} holds ${buffered} bytes of bodies above the request`);
});

t.test('the PodDisruptionBudget selects the gateway pods and lets a drain evict one at a time', async (t) => {
  const pdb = byKind('PodDisruptionBudget', 'infergate')!;
  t.equal(pdb.apiVersion, 'policy/v1');
  t.ok(selects(pdb.spec.selector.matchLabels), 'its selector matches the Deployment\'s pods');
  t.same(pdb.spec.selector.matchLabels, dep.spec.selector.matchLabels, 'the same labels as the Deployment selects');
  t.notOk('minAvailable' in pdb.spec && 'maxUnavailable' in pdb.spec, 'one of minAvailable, maxUnavailable');
  const min = pdb.spec.minAvailable ?? dep.spec.replicas - pdb.spec.maxUnavailable;
  t.ok(min >= 1, `at least one gateway stays (${min})`);
  t.ok(min < dep.spec.replicas, `and one may go (${min} < ${dep.spec.replicas}), so node drains are not blocked`);
});

t.test('the Services select pods that exist and name ports they have', async (t) => {
  const svc = byKind('Service', 'infergate')!;
  t.ok(selects(svc.spec.selector), 'the gateway Service selects the gateway pods');
  for (const p of svc.spec.ports as Obj[]) {
    t.ok(container.ports.some((c: Obj) => c.name === p.targetPort || c.containerPort === p.targetPort), `targetPort ${p.targetPort} is a container port`);
  }
  const mount = container.volumeMounts.find((m: Obj) => m.name === 'config');
  const volume = (pod.volumes as Obj[]).find((v) => v.name === mount.name);
  t.equal(volume?.configMap?.name, cm.metadata.name, 'the config volume is the ConfigMap');
});

t.test('the gateways share routing knowledge through the Redis the manifests run', async (t) => {
  t.equal(config.cluster?.backend, 'redis', 'cluster.backend: redis');
  const url = new URL(config.cluster.url as string);
  const svc = byKind('Service', 'infergate-redis')!;
  t.equal(url.hostname, svc.metadata.name, 'cluster.url names the Redis Service');
  t.equal(Number(url.port), svc.spec.ports[0].port, 'and its port');
  const redis = byKind('Deployment', 'infergate-redis')!;
  const labels = redis.spec.template.metadata.labels as Obj;
  t.ok(Object.entries(svc.spec.selector as Obj).every(([k, v]) => labels[k] === v), 'the Service selects the Redis pod');
  const c = redis.spec.template.spec.containers[0] as Obj;
  t.ok(c.ports.some((p: Obj) => p.name === svc.spec.ports[0].targetPort), 'the Service\'s targetPort is the container\'s');
  t.notOk(selects(svc.spec.selector), 'the gateway Service and Redis select different pods');
});

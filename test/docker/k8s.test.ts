// docker/k8s/infergate.yaml holds together: its embedded config passes check-config, the probes reach the
// admin port that config names, and the shutdown timeline fits (preStop + drain < grace period). No
// cluster here: this reads the manifests and runs the real CLI on the config, as a user's CI would.
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, parse } from 'yaml';
import { parseDuration } from '../../src/common/units.js';
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

t.test('the manifests parse and hold a ConfigMap, a Deployment and the Services', async (t) => {
  t.ok(configMap && deployment && container, 'ConfigMap, Deployment, a container');
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

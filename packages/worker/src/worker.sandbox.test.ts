// The worker against the real sandbox cluster: the bundle run as a pod by the simulated kubelet on a
// simulated node, with its real projected token, the node's resolv.conf and the cluster network
// (kube-apiserver behind the `kubernetes` Service, the cluster DNS and its pods). Faults are per
// node or per namespace, so this file can run beside any other.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@kube-node-ready/sandbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addNode, core, deleteNode, sandbox, waitFor } from '../../../test/sandbox.js';
import { NO_RBAC_SA, WORKER_SA, resolveInSandbox, runWorkerPod, startBlackholePod, workerNamespace, type WorkerNamespace } from './testing/sandbox-worker.js';

const ALL = ['dns', 'api', 'tcp', 'service', 'podnet'];
const nodes: string[] = [];
let ns: WorkerNamespace;
let healthy: string;

beforeAll(async () => {
  ns = await workerNamespace('worker');
  healthy = await addNode({ prefix: 'worker-ok' });
  nodes.push(healthy);
});

afterAll(async () => {
  await ns?.cleanup();
  for (const n of nodes) await deleteNode(n);
});

/** The exit code docs/worker.md gives for the row whose meaning matches `meaning`. */
function documentedExitCode(meaning: RegExp): number {
  const doc = readFileSync(join(repoRoot(), 'docs', 'worker.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Exit codes'));
  const row = section.split('\n').find((l) => /^\|\s*\d+\s*\|/.test(l) && meaning.test(l));
  if (!row) throw new Error(`docs/worker.md has no exit code row matching ${meaning}`);
  return Number(/^\|\s*(\d+)/.exec(row)![1]);
}

describe('worker pod in the sandbox', () => {
  it('passes all five checks on a healthy node with its real token: exit 0, summary ok, every check did the real thing', async () => {
    const L = sandbox().layout;
    const run = await runWorkerPod({ namespace: ns.namespace, node: healthy, args: ['--checks', ALL.join(','), '--timeout', '10s'] });
    expect(run.exitCode, run.describe()).toBe(0);
    expect(run.exitCode).toBe(documentedExitCode(/every enabled check passed/));
    expect(run.summary.ok).toBe(true);
    expect(run.summary.node).toBe(healthy);
    expect(run.summary.error).toBeUndefined();
    expect(run.summary.checks.map((c) => [c.name, c.ok, c.error])).toEqual(ALL.map((name) => [name, true, undefined]));

    // dns: the pod's resolv.conf nameserver (the cluster DNS ClusterIP) answered the kubernetes
    // Service's ClusterIP, compared with the API.
    expect(run.details('dns')).toMatchObject({
      nameservers: [`${L.clusterDnsIp}:53`],
      lookups: [
        {
          server: `${L.clusterDnsIp}:53`,
          name: 'kubernetes.default.svc.cluster.local',
          rcode: 'NOERROR',
          answers: [L.kubernetesServiceIp],
          expected: [L.kubernetesServiceIp],
          transport: 'udp',
        },
      ],
    });
    // api: through the kubernetes Service, TLS verified, /version, an authorized read.
    expect(run.details('api')).toMatchObject({ server: `${L.kubernetesServiceIp}:443`, version: sandbox().state.kubernetesVersion });
    expect(run.details('api').authenticatedMs).toEqual(expect.any(Number));
    // tcp: the kube-proxy path and the direct path to the API server endpoint.
    expect(run.details('tcp').connections).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ via: 'kubernetes Service', address: `${L.kubernetesServiceIp}:443`, ok: true }),
        expect.objectContaining({ via: 'API endpoint', address: `${L.advertiseAddress}:${L.apiPort}`, ok: true }),
      ]),
    );
    // service: default/kubernetes and the cluster DNS Service, both with ready endpoints.
    const services = run.details('service').services as Array<Record<string, unknown>>;
    expect(services.map((s) => s.service)).toEqual(['default/kubernetes', 'kube-system/kube-dns']);
    for (const s of services) expect(s.readyEndpoints).toBeGreaterThan(0);
    // podnet: each DNS pod IP asked directly (not the ClusterIP), both answered.
    const pods = run.details('podnet').pods as Array<Record<string, unknown>>;
    expect(pods.map((p) => [p.address, p.ok])).toEqual(L.dnsPodIps.map((ip) => [`${ip}:53`, true]));
  });

  it('with a ServiceAccount without RBAC: api and service fail with a 403 naming the ServiceAccount; exit 1', async () => {
    const run = await runWorkerPod({
      namespace: ns.namespace,
      node: healthy,
      serviceAccountName: NO_RBAC_SA,
      args: ['--checks', ALL.join(','), '--timeout', '10s'],
    });
    expect(run.exitCode, run.describe()).toBe(1);
    expect(run.exitCode).toBe(documentedExitCode(/at least one check failed/));
    expect(run.summary.ok).toBe(false);
    const user = `User "system:serviceaccount:${ns.namespace}:${NO_RBAC_SA}"`;

    const api = run.check('api');
    expect(api.ok).toBe(false);
    expect(api.error).toContain('GET /api/v1/namespaces/default/services/kubernetes: 403 Forbidden');
    expect(api.error).toContain(`${user} cannot get resource "services"`);
    expect(api.error).toContain("the worker's ServiceAccount needs get on services");

    const service = run.check('service');
    expect(service.ok).toBe(false);
    expect(service.error).toContain('Service default/kubernetes: GET ');
    expect(service.error).toContain('403 Forbidden');
    expect(service.error).toContain(user);

    // The token itself is fine (TLS and /version passed); DNS needs no RBAC and only skips the comparison.
    expect(run.details('api').version).toBe(sandbox().state.kubernetesVersion);
    expect(run.check('dns')).toMatchObject({ ok: true });
    const lookup = (run.details('dns').lookups as Array<Record<string, unknown>>)[0];
    expect(lookup?.notCompared).toContain('403 Forbidden');
    expect(run.check('podnet').error).toMatch(/^cannot read the EndpointSlices of Service kube-system\/kube-dns: .*403 Forbidden.*cannot list resource "endpointslices"/);
    expect(run.check('tcp').error).toContain('cannot read Service default/kubernetes: ');
  });

  // The node's path to the cluster DNS address is broken (its kube-proxy rules missing or wrong);
  // the pods' nameserver is the cluster DNS address, as on every node, so the failure names the
  // same target healthy nodes pass against.
  describe('a node whose path to the cluster DNS is broken', () => {
    // A check timeout far below the overall one: a run that ends near 2 s was ended by the dns check's own deadline.
    const DNS_ARGS = ['--checks', ALL.join(','), '--check-timeout', '2s', '--timeout', '20s'];
    const name = 'kubernetes.default.svc.cluster.local';

    async function onNode(dns: 'dead' | 'blackhole' | 'lying') {
      const node = await addNode({ prefix: `worker-dns-${dns}`, faults: { dns } });
      nodes.push(node);
      const run = await runWorkerPod({ namespace: ns.namespace, node, args: DNS_ARGS });
      expect(run.exitCode, run.describe()).toBe(1);
      expect(run.summary.ok).toBe(false);
      // Only what depends on the node's nameserver fails: the API, TCP paths and pod network are fine.
      for (const check of ['api', 'tcp', 'podnet']) expect(run.check(check), `${check}\n${run.describe()}`).toMatchObject({ ok: true });
      expect(run.check('dns').ok).toBe(false);
      expect(run.check('service').ok).toBe(false);
      return run;
    }

    it('dead (sent where nothing listens): dns fails at once with connection refused', async () => {
      const server = `${sandbox().layout.clusterDnsIp}:53`;
      const run = await onNode('dead');
      expect(run.check('dns').error).toBe(`${name} @${server}: connection refused: nothing listens on udp ${server}`);
      expect(run.check('dns').durationMs).toBeLessThan(1500); // not the 2 s timeout
      // Stated once, by dns; service says so once for both Services instead of repeating it.
      expect(run.check('service').error).toBe('DNS not compared for Services default/kubernetes, kube-system/kube-dns: no nameserver answered (the dns check says why)');
    });

    it('lying (sent to a server that answers another address): dns fails with the ClusterIP mismatch', async () => {
      const L = sandbox().layout;
      const run = await onNode('lying');
      expect(run.check('dns').error).toBe(
        `${name} @${L.clusterDnsIp}:53: answered ${L.lyingAnswer} but Service default/kubernetes has address ${L.kubernetesServiceIp}`,
      );
      expect(run.check('service').error).toContain(
        `Service default/kubernetes: DNS and API disagree: ${name} answered ${L.lyingAnswer} but Service default/kubernetes has address ${L.kubernetesServiceIp}`,
      );
    });

    it('blackhole (sent to a server that never answers): dns times out at its check timeout and the pod ends long before its deadlines', async () => {
      const server = `${sandbox().layout.clusterDnsIp}:53`;
      const run = await onNode('blackhole');
      const dns = run.check('dns');
      expect(dns.error).toBe(`${name} @${server}: timeout: no answer over udp within 2s (dns check timeout)`);
      // Bounds with room for a loaded machine, far from the 20 s overall timeout and the 60 s pod deadline.
      expect(dns.durationMs).toBeGreaterThanOrEqual(1900);
      expect(dns.durationMs).toBeLessThan(5000);
      expect(run.summary.durationMs).toBeLessThan(6000);
      const t = run.pod.status!.containerStatuses![0]!.state!.terminated!;
      expect(t.reason).toBe('Error');
      expect(new Date(t.finishedAt!).getTime() - new Date(t.startedAt!).getTime()).toBeLessThanOrEqual(10_000);
      expect(run.pod.status?.reason).not.toBe('DeadlineExceeded');
    });
  });

  it('--service pointing at Services without ready endpoints fails service, naming each; a ready one passes', async () => {
    const namespace = ns.namespace;
    const discovery = sandbox().kc.makeApiClient((await import('@kube-node-ready/sandbox')).k8s.DiscoveryV1Api);
    const svc = async (name: string) =>
      core().createNamespacedService({ namespace, body: { metadata: { name }, spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } } });
    const slice = (service: string, ready: boolean) =>
      discovery.createNamespacedEndpointSlice({
        namespace,
        body: {
          metadata: { name: `${service}-1`, labels: { 'kubernetes.io/service-name': service } },
          addressType: 'IPv4',
          endpoints: [{ addresses: ['10.244.250.1'], conditions: { ready } }],
          ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
        },
      });
    await svc('not-ready');
    await slice('not-ready', false);
    await svc('no-slice');
    const ready = await svc('ready');
    await slice('ready', true);
    // The sandbox DNS learns Services from a watch: wait until the ready one resolves.
    await waitFor(async () => {
      const a = await resolveInSandbox(`ready.${namespace}.svc.cluster.local`, sandbox().layout.clusterDnsIp);
      return Array.isArray(a) && a[0] === ready.spec?.clusterIP;
    }, 'the cluster DNS to serve the ready Service');

    const run = await runWorkerPod({
      namespace,
      node: healthy,
      args: ['--checks', 'service', '--service', `${namespace}/not-ready,${namespace}/no-slice,${namespace}/ready`, '--check-timeout', '3s'],
    });
    expect(run.exitCode, run.describe()).toBe(1);
    expect(run.summary.checks.map((c) => c.name)).toEqual(['service']);
    const error = run.check('service').error ?? '';
    expect(error).toContain(`Service ${namespace}/not-ready: no ready endpoints (1 endpoint(s), none ready)`);
    expect(error).toContain(`Service ${namespace}/no-slice: no ready endpoints (no EndpointSlice)`);
    expect(error).not.toContain(`${namespace}/ready:`);
    expect(error).not.toContain('kube-dns');
    const services = run.details('service').services as Array<Record<string, unknown>>;
    expect(services.map((s) => s.service)).toEqual([`${namespace}/not-ready`, `${namespace}/no-slice`, `${namespace}/ready`, 'kube-system/kube-dns']);
    expect(services.find((s) => s.service === `${namespace}/ready`)).toMatchObject({ readyEndpoints: 1, dns: { answers: [ready.spec?.clusterIP] } });
  });

  it('--tcp-targets: a closed port fails with connection refused, a port that never completes a connection with timeout', async () => {
    const L = sandbox().layout;
    const hole = await startBlackholePod(ns.namespace, healthy);
    try {
      const closed = `${L.advertiseAddress}:1`;
      const silent = `${hole.host}:${hole.port}`;
      const run = await runWorkerPod({
        namespace: ns.namespace,
        node: healthy,
        args: ['--checks', 'tcp', '--tcp-targets', `${closed},${silent}`, '--check-timeout', '2s', '--timeout', '20s'],
      });
      expect(run.exitCode, run.describe()).toBe(1);
      const tcp = run.check('tcp');
      expect(tcp.ok).toBe(false);
      expect(tcp.error).toContain(`target ${closed}: connection refused`);
      expect(tcp.error).toContain(`target ${silent}: timeout: no connection within 2s (tcp check timeout)`);
      expect(tcp.error).not.toContain('kubernetes Service');
      expect(tcp.error).not.toContain('API endpoint');
      expect(tcp.durationMs).toBeGreaterThanOrEqual(1900);
      expect(tcp.durationMs).toBeLessThan(5000); // the 2 s tcp check timeout, not the 20 s overall one
      const connections = run.details('tcp').connections as Array<Record<string, unknown>>;
      expect(connections.map((c) => [c.via, c.address, c.ok])).toEqual([
        ['kubernetes Service', `${L.kubernetesServiceIp}:443`, true],
        ['API endpoint', `${L.advertiseAddress}:${L.apiPort}`, true],
        ['target', closed, false],
        ['target', silent, false],
      ]);
    } finally {
      await core().deleteNamespacedPod({ name: hole.name, namespace: ns.namespace }).catch(() => undefined);
    }
  });

  it('a configuration error exits 2 with the error in the summary and nothing checked', async () => {
    for (const [args, expected] of [
      [['--check-timeout', '5x'], 'configuration error: --check-timeout: expected a duration greater than 0 like "500ms", "5s" or "1m", got "5x"'],
      [['--checks', 'dns,pings'], 'configuration error: --checks'],
      [['--no-such-flag'], 'configuration error: '],
    ] as const) {
      const run = await runWorkerPod({ namespace: ns.namespace, node: healthy, serviceAccountName: WORKER_SA, args: [...args] });
      expect(run.exitCode, run.describe()).toBe(2);
      expect(run.exitCode).toBe(documentedExitCode(/configuration error/));
      expect(run.summary).toMatchObject({ v: 1, ok: false, checks: [] });
      expect(run.summary.error).toMatch(new RegExp(`^${expected.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      if (args[0] === '--no-such-flag') expect(run.summary.error).toContain('--no-such-flag');
      if (args[0] === '--checks') expect(run.summary.error).toContain('"pings"');
      expect(run.text.join('\n')).toContain(`error: ${run.summary.error!.slice('configuration error: '.length)}`);
    }
  });
});

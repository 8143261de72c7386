// The Helm chart against the sandbox's real API server: the rendered manifests pass server-side
// validation, the controller pods pass the `restricted` Pod Security Standard, and a release
// installs, upgrades (a changed config changes the pod template) and uninstalls without leftovers.
// The end-to-end run of the controller pods under the chart's RBAC is at the end of this file.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { k8s } from '@kube-node-ready/sandbox';
import { pino } from 'pino';
import { realClock } from '../../packages/controller/src/clock.js';
import { ConfigMapLedger } from '../../packages/controller/src/controllers/node/remediation/ledger.js';
import { KubeClient } from '../../packages/controller/src/kube/client.js';
import { addNode, core, createNamespace, deleteNode, sandbox, serviceAccountKubeConfig, uniqueName, waitFor } from '../sandbox.js';
import { CRD_SOURCES, loadCrd } from './crds.js';
import { ALL_FEATURES, CHART_DIR, REPO_ROOT, find, helm, kubectl, template, type KubeObject } from './helm.js';

const run = promisify(execFile);

/** The Prometheus Operator kinds: validated only when their CRDs could be installed (see beforeAll). */
const MONITORING_KINDS = new Set(['ServiceMonitor', 'PrometheusRule']);
let monitoringCrds: 'installed' | string = 'not tried';

/** A free TCP port on 127.0.0.1. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** `promtool check metrics` (reads the exposition from stdin; exit 0 with no complaints). */
function promtoolCheckMetrics(text: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
    child.stdin.end(text);
  });
}

const manifest = (objects: KubeObject[]) => objects.map((o) => `---\n${toYaml(o)}`).join('');

/** Runs helm against the sandbox. */
const helmKube = (args: string[]) => helm([...args, '--kubeconfig', sandbox().state.kubeconfig]);

beforeAll(async () => {
  // ServiceMonitor and PrometheusRule CRDs from the prometheus-operator Go module (through the Go
  // module proxy). They are cluster-wide and nothing else in the test suite uses this API group,
  // so they are applied once and left in place (re-applying is a no-op).
  const crds = await Promise.all([loadCrd(CRD_SOURCES.serviceMonitor), loadCrd(CRD_SOURCES.prometheusRule)]);
  const skipped = crds.find((c) => 'skip' in c);
  if (skipped && 'skip' in skipped) {
    monitoringCrds = skipped.skip;
    return;
  }
  for (const c of crds) {
    if (!('crd' in c)) continue;
    const applied = await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=knr-chart-test'], c.text);
    if (applied.code !== 0) throw new Error(`installing ${c.crd.metadata.name}: ${applied.stderr}`);
    const established = await kubectl(['wait', '--for=condition=Established', '--timeout=60s', `crd/${c.crd.metadata.name}`]);
    if (established.code !== 0) throw new Error(`${c.crd.metadata.name} not established: ${established.stderr}`);
  }
  monitoringCrds = 'installed';
}, 600_000);

describe('rendered manifests against the API server (server-side dry run)', () => {
  for (const [name, values] of [
    ['default values', {}],
    ['every optional feature on', ALL_FEATURES],
  ] as const) {
    it(`${name}: every object is accepted`, async (ctx) => {
      const namespace = await createNamespace('chart');
      const release = uniqueName('knr');
      let objects = await template(values, { namespace, release });
      if (monitoringCrds !== 'installed') {
        // Skipped kinds, explicitly: their CRDs could not be fetched (reason in the annotation).
        ctx.annotate(`ServiceMonitor and PrometheusRule not validated: ${monitoringCrds}`);
        objects = objects.filter((o) => !MONITORING_KINDS.has(o.kind));
      }
      // The chart's worker Namespace is created for real: a dry run of the objects in it needs it.
      const namespaces = objects.filter((o) => o.kind === 'Namespace');
      expect(namespaces.map((o) => o.metadata.name)).toEqual([`${release}-kube-node-ready-worker`]);
      const created = await kubectl(['apply', '--server-side', '--field-manager=helm'], manifest(namespaces));
      expect(created.code, created.stderr).toBe(0);
      try {
        const result = await kubectl(['apply', '--server-side', '--dry-run=server', '--field-manager=helm'], manifest(objects.filter((o) => o.kind !== 'Namespace')));
        expect(result.code, result.stderr).toBe(0);
        for (const o of objects.filter((x) => x.kind !== 'Namespace')) expect(result.stdout).toContain(`${o.metadata.name} serverside-applied (server dry run)`);
      } finally {
        await kubectl(['delete', 'namespace', `${release}-kube-node-ready-worker`, '--wait=false']);
      }
      if (values === ALL_FEATURES && monitoringCrds === 'installed') {
        expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(['ServiceMonitor', 'PrometheusRule']));
      }
    });
  }

  it('the API server rejects a broken object (the dry run does validate)', async () => {
    const namespace = await createNamespace('chart');
    const objects = await template({}, { namespace, release: uniqueName('knr') });
    const pdb = structuredClone(find(objects, 'PodDisruptionBudget')) as KubeObject & { spec: Record<string, unknown> };
    pdb.spec.maxUnavailable = 'one';
    const result = await kubectl(['apply', '--server-side', '--dry-run=server', '--field-manager=helm'], manifest([pdb]));
    expect(result.code).not.toBe(0);
  });
});

describe('Pod Security Standard "restricted"', () => {
  it('the controller pod template is admitted in a namespace that enforces it', async () => {
    const namespace = await createNamespace('psa');
    await core().patchNamespace(
      { name: namespace, body: { metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    const objects = await template({}, { namespace });
    // The ServiceAccount admission plugin wants the pod's ServiceAccount to exist.
    await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'kube-node-ready-controller' } } });
    const template_ = (find(objects, 'Deployment').spec as { template: { metadata: Record<string, unknown>; spec: k8s.V1PodSpec } }).template;
    const pod = (spec: k8s.V1PodSpec): KubeObject => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: uniqueName('controller'), namespace }, spec } as unknown as KubeObject);
    const ok = await kubectl(['apply', '--server-side', '--dry-run=server', '--field-manager=test'], manifest([pod(template_.spec)]));
    expect(ok.code, ok.stderr).toBe(0);
    // The namespace does enforce: the same pod without its security context is refused.
    const loose = structuredClone(template_.spec);
    delete loose.securityContext;
    for (const c of loose.containers) delete c.securityContext;
    const refused = await kubectl(['apply', '--server-side', '--dry-run=server', '--field-manager=test'], manifest([pod(loose)]));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('violates PodSecurity "restricted:latest"');
  });
});

describe('helm install, upgrade, uninstall', () => {
  it('installs, rolls the pod template on a config change, and uninstalls without leftovers', async () => {
    const namespace = await createNamespace('helm');
    const release = uniqueName('knr');
    const values = monitoringCrds === 'installed' ? ALL_FEATURES : { ...ALL_FEATURES, serviceMonitor: { enabled: false }, prometheusRule: { enabled: false } };
    const dir = mkdtempSync(join(tmpdir(), 'knr-helm-values-'));
    try {
      writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
      const install = await helmKube(['install', release, CHART_DIR, '--namespace', namespace, '--values', join(dir, 'values.json')]);
      expect(install.code, install.stderr).toBe(0);
      expect(install.stdout).toContain('startupTaints'); // NOTES.txt
      const apps = sandbox().kc.makeApiClient(k8s.AppsV1Api);
      const deploymentName = `${release}-kube-node-ready-controller`;
      const before = await apps.readNamespacedDeployment({ name: deploymentName, namespace });
      const checksum = (d: k8s.V1Deployment) => d.spec?.template.metadata?.annotations?.['checksum/config'];

      // The remediation ledger (remediation is on in ALL_FEATURES) is part of the release, without
      // data. The controller, with its ServiceAccount's rights, reads it and records a deletion in it
      // as it would before deleting a node.
      const ledgerName = 'kube-node-ready-controller-remediation';
      const workerNamespace = `${release}-kube-node-ready-worker`;
      expect((await core().readNamespacedConfigMap({ name: ledgerName, namespace: workerNamespace })).data).toBeUndefined();
      const asController = await serviceAccountKubeConfig(namespace, `${release}-kube-node-ready-controller`);
      const ledger = new ConfigMapLedger({ kube: new KubeClient(asController, { qps: 50, burst: 100, clock: realClock, log: pino({ level: 'silent' }) }), clock: realClock, namespace: workerNamespace, name: ledgerName });
      expect(await ledger.load()).toEqual([]);
      expect(await ledger.record({ uid: 'uid-1', node: 'node-1', target: 'NodeClaim claim-1', at: Date.now() }, 5)).toMatchObject({ ok: true });

      const same = await helmKube(['upgrade', release, CHART_DIR, '--namespace', namespace, '--reuse-values', '--set', 'controller.podLabels.extra=label']);
      expect(same.code, same.stderr).toBe(0);
      const unchanged = await apps.readNamespacedDeployment({ name: deploymentName, namespace });
      expect(checksum(unchanged)).toBe(checksum(before));

      const upgrade = await helmKube(['upgrade', release, CHART_DIR, '--namespace', namespace, '--reuse-values', '--set', 'config.reconciliation.maxRetries=7']);
      expect(upgrade.code, upgrade.stderr).toBe(0);
      const after = await apps.readNamespacedDeployment({ name: deploymentName, namespace });
      expect(checksum(after)).not.toBe(checksum(before));
      const configMap = await core().readNamespacedConfigMap({ name: `${release}-kube-node-ready-config`, namespace });
      expect(configMap.data?.['config.yaml']).toContain('maxRetries: 7');
      // The worker ConfigMap belongs to the release too, so uninstall removes it.
      const workerConfig = await core().readNamespacedConfigMap({ name: 'kube-node-ready-worker', namespace: workerNamespace });
      expect(workerConfig.metadata?.labels?.['app.kubernetes.io/instance']).toBe(release);
      // Two upgrades later the controller's entry is still there (Helm patches only what it renders),
      // and the ledger still belongs to the release, so uninstall removes it (checked below).
      expect((await ledger.load()).map((e) => e.uid)).toEqual(['uid-1']);
      expect((await core().readNamespacedConfigMap({ name: ledgerName, namespace: workerNamespace })).metadata?.labels?.['app.kubernetes.io/instance']).toBe(release);

      const uninstall = await helmKube(['uninstall', release, '--namespace', namespace, '--wait']);
      expect(uninstall.code, uninstall.stderr).toBe(0);
      const kinds = ['namespaces', 'deployments', 'configmaps', 'services', 'serviceaccounts', 'roles', 'rolebindings', 'poddisruptionbudgets', 'clusterroles', 'clusterrolebindings', 'validatingadmissionpolicies', 'validatingadmissionpolicybindings'];
      if (monitoringCrds === 'installed') kinds.push('servicemonitors', 'prometheusrules');
      const left = await kubectl(['get', kinds.join(','), '-A', '-l', `app.kubernetes.io/instance=${release}`, '-o', 'name']);
      expect(left.code, left.stderr).toBe(0);
      expect(left.stdout.trim()).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The controller (in this process, from source) authenticated as the chart's controller
// ServiceAccount: the chart's RBAC lets it elect a leader, write the worker ConfigMap, launch a
// worker pod, write the node's NodeVerification and condition and record Events, with no 403 anywhere.
// Its /metrics passes `promtool check metrics` and has every series the alerts use.

describe('the controller under the chart\'s RBAC', () => {
  it('runs a verification with the controller ServiceAccount\'s token; /metrics is valid and has what the alerts use', async () => {
    const namespace = await createNamespace('rbac');
    const id = namespace.split('-').pop() as string;
    const release = `knr-${id}`;
    const taint = { key: `rbac-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' };
    const values = {
      image: { repository: 'kube-node-ready', tag: 'dev' },
      // The chart's own controller pods must not run: kube-controller-manager would start them and
      // one of them could take the Lease before the controller this test runs.
      controller: { nodeSelector: { [`rbac-${id}.kube-node-ready.io/no-such-node`]: 'true' } },
      config: {
        worker: { priorityClassName: '', timeout: '10s', scheduleTimeout: '10s', startTimeout: '10s', serviceAccountName: `${release}-worker`, configMapName: `${release}-worker` },
        reconciliation: { initialBackoff: '1s', maxBackoff: '2s', maxRetries: 1 },
        nodeManagement: { taints: [taint], verifiedLabel: { key: `rbac-${id}.kube-node-ready.io/verified`, value: 'true' }, condition: { type: `rbac-${id}.kube-node-ready.io/NetworkVerified` } },
        leaderElection: { leaseName: release, leaseDuration: '4s', renewDeadline: '3s', retryPeriod: '1s' },
      },
    };
    const dir = mkdtempSync(join(tmpdir(), 'knr-rbac-'));
    const stop = new AbortController();
    let node: string | undefined;
    let finished: Promise<number> | undefined;
    try {
      writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
      const install = await helmKube(['install', release, CHART_DIR, '--namespace', namespace, '--values', join(dir, 'values.json')]);
      expect(install.code, install.stderr).toBe(0);

      // The rendered configuration, as the pod would mount it; metrics on a free loopback port.
      const rendered = await core().readNamespacedConfigMap({ name: `${release}-kube-node-ready-config`, namespace });
      const port = await freePort();
      writeFileSync(join(dir, 'config.yaml'), rendered.data?.['config.yaml'] ?? '');
      // A kubeconfig with the controller ServiceAccount's token instead of the admin's credentials.
      const token = await core().createNamespacedServiceAccountToken({
        name: `${release}-kube-node-ready-controller`,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      const admin = sandbox().kc;
      const cluster = admin.getCurrentCluster();
      if (!cluster) throw new Error('the sandbox kubeconfig has no cluster');
      writeFileSync(
        join(dir, 'kubeconfig'),
        toYaml({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [{ name: 'sandbox', cluster: { server: cluster.server, ...(cluster.caData ? { 'certificate-authority-data': cluster.caData } : { 'certificate-authority': cluster.caFile }) } }],
          users: [{ name: 'controller', user: { token: token.status?.token } }],
          contexts: [{ name: 'controller', context: { cluster: 'sandbox', user: 'controller' } }],
          'current-context': 'controller',
        }),
      );
      const { runController } = await import('@kube-node-ready/controller');
      const output: string[] = [];
      finished = runController(
        ['--config', join(dir, 'config.yaml'), '--kubeconfig', join(dir, 'kubeconfig'), '--metrics-bind-address', `127.0.0.1:${port}`],
        { POD_NAMESPACE: namespace, HOSTNAME: `${release}-controller` },
        { signal: stop.signal, stdout: (l) => output.push(l), stderr: (l) => output.push(l) },
      );
      const forbidden = () => output.filter((l) => /forbidden|\b403\b/i.test(l));
      // Fail at once, with its output, if the controller exits (bad config, unreachable API server).
      const exited = finished.then((code) => {
        throw new Error(`the controller exited with code ${code}: ${output.slice(-5).join(' | ')}`);
      });
      exited.catch(() => undefined);

      const coordination = sandbox().kc.makeApiClient(k8s.CoordinationV1Api);
      await Promise.race([
        waitFor(
          async () => (await coordination.readNamespacedLease({ name: release, namespace }).catch(() => undefined))?.spec?.holderIdentity?.startsWith(`${release}-controller_`),
          'the leader Lease held by this controller',
          30_000,
        ),
        exited,
      ]);
      // The worker ConfigMap, in the chart's own worker namespace.
      await waitFor(async () => core().readNamespacedConfigMap({ name: `${release}-worker`, namespace: `${release}-kube-node-ready-worker` }).catch(() => undefined), 'the worker ConfigMap', 30_000);

      node = await addNode({ prefix: `rbac-${id}`, taints: [taint] });
      const nodeName = node;
      // The controller launches a worker pod, records the attempt in the node's NodeVerification
      // (create, status update) and its verdict on the node (patch, status patch, Events). Whether
      // the worker passes does not matter here.
      const verifications = admin.makeApiClient(k8s.CustomObjectsApi);
      const progress = async () =>
        ((await verifications.getClusterCustomObject({ group: 'kube-node-ready.io', version: 'v1alpha1', plural: 'nodeverifications', name: nodeName }).catch(() => undefined)) as { status?: { attempt?: number; phase?: string } } | undefined)?.status;
      await waitFor(async () => {
        const n = await core().readNode({ name: nodeName });
        return ((await progress())?.attempt ?? 0) >= 1 && n.status?.conditions?.some((c) => c.type === values.config.nodeManagement.condition.type);
      }, `progress in the NodeVerification and the condition on ${nodeName} (output: ${output.slice(-5).join(' | ')})`, 60_000);
      await waitFor(async () => (await core().listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${nodeName}` })).items.length > 0, 'an Event on the node', 30_000);
      expect(forbidden()).toEqual([]);

      // The per-node series follow the writes the test waited for (they are set after the reconcile).
      const metrics = await waitFor(
        async () => {
          const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
          return new RegExp(`^kube_node_ready_verification_status\\{[^}]*node="${nodeName}"`, 'm').test(text) ? text : undefined;
        },
        `the metrics of ${nodeName}`,
        30_000,
        250,
      );
      // Our own families pass promtool's lint outright; prom-client's default Node.js collectors
      // have known complaints (gauges named *_total), which are all the full output may show.
      const ours = metrics.split('\n').filter((l) => /^(# (HELP|TYPE) )?kube_node_ready_/.test(l)).join('\n') + '\n';
      const own = await promtoolCheckMetrics(ours);
      expect(own.code, own.output).toBe(0);
      const all = await promtoolCheckMetrics(metrics);
      for (const complaint of all.output.split('\n').filter(Boolean)) expect(complaint).toMatch(/^(nodejs|process)_\w+ /);
      for (const name of ['kube_node_ready_verification_status', 'kube_node_ready_verifications_total', 'kube_node_ready_leader', 'kube_node_ready_controller_healthy', 'kube_node_ready_remediation_blocked']) {
        expect(metrics, name).toMatch(new RegExp(`^${name}(\\{|\\s)`, 'm'));
      }
      expect(metrics).toMatch(new RegExp(`^kube_node_ready_verification_status\\{[^}]*node="${nodeName}"`, 'm'));
      expect(metrics).toMatch(/^kube_node_ready_leader 1$/m);
    } finally {
      stop.abort();
      if (finished) await finished;
      if (node) await deleteNode(node);
      await helmKube(['uninstall', release, '--namespace', namespace]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---------------------------------------------------------------------------------------------
// End to end: kube-controller-manager runs the chart's Deployment, whose pods run on simulated nodes
// as real processes (the image is mapped to dist/kube-node-ready.mjs), pass their probes, authenticate with the chart's ServiceAccount token under
// the chart's RBAC, elect a leader and open a tainted node. A missing RBAC rule makes it fail.

async function controllerEntryPoint(): Promise<string | undefined> {
  const controller = (await import('@kube-node-ready/controller')) as Record<string, unknown>;
  if (typeof controller.runController !== 'function') return 'packages/controller/src/index.ts does not export runController yet';
  const bundle = join(REPO_ROOT, 'dist', 'kube-node-ready.mjs');
  if (!existsSync(bundle)) return 'dist/kube-node-ready.mjs is not built';
  const help = await run(process.execPath, [bundle, 'controller', '--help']).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  if (!help.stdout.includes('kube-node-ready controller')) return 'the kube-node-ready CLI has no controller subcommand yet';
  return undefined;
}

const notReady = await controllerEntryPoint();

/** The last lines the controller pods wrote (the simulated kubelet keeps them in <sandbox>/pods/<uid>/). */
async function controllerLogs(namespace: string, pods: string[]): Promise<string> {
  const out: string[] = [];
  for (const name of pods) {
    const pod = await core().readNamespacedPod({ name, namespace }).catch(() => undefined);
    const file = join(sandbox().layout.dir, 'pods', pod?.metadata?.uid ?? '-', 'controller.log');
    const lines = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').slice(-5) : ['(no log)'];
    out.push(`--- ${name} (${pod?.status?.phase ?? 'gone'}):`, ...lines);
  }
  return out.join('\n');
}

describe('helm install end to end (controller pods on simulated nodes)', () => {
  const nodes: string[] = [];
  afterAll(async () => {
    await Promise.all(nodes.map((n) => deleteNode(n)));
  });

  it.skipIf(notReady !== undefined)(`verifies a tainted node with the chart's RBAC${notReady ? ` (skipped: ${notReady})` : ''}`, async () => {
    const namespace = await createNamespace('e2e');
    await core().patchNamespace(
      { name: namespace, body: { metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    const id = namespace.split('-').pop() as string;
    const release = `knr-${id}`;
    // Everything this release acts on is unique to it, so tests running beside it are untouched.
    const taint = { key: `e2e-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' };
    const verifiedLabel = { key: `e2e-${id}.kube-node-ready.io/verified`, value: 'true' };
    const placement = { [`e2e-${id}.kube-node-ready.io/controller`]: 'true' };
    const values = {
      image: { repository: 'kube-node-ready', tag: 'dev' },
      controller: { nodeSelector: placement, priorityClassName: '' },
      config: {
        worker: { priorityClassName: '', timeout: '20s', scheduleTimeout: '20s', startTimeout: '20s', serviceAccountName: `${release}-worker`, configMapName: `${release}-worker` },
        reconciliation: { initialBackoff: '1s', maxBackoff: '4s', resyncInterval: '30s' },
        nodeManagement: { taints: [taint], verifiedLabel, condition: { type: `e2e-${id}.kube-node-ready.io/NetworkVerified` } },
        leaderElection: { leaseName: release, leaseDuration: '4s', renewDeadline: '3s', retryPeriod: '1s' },
      },
    };
    // Two untainted nodes for the two controller replicas (spread one per node), one tainted node to verify.
    for (let i = 0; i < 2; i++) nodes.push(await addNode({ prefix: `e2e-ctl-${id}`, labels: placement }));
    const dir = mkdtempSync(join(tmpdir(), 'knr-e2e-'));
    const podNames: string[] = [];
    try {
      writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
      const install = await helmKube(['install', release, CHART_DIR, '--namespace', namespace, '--values', join(dir, 'values.json')]);
      expect(install.code, install.stderr).toBe(0);

      // kube-controller-manager runs the chart's Deployment: its ReplicaSet creates the pods, the
      // scheduler spreads them over the two placement nodes, and the simulated kubelet runs them.
      const apps = sandbox().kc.makeApiClient(k8s.AppsV1Api);
      const deploymentName = `${release}-kube-node-ready-controller`;
      const deployment = await waitFor(
        async () => {
          const d = await apps.readNamespacedDeployment({ name: deploymentName, namespace });
          return (d.status?.availableReplicas ?? 0) >= (d.spec?.replicas ?? 1) ? d : undefined;
        },
        `the Deployment ${deploymentName} to be available`,
        90_000,
        500,
      ).catch(async (err: Error) => {
        const pods = await core().listNamespacedPod({ namespace }).catch(() => ({ items: [] as k8s.V1Pod[] }));
        throw new Error(`${err.message}\n${await controllerLogs(namespace, pods.items.map((p) => p.metadata!.name!))}`, { cause: err });
      });
      const selector = Object.entries(deployment.spec?.selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
      const pods = (await core().listNamespacedPod({ namespace, labelSelector: selector })).items;
      for (const p of pods) podNames.push(p.metadata!.name!);
      expect(pods.map((p) => p.status?.phase)).toEqual(Array(deployment.spec?.replicas ?? 0).fill('Running'));
      expect(new Set(pods.map((p) => p.spec?.nodeName)).size).toBe(pods.length);

      // One replica leads: it holds the release's Lease (created with the chart's leader-election Role).
      const coordination = sandbox().kc.makeApiClient(k8s.CoordinationV1Api);
      const holder = await waitFor(
        async () => (await coordination.readNamespacedLease({ name: release, namespace }).catch(() => undefined))?.spec?.holderIdentity,
        'a leader',
        60_000,
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}\n${await controllerLogs(namespace, podNames)}`, { cause: err });
      });
      expect(holder).toMatch(/_[0-9a-f-]{36}$/); // hostname_uuid

      // A new node with the release's taint is verified and opened.
      const node = await addNode({ prefix: `e2e-new-${id}`, taints: [taint] });
      nodes.push(node);
      await waitFor(
        async () => {
          const n = await core().readNode({ name: node });
          const tainted = (n.spec?.taints ?? []).some((t) => t.key === taint.key);
          return !tainted && n.metadata?.labels?.[verifiedLabel.key] === verifiedLabel.value ? n : undefined;
        },
        `node ${node} verified by the chart's controller`,
        90_000,
        500,
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}\n${await controllerLogs(namespace, podNames)}`, { cause: err });
      });
      // The condition lives in the status subresource: it is written by the next request, after the
      // opening (docs/architecture.md), so a read between the two sees none yet.
      const condition = await waitFor(
        async () => {
          const c = (await core().readNode({ name: node })).status?.conditions?.find((x) => x.type === values.config.nodeManagement.condition.type);
          return c?.status === 'Unknown' ? undefined : c;
        },
        `node ${node}'s condition after the opening`,
        30_000,
        200,
      );
      expect(condition).toMatchObject({ status: 'True', reason: 'Passed' });

      const uninstall = await helmKube(['uninstall', release, '--namespace', namespace, '--wait']);
      expect(uninstall.code, uninstall.stderr).toBe(0);
    } finally {
      await helmKube(['uninstall', release, '--namespace', namespace]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

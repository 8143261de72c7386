// A chart release whose controller pods run in the sandbox, watched by a real Prometheus that
// scrapes them as the chart's ServiceMonitor says and evaluates the chart's PrometheusRule: the
// harness of the live alert and dashboard tests. Both come from `helm template` of the same values as
// the release (the Prometheus Operator CRDs are not needed: the objects are translated, not applied).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { k8s } from '@kube-node-ready/sandbox';
import { startPrometheus, type PromAlert, type PrometheusServer, type ServiceMonitorLike } from '../../packages/sandbox/src/prometheus.js';
import { addNode, core, createNamespace, deleteNode, sandbox, waitFor } from '../sandbox.js';
import { CHART_DIR, find, helm, template } from './helm.js';

export interface LiveRelease {
  namespace: string;
  release: string;
  id: string;
  taint: { key: string; value: string; effect: string };
  verifiedLabel: { key: string; value: string };
  deployment: string;
  prometheus: PrometheusServer;
  /** Adds a node with the release's taint (other options as addNode). */
  addTaintedNode(opts?: Parameters<typeof addNode>[0]): Promise<string>;
  /** Scales the controller Deployment. */
  scale(replicas: number): Promise<void>;
  /** Alerts of this Prometheus, one line each, plus its targets: what a timed-out wait prints. */
  describe(): Promise<string>;
  cleanup(): Promise<void>;
}

/** Deep merge of plain objects (values files). */
function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && prev && typeof prev === 'object' && !Array.isArray(prev) ? merge(prev as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}

export function alertLine(a: PromAlert): string {
  const labels = Object.entries(a.labels).filter(([k]) => k !== 'alertname' && k !== 'severity').map(([k, v]) => `${k}=${v}`).join(',');
  return `${a.labels.alertname}{${labels}} ${a.state} since ${a.activeAt} value=${a.value}`;
}

/**
 * Installs the chart (one controller replica unless `replicas` is given) with everything it acts on
 * unique to this release, waits for the Deployment, and starts a Prometheus for it.
 */
export async function installLiveRelease(prefix: string, overrides: Record<string, unknown> = {}, replicas = 1): Promise<LiveRelease> {
  const namespace = await createNamespace(prefix);
  const id = namespace.split('-').pop() as string;
  const release = `knr-${id}`;
  const taint = { key: `${prefix}-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' };
  const verifiedLabel = { key: `${prefix}-${id}.kube-node-ready.io/verified`, value: 'true' };
  const placement = { [`${prefix}-${id}.kube-node-ready.io/controller`]: 'true' };
  const values = merge(
    {
      image: { repository: 'kube-node-ready', tag: 'dev' },
      controller: { replicas, nodeSelector: placement, priorityClassName: '' },
      serviceMonitor: { enabled: true },
      prometheusRule: { enabled: true, pendingFor: '3m' },
      config: {
        worker: { priorityClassName: '', timeout: '20s', scheduleTimeout: '20s', startTimeout: '20s', serviceAccountName: `${release}-worker`, configMapName: `${release}-worker` },
        reconciliation: { initialBackoff: '1s', maxBackoff: '2s', maxRetries: 1, resyncInterval: '30s' },
        nodeManagement: { taints: [taint], verifiedLabel, condition: { type: `${prefix}-${id}.kube-node-ready.io/NetworkVerified` } },
        leaderElection: { leaseName: release, leaseDuration: '4s', renewDeadline: '3s', retryPeriod: '1s' },
      },
    },
    overrides,
  );
  const objects = await template(values, { namespace, release });
  const serviceMonitor = find(objects, 'ServiceMonitor') as unknown as ServiceMonitorLike;
  const rule = find(objects, 'PrometheusRule') as unknown as { spec: { groups: unknown[] } };

  const nodes: string[] = [];
  for (let i = 0; i < replicas; i++) nodes.push(await addNode({ prefix: `${prefix}-ctl-${id}`, labels: placement }));
  const dir = mkdtempSync(join(tmpdir(), `knr-${prefix}-`));
  // The release without the Prometheus Operator kinds (their CRDs need not exist in the sandbox).
  writeFileSync(join(dir, 'values.json'), JSON.stringify(merge(values, { serviceMonitor: { enabled: false }, prometheusRule: { enabled: false } })));
  const helmKube = (args: string[]) => helm([...args, '--kubeconfig', sandbox().state.kubeconfig]);
  const install = await helmKube(['install', release, CHART_DIR, '--namespace', namespace, '--values', join(dir, 'values.json')]);
  if (install.code !== 0) throw new Error(`helm install: ${install.stderr}`);
  const apps = sandbox().kc.makeApiClient(k8s.AppsV1Api);
  const deployment = `${release}-kube-node-ready-controller`;
  await waitFor(
    async () => {
      const d = await apps.readNamespacedDeployment({ name: deployment, namespace });
      return (d.status?.availableReplicas ?? 0) >= replicas;
    },
    `the Deployment ${deployment} to be available`,
    90_000,
    500,
  );

  const prometheus = await startPrometheus({
    layout: sandbox().layout,
    kubeconfig: sandbox().state.kubeconfig,
    serviceMonitors: [serviceMonitor],
    ruleGroups: rule.spec.groups,
  });
  const extraNodes: string[] = [];
  const live: LiveRelease = {
    namespace,
    release,
    id,
    taint,
    verifiedLabel,
    deployment,
    prometheus,
    addTaintedNode: async (opts = {}) => {
      const name = await addNode({ prefix: `${prefix}-${id}`, ...opts, taints: [taint, ...(opts.taints ?? [])] });
      extraNodes.push(name);
      return name;
    },
    scale: async (n) => {
      await apps.patchNamespacedDeploymentScale({ name: deployment, namespace, body: { spec: { replicas: n } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    },
    describe: async () => {
      const alerts = await prometheus.alerts().then((a) => a.map(alertLine), (err: unknown) => [`(could not read the alerts: ${String(err)})`]);
      const targets = await prometheus.targets().catch(() => []);
      const series = await prometheus
        .query('max by (node, status) (kube_node_ready_verification_status) == 1 or sum by (status) (kube_node_ready_verifications_total) or max by (reason) (kube_node_ready_remediation_blocked) or up')
        .catch((err: unknown) => `(query failed: ${String(err)})`);
      return [
        `Prometheus ${prometheus.url} alerts: ${alerts.length ? `\n  ${alerts.join('\n  ')}` : '(none)'}`,
        `targets: ${targets.map((t) => `${t.scrapeUrl} ${t.health}${t.lastError ? ` (${t.lastError})` : ''} pod=${t.labels.pod}`).join('; ') || '(none)'}`,
        `series: ${typeof series === 'string' ? series : series.map((s) => `${JSON.stringify(s.metric)}=${s.value[1]}`).join(' ')}`,
      ].join('\n');
    },
    cleanup: async () => {
      await prometheus.stop();
      await helmKube(['uninstall', release, '--namespace', namespace]);
      await Promise.all([...nodes, ...extraNodes].map((n) => deleteNode(n)));
      await core().deleteNamespace({ name: namespace }).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  // The controller is scraped before any test starts: `up` is 1 for its pod.
  await waitFor(async () => (await prometheus.query(`up{job="${release}-kube-node-ready-metrics",namespace="${namespace}"} == 1`)).length === replicas, `Prometheus scraping ${replicas} controller pod(s)`, 60_000, 500).catch(
    async (err: Error) => {
      throw new Error(`${err.message}\n${await live.describe()}\n${prometheus.logTail(10)}`, { cause: err });
    },
  );
  return live;
}

/** Waits for an alert matching `match` in state `state`; on timeout the error names every alert and series seen. */
export async function waitForAlert(live: LiveRelease, what: string, match: (a: PromAlert) => boolean, timeoutMs: number, state: 'firing' | 'pending' = 'firing'): Promise<PromAlert> {
  return waitFor(async () => (await live.prometheus.alerts()).find((a) => a.state === state && match(a)), `${what} (${state})`, timeoutMs, 1000).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await live.describe()}`, { cause: err });
  });
}

/** Waits until no alert matches `match` (resolved). */
export async function waitForResolved(live: LiveRelease, what: string, match: (a: PromAlert) => boolean, timeoutMs: number): Promise<void> {
  await waitFor(async () => !(await live.prometheus.alerts()).some(match), `${what} to resolve`, timeoutMs, 1000).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await live.describe()}`, { cause: err });
  });
}

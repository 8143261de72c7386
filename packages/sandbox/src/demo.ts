import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, writeFileSync } from 'node:fs';
import { join as joinPath } from 'node:path';
import { parse, stringify } from 'yaml';
import { collectStatus, renderStatus, type StatusReport } from '@kube-node-ready/cli/status';
import { loadConfig } from '@kube-node-ready/controller';
import { createIgnoreExists, k8s, loadKubeConfig } from './kube.js';
import { sleep } from './proc.js';
import { repoRoot, startSandbox, stopSandbox } from './sandbox.js';
import { CLUSTER_DNS_SERVICE } from './coredns.js';
import { createNodePool, listNodeClaims } from './karpenter.js';
import { sandboxLayout } from './layout.js';
import { realNodeProductImage } from './real-node.js';
import { startPrometheus, type PrometheusServer } from './prometheus.js';
import { run } from './proc.js';
import { dumpDom, screenshot } from './screenshot.js';

export interface DemoOptions {
  dir: string;
  slot: number;
  keep: boolean;
  out: (line: string) => void;
  /** Redraw the table in place (a terminal) or print changes as plain lines. */
  live: boolean;
  /** Where to save a screenshot of Prometheus' alerts page while the broken node's alert fires (default: $KNR_DEMO_SCREENSHOT, else none). */
  screenshot?: string;
}

/** The demo controller's metrics port, on the host's end of the sandbox veth pair so the sandbox's Prometheus reaches it. */
const METRICS_PORT = 18080;

const TAINT = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
const NAMESPACE = 'kube-system';
const APPS = 'demo';
/** The healthy pool and the broken one (its nodes drop their pods' DNS traffic: real-node-faults.ts, dns-blocked). */
const GENERAL = 'general';
const BROKEN = 'broken-dns';
const BROKEN_FAULT = 'dns-blocked';

/**
 * `make demo`, the story users live: workloads are pending, real Karpenter creates NodeClaims and
 * nodes for them (the verification taint comes from the NodePool's startupTaints), the nodes come up
 * as real nodes (a real kubelet takes over each Node, with containerd, the CNI bridge plugin and
 * kube-proxy: NotReady until its network is up, the worker image pulled from the sandbox's registry),
 * kube-node-ready verifies and opens them and the workloads run. One NodePool is broken: its node fails verification, keeps
 * its taint, kube-node-ready deletes its NodeClaim and Karpenter launches a replacement. Then the
 * workload scales up and one more node joins. A live table shows it, and `kubectl get nv` the
 * progress kept per node at the end; the exit code says whether the story ended as expected.
 */
export async function runDemo(opts: DemoOptions): Promise<number> {
  const { out } = opts;
  const started = Date.now();
  const image = realNodeProductImage(repoRoot());
  const state = await startSandbox({ dir: opts.dir, slot: opts.slot, progress: out });
  let controller: ChildProcess | undefined;
  let prometheus: PrometheusServer | undefined;
  const layout = sandboxLayout(opts.dir, opts.slot);
  const metricsAddress = `${layout.hostVethIp}:${METRICS_PORT}`;
  try {
    const kc = loadKubeConfig(state.kubeconfig);
    await workerRbac(kc);

    const configFile = joinPath(opts.dir, 'controller.yaml');
    const config = {
      // The image make image built, as the real nodes pull it from the sandbox's registry.
      worker: { image, namespace: NAMESPACE, timeout: '20s', startTimeout: '120s' },
      // The real nodes' cluster DNS: real CoreDNS behind its own Service (coredns.ts).
      reconciliation: { maxRetries: 2, initialBackoff: '2s', maxBackoff: '4s', clusterDnsService: CLUSTER_DNS_SERVICE },
      nodeManagement: {
        taints: [TAINT],
        // Remediation on (it is off by default), with guards sized for a demo.
        deleteFailedNodes: true,
        remediation: { minNodeAge: '0s', maxInFlight: 1, maxPerHour: 2 },
      },
      leaderElection: { namespace: NAMESPACE },
      metrics: { bindAddress: metricsAddress },
    };
    writeFileSync(configFile, stringify(config));
    const controllerConfig = loadConfig(configFile);
    const logFile = joinPath(opts.dir, 'logs', 'controller.log');
    out(`demo: starting the controller (dist/kube-node-ready.mjs controller; log: ${logFile})`);
    controller = spawn(
      process.execPath,
      [joinPath(repoRoot(), 'dist', 'kube-node-ready.mjs'), 'controller', '--config', configFile, '--kubeconfig', state.kubeconfig],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', HOSTNAME: 'demo-controller', POD_NAMESPACE: NAMESPACE } },
    );
    const log = createWriteStream(logFile);
    controller.stdout!.pipe(log);
    controller.stderr!.pipe(log);

    const prom = await demoPrometheus(state.binDir, state.kubeconfig, state.kubernetesVersion, layout, metricsAddress);
    prometheus = prom;
    out(`demo: Prometheus with the chart's alerts: ${prom.url}/classic/alerts (scraping the controller at http://${metricsAddress}/metrics)`);
    const shotFile = opts.screenshot ?? process.env.KNR_DEMO_SCREENSHOT;
    // The broken node may be replaced while the picture is taken: then the check fails and the next
    // firing (the replacement's) is taken instead.
    const shot = { ok: false, busy: undefined as Promise<void> | undefined, tries: 0, error: 'KubeNodeReadyNodeVerificationFailed never fired' };
    const tryShot = async () => {
      if (!shotFile || shot.ok || shot.busy || shot.tries >= 5) return;
      const firing = (await prom.alerts().catch(() => [])).find((a) => a.state === 'firing' && a.labels.alertname === 'KubeNodeReadyNodeVerificationFailed');
      if (!firing) return;
      shot.tries++;
      shot.busy = alertsScreenshot(prom, shotFile, firing.labels.node ?? '').then(
        (line) => {
          shot.ok = true;
          view.note(line);
        },
        (err: unknown) => void (shot.error = String(err)),
      ).finally(() => (shot.busy = undefined));
    };

    out(`demo: two Karpenter NodePools of real nodes with startupTaints [${TAINT.key}=${TAINT.value}:${TAINT.effect}]: "${GENERAL}", and "${BROKEN}" (its nodes start with the fault ${BROKEN_FAULT}: they drop their pods' DNS traffic)`);
    await createNodePool(kc, { name: GENERAL, startupTaints: [TAINT], real: {} });
    await createNodePool(kc, { name: BROKEN, startupTaints: [TAINT], real: { faults: [BROKEN_FAULT] } });
    await createNamespace(kc, APPS);
    out(`demo: workloads are pending: Deployment web (3 replicas, one per node) on ${GENERAL}, Deployment batch (1) on ${BROKEN}`);
    const app = `${image.repository}@${image.digest}`;
    await workload(kc, 'web', GENERAL, 3, app);
    await workload(kc, 'batch', BROKEN, 1, app);

    const view = new LiveTable(opts);
    let scaled = false;
    let report: StatusReport | undefined;
    let story = { webRunning: 0, brokenClaimsDeleted: 0, brokenClaims: 0, firstBroken: '' };
    // Real nodes take a while to be Ready once Karpenter created them, longer on a busy machine.
    const deadline = Date.now() + 600_000;
    while (Date.now() < deadline) {
      report = await collectStatus(kc, controllerConfig, Date.now());
      view.show(report);
      story = await readStory(kc, story.firstBroken);
      await tryShot();
      if (!scaled && story.webRunning >= 3) {
        scaled = true;
        view.note('demo: web runs on 3 verified nodes; scaling it to 4: Karpenter launches one more node');
        await scale(kc, 'web', 4);
      }
      if (scaled && story.webRunning >= 4 && story.brokenClaimsDeleted >= 1 && story.brokenClaims >= 1) break;
      if (controller.exitCode !== null) throw new Error(`the controller exited with ${controller.exitCode}; see ${logFile}`);
      await sleep(1000);
    }
    view.finish(report);

    const nodes = report?.nodes ?? [];
    const verified = nodes.filter((r) => r.state === 'Verified');
    out('');
    out('demo: the progress kube-node-ready keeps per node, in its NodeVerification (the Node itself carries only the taint, the verified label and the final verdict):');
    const nv = await kubectlGetNv(state.binDir, state.kubeconfig, layout.dir);
    out('$ kubectl get nv');
    for (const line of nv.text.split('\n')) out(line);
    const missing = verified.filter((r) => !new RegExp(`^${r.node}\\s+Passed\\s`, 'm').test(nv.text)).map((r) => r.node);
    const times = verified.map((r) => r.timeToVerifiedSeconds).filter((t): t is number => t !== undefined).sort((a, b) => a - b);
    out('');
    out(`summary: ${verified.length} nodes verified and opened, ${nodes.filter((r) => r.state === 'Failed').length} failed and kept closed, in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    if (times.length) out(`summary: node creation to taint removal (bring-up included): median ${times[Math.floor(times.length / 2)]!.toFixed(1)}s, max ${times[times.length - 1]!.toFixed(1)}s`);
    out(`summary: web pods running: ${story.webRunning} of 4`);
    const failed = nodes.find((r) => r.state === 'Failed' || r.lastOutcome === 'ChecksFailed');
    if (failed) out(`summary: ${failed.node}: ${failed.lastOutcome}: ${failed.lastMessage}`);
    out(`summary: NodeClaim ${story.firstBroken || '(none)'} of the broken pool ${story.brokenClaimsDeleted ? 'deleted by remediation; Karpenter launched a replacement' : 'still exists'}`);
    out(`summary: controller metrics: http://${metricsAddress}/metrics   leader: ${report?.leader?.identity ?? 'none'}`);
    out(`summary: Prometheus (the chart's alerts): ${prom.url}/classic/alerts`);
    const wrong: string[] = [];
    if (shotFile) {
      for (let waited = 0; !shot.ok && shot.tries < 5 && waited < 90; waited++) {
        await (shot.busy ?? tryShot());
        if (!shot.ok) await sleep(1000);
      }
      if (!shot.ok) wrong.push(`the alerts screenshot: ${shot.error}`);
    }
    if (!nv.ok) wrong.push(`kubectl get nv failed: ${nv.text}`);
    else if (missing.length) wrong.push(`kubectl get nv does not show ${missing.join(', ')} Passed`);
    if (story.webRunning < 4) wrong.push(`only ${story.webRunning} of 4 web pods run on verified nodes`);
    if (!story.brokenClaimsDeleted) wrong.push(`the broken pool's NodeClaim ${story.firstBroken || '(none)'} was not remediated`);
    else if (!story.brokenClaims) wrong.push('Karpenter did not launch a replacement for the remediated NodeClaim');
    if (wrong.length) {
      out(`demo: FAILED: ${wrong.join('; ')}`);
      return 1;
    }
    out('demo: every healthy node was verified and opened and its pods run; the broken one kept its taint, its NodeClaim was deleted and Karpenter replaced it');
    if (opts.keep) {
      out(`demo: sandbox and controller left running (KEEP=1): kubectl --kubeconfig ${state.kubeconfig} get nodes,nodeclaims,nodeverifications`);
      out(`demo: node dist/kube-node-ready.mjs status --kubeconfig ${state.kubeconfig}; stop with: node dist/sandbox.mjs down --dir ${opts.dir} --slot ${opts.slot}`);
      out(`demo: Prometheus left running: ${prom.url} (alerts: ${prom.url}/classic/alerts)`);
      controller.unref();
      (controller.stdout as NodeJS.ReadableStream & { unref?: () => void }).unref?.();
    }
    return 0;
  } finally {
    if (!opts.keep) {
      await prometheus?.stop();
      controller?.kill('SIGTERM');
      await stopSandbox(opts.dir, opts.slot, out);
    }
  }
}

/**
 * A Prometheus in the sandbox with the chart's rules (rendered by helm from the chart, as a release
 * "kube-node-ready" in kube-system would have them) scraping the demo controller, which runs outside
 * any pod: a static target labelled as the chart's ServiceMonitor would label it, so the rules' `up`
 * selector matches. KubeNodeReadyNodeVerificationFailed waits 2s instead of 1m (prometheusRule.alertFor):
 * the demo's remediation replaces the failed node within seconds.
 */
async function demoPrometheus(binDir: string, kubeconfig: string, kubernetesVersion: string, layout: ReturnType<typeof sandboxLayout>, metricsAddress: string): Promise<PrometheusServer> {
  const chart = joinPath(repoRoot(), 'deploy', 'helm', 'kube-node-ready');
  const helm = joinPath(binDir, 'helm');
  const rendered = await run(helm, [
    'template', 'kube-node-ready', chart, '--namespace', NAMESPACE, '--kube-version', kubernetesVersion.replace(/[-+].*$/, ''),
    '--set', 'prometheusRule.enabled=true', '--set', 'prometheusRule.alertFor.KubeNodeReadyNodeVerificationFailed=2s', '--show-only', 'templates/prometheusrule.yaml',
  ], { env: { PATH: process.env.PATH ?? '', HOME: joinPath(layout.dir, 'helm-home') } });
  if (rendered.code !== 0) throw new Error(`helm template (the chart's alerts): ${rendered.stderr}`);
  const rule = parse(rendered.stdout) as { spec: { groups: unknown[] } };
  return startPrometheus({
    layout,
    kubeconfig,
    ruleGroups: rule.spec.groups,
    staticTargets: [{ address: metricsAddress, labels: { job: 'kube-node-ready-metrics', namespace: NAMESPACE, service: 'kube-node-ready-metrics', pod: 'demo-controller', endpoint: 'http-metrics' } }],
  });
}

/**
 * The alerts page while the broken node's alert fires: a screenshot, checked against what Prometheus
 * reports at the same moment (the API lists the alert firing for that node, the page's DOM names it,
 * the file is a PNG of plausible size).
 */
async function alertsScreenshot(prometheus: PrometheusServer, file: string, node: string): Promise<string> {
  const page = `${prometheus.url}/classic/alerts`;
  const firingFor = async () => (await prometheus.alerts()).some((a) => a.state === 'firing' && a.labels.alertname === 'KubeNodeReadyNodeVerificationFailed' && a.labels.node === node);
  // Prometheus lists the alert firing for that node before the page is loaded and after it is taken.
  const before = await firingFor();
  const [size, dom] = await Promise.all([screenshot(page, file, '1280,900'), dumpDom(page)]);
  const after = await firingFor();
  if (!before || !after) throw new Error(`KubeNodeReadyNodeVerificationFailed for ${node} stopped firing while the page was taken`);
  if (!dom.includes('KubeNodeReadyNodeVerificationFailed') || !/firing/i.test(dom) || !dom.includes(node)) throw new Error(`the alerts page does not show KubeNodeReadyNodeVerificationFailed firing for ${node} (${dom.length} bytes of DOM)`);
  if (size < 20_000 || size > 2_000_000) throw new Error(`${file}: ${size} bytes is not a plausible screenshot`);
  return `demo: screenshot of the alerts page (KubeNodeReadyNodeVerificationFailed firing for ${node}): ${file} (${size} bytes)`;
}

/** `kubectl get nv` with the sandbox's kubectl: the table of NodeVerifications (the CRD's printer columns), or kubectl's error. */
async function kubectlGetNv(binDir: string, kubeconfig: string, dir: string): Promise<{ ok: boolean; text: string }> {
  const r = await run(joinPath(binDir, 'kubectl'), ['--kubeconfig', kubeconfig, 'get', 'nv'], { env: { PATH: process.env.PATH ?? '', HOME: joinPath(dir, 'kubectl-home') } });
  return { ok: r.code === 0, text: (r.code === 0 ? r.stdout : r.stderr || r.stdout).trimEnd() };
}

/** Where the story stands: web pods running on opened nodes, the broken pool's NodeClaims. */
async function readStory(kc: k8s.KubeConfig, firstBroken: string): Promise<{ webRunning: number; brokenClaimsDeleted: number; brokenClaims: number; firstBroken: string }> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const pods = await core.listNamespacedPod({ namespace: APPS, labelSelector: 'app=web' });
  const webRunning = pods.items.filter((p) => p.status?.phase === 'Running').length;
  const claims = (await listNodeClaims(kc, BROKEN)).filter((c) => !c.metadata.deletionTimestamp).map((c) => c.metadata.name);
  const first = firstBroken || claims[0] || '';
  const gone = first && !claims.includes(first) ? 1 : 0;
  return { webRunning, brokenClaimsDeleted: gone, brokenClaims: gone ? claims.length : 0, firstBroken: first };
}

async function createNamespace(kc: k8s.KubeConfig, name: string): Promise<void> {
  await createIgnoreExists(() => kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name } } }));
}

/** A Deployment of `replicas` sleepers on `pool`, one per node (required anti-affinity), 1 CPU each, from the product's image (what the real nodes can pull). */
async function workload(kc: k8s.KubeConfig, name: string, pool: string, replicas: number, image: string): Promise<void> {
  await kc.makeApiClient(k8s.AppsV1Api).createNamespacedDeployment({
    namespace: APPS,
    body: {
      metadata: { name },
      spec: {
        replicas,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            nodeSelector: { 'karpenter.sh/nodepool': pool },
            affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: name } } }] } },
            terminationGracePeriodSeconds: 1,
            containers: [{ name: 'main', image, command: ['/nodejs/bin/node', '-e', 'setTimeout(() => {}, 86_400_000)'], resources: { requests: { cpu: '1', memory: '512Mi' } } }],
          },
        },
      },
    },
  });
}

async function scale(kc: k8s.KubeConfig, name: string, replicas: number): Promise<void> {
  await kc.makeApiClient(k8s.AppsV1Api).patchNamespacedDeploymentScale(
    { name, namespace: APPS, body: { spec: { replicas } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
}

/** What the Helm chart gives the worker: read Services and EndpointSlices, and its PriorityClass (never preempting). */
async function workerRbac(kc: k8s.KubeConfig): Promise<void> {
  await createIgnoreExists(() =>
    kc.makeApiClient(k8s.SchedulingV1Api).createPriorityClass({
      body: { metadata: { name: 'kube-node-ready-worker' }, value: 1_000_000_000, preemptionPolicy: 'Never', globalDefault: false },
    }),
  );
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
  await createIgnoreExists(() => core.createNamespacedServiceAccount({ namespace: NAMESPACE, body: { metadata: { name: 'kube-node-ready-worker' } } }));
  await createIgnoreExists(() =>
    rbac.createClusterRole({
      body: {
        metadata: { name: 'kube-node-ready-worker' },
        rules: [
          { apiGroups: [''], resources: ['services'], verbs: ['get', 'list'] },
          { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'list'] },
        ],
      },
    }),
  );
  await createIgnoreExists(() =>
    rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'kube-node-ready-worker' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kube-node-ready-worker' },
        subjects: [{ kind: 'ServiceAccount', name: 'kube-node-ready-worker', namespace: NAMESPACE }],
      },
    }),
  );
}

/** Redraws the status table in place on a terminal; elsewhere prints one line per state change. */
class LiveTable {
  private drawn = 0;
  private last = new Map<string, string>();
  constructor(private readonly opts: DemoOptions) {}

  show(report: StatusReport): void {
    if (this.opts.live) {
      const text = renderStatus(report).split('\n');
      if (this.drawn) process.stdout.write(`\x1b[${this.drawn}A\x1b[J`);
      process.stdout.write(`${text.join('\n')}\n`);
      this.drawn = text.length;
      return;
    }
    for (const n of report.nodes) {
      const key = `${n.state}/${n.attempt}/${n.lastOutcome}`;
      if (this.last.get(n.node) === key) continue;
      this.last.set(n.node, key);
      const detail = n.lastOutcome ? ` (${n.lastOutcome}${n.lastMessage ? `: ${n.lastMessage.slice(0, 100)}` : ''})` : '';
      this.opts.out(`  ${n.node}: ${n.state}, attempt ${n.attempt || '-'}${detail}`);
    }
  }

  note(line: string): void {
    this.opts.out(line);
    this.drawn = 0;
  }

  finish(report: StatusReport | undefined): void {
    if (!this.opts.live && report) {
      this.opts.out('');
      for (const line of renderStatus(report).split('\n')) this.opts.out(line);
    }
  }
}

import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, writeFileSync } from 'node:fs';
import { join as joinPath } from 'node:path';
import { stringify } from 'yaml';
import { collectStatus, renderStatus, type StatusReport } from '@kube-node-ready/cli/status';
import { loadConfig } from '@kube-node-ready/controller';
import { createIgnoreExists, k8s, loadKubeConfig } from './kube.js';
import { simulatedNode } from './node-registry.js';
import { sleep } from './proc.js';
import { repoRoot, startSandbox, stopSandbox } from './sandbox.js';
import { createNodeClaim, installNodeClaimCrd, KARPENTER_MODULE, nodeClaimNames } from './karpenter.js';

export interface DemoOptions {
  dir: string;
  slot: number;
  keep: boolean;
  out: (line: string) => void;
  /** Redraw the table in place (a terminal) or print changes as plain lines. */
  live: boolean;
}

const TAINT = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
const NAMESPACE = 'kube-system';

interface DemoNode {
  name: string;
  karpenter?: boolean;
  brokenDns?: boolean;
  /** Joins once the first wave is verified. */
  late?: boolean;
  /** Remediated: fails its retries and its NodeClaim is deleted (Karpenter would replace the machine). */
  expect: 'Verified' | 'Remediated';
}

const NODES: DemoNode[] = [
  { name: 'ip-10-0-1-11.ec2.internal', karpenter: true, expect: 'Verified' },
  { name: 'ip-10-0-1-12.ec2.internal', karpenter: true, expect: 'Verified' },
  { name: 'ip-10-0-1-13.ec2.internal', karpenter: true, expect: 'Verified' },
  { name: 'ip-10-0-2-21.ec2.internal', karpenter: true, brokenDns: true, expect: 'Remediated' },
  { name: 'worker-pool-b-7f3k2', expect: 'Verified' },
  { name: 'worker-pool-b-9x8m1', expect: 'Verified' },
  { name: 'worker-pool-b-q2w4e', expect: 'Verified' },
  { name: 'ip-10-0-3-31.ec2.internal', karpenter: true, late: true, expect: 'Verified' },
];

/**
 * `make demo`: a fresh sandbox, the controller from the bundle users get, and a wave of tainted
 * nodes (some from Karpenter, with NodeClaims). Most pass and open within seconds; one has a broken
 * DNS server, fails its retries, keeps its taint and is remediated through its NodeClaim; one joins
 * later and is verified too. A live table
 * shows the state; the exit code says whether the scenario ended as expected.
 */
export async function runDemo(opts: DemoOptions): Promise<number> {
  const { out } = opts;
  const started = Date.now();
  const state = await startSandbox({ dir: opts.dir, slot: opts.slot, progress: out });
  let controller: ChildProcess | undefined;
  try {
    const kc = loadKubeConfig(state.kubeconfig);
    await workerRbac(kc);
    out(`demo: installing the karpenter.sh/v1 NodeClaim CRD (${KARPENTER_MODULE.module} ${KARPENTER_MODULE.version})`);
    await installNodeClaimCrd(kc);

    const configFile = joinPath(opts.dir, 'controller.yaml');
    const config = {
      worker: { image: { repository: 'ghcr.io/kube-node-ready/kube-node-ready', tag: 'dev' }, namespace: NAMESPACE, timeout: '20s' },
      reconciliation: { maxRetries: 2, initialBackoff: '1s', maxBackoff: '4s' },
      nodeManagement: {
        taints: [TAINT],
        // Remediation on (it is off by default), with guards sized for a 10-node demo.
        deleteFailedNodes: true,
        remediation: { minNodeAge: '0s', maxInFlight: 1, maxPerHour: 2 },
      },
      leaderElection: { namespace: NAMESPACE },
      metrics: { bindAddress: '127.0.0.1:18080' },
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

    const wave = NODES.filter((n) => !n.late);
    out(`demo: ${wave.length} nodes join with the startup taint ${TAINT.key}=${TAINT.value}:${TAINT.effect} (${wave.filter((n) => n.karpenter).length} from Karpenter)`);
    for (const n of wave) await join(kc, n);

    const view = new LiveTable(opts);
    let lateJoined = false;
    let report: StatusReport | undefined;
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      report = await collectStatus(kc, controllerConfig, Date.now());
      view.show(report);
      const byName = new Map(report.nodes.map((r) => [r.node, r.state]));
      if (!lateJoined && wave.filter((n) => n.expect === 'Verified').every((n) => byName.get(n.name) === 'Verified')) {
        lateJoined = true;
        const late = NODES.filter((n) => n.late);
        view.note(`demo: the first wave is open; ${late.length} more node joins`);
        for (const n of late) await join(kc, n);
      }
      const claims = await nodeClaimNames(kc);
      const remediated = NODES.filter((n) => n.expect === 'Remediated').every((n) => !claims.has(claimName(n)));
      if (lateJoined && remediated && NODES.every((n) => n.expect === 'Remediated' || byName.get(n.name) === n.expect)) break;
      if (controller.exitCode !== null) throw new Error(`the controller exited with ${controller.exitCode}; see ${logFile}`);
      await sleep(500);
    }
    view.finish(report);

    const byName = new Map((report?.nodes ?? []).map((r) => [r.node, r]));
    const claimsLeft = await nodeClaimNames(kc);
    const wrong = NODES.filter((n) => (n.expect === 'Remediated' ? claimsLeft.has(claimName(n)) : byName.get(n.name)?.state !== n.expect));
    const times = (report?.nodes ?? []).map((r) => r.timeToVerifiedSeconds).filter((t): t is number => t !== undefined).sort((a, b) => a - b);
    out('');
    out(`summary: ${NODES.filter((n) => n.expect === 'Verified').length - wrong.filter((n) => n.expect === 'Verified').length} nodes verified and opened, ` +
      `${(report?.nodes ?? []).filter((r) => r.state === 'Failed').length} failed and kept closed, in ${((Date.now() - started) / 1000).toFixed(1)}s`);
    if (times.length) out(`summary: node creation to taint removal: median ${times[Math.floor(times.length / 2)]!.toFixed(1)}s, max ${times[times.length - 1]!.toFixed(1)}s`);
    const bad = byName.get(NODES.find((n) => n.brokenDns)!.name);
    if (bad) out(`summary: ${bad.node}: ${bad.lastOutcome}: ${bad.lastMessage}`);
    const badClaim = claimName(NODES.find((n) => n.brokenDns)!);
    out(`summary: NodeClaim ${badClaim} ${claimsLeft.has(badClaim) ? 'still exists' : 'deleted by remediation (Karpenter drains and replaces the machine)'}`);
    out(`summary: controller metrics: http://127.0.0.1:18080/metrics   leader: ${report?.leader?.identity ?? 'none'}`);
    if (wrong.length) {
      out(`demo: FAILED: ${wrong.map((n) => `${n.name} is ${byName.get(n.name)?.state ?? 'missing'}, expected ${n.expect}`).join('; ')}`);
      return 1;
    }
    out('demo: every healthy node was verified and opened; the broken one kept its taint and was remediated through its NodeClaim');
    if (opts.keep) {
      out(`demo: sandbox and controller left running (KEEP=1): kubectl --kubeconfig ${state.kubeconfig} get nodes`);
      out(`demo: node dist/kube-node-ready.mjs status --kubeconfig ${state.kubeconfig}; stop with: node dist/sandbox.mjs down --dir ${opts.dir} --slot ${opts.slot}`);
      controller.unref();
      (controller.stdout as NodeJS.ReadableStream & { unref?: () => void }).unref?.();
    }
    return 0;
  } finally {
    if (!opts.keep) {
      controller?.kill('SIGTERM');
      await stopSandbox(opts.dir, opts.slot, out);
    }
  }
}

const claimName = (n: DemoNode) => `default-${n.name.split('.')[0]}`;
const providerID = (n: DemoNode) => `aws:///us-east-1a/i-0${createHash('sha256').update(n.name).digest('hex').slice(0, 16)}`;

/** A node joins: Karpenter's NodeClaim first (for Karpenter nodes), then the Node the kubelet registers. */
async function join(kc: k8s.KubeConfig, n: DemoNode): Promise<void> {
  if (n.karpenter) await createNodeClaim(kc, { name: claimName(n), nodePool: 'default', nodeName: n.name, providerID: providerID(n) });
  await createIgnoreExists(() => kc.makeApiClient(k8s.CoreV1Api).createNode({ body: demoNode(n) }));
}

function demoNode(n: DemoNode): k8s.V1Node {
  const labels: Record<string, string> = { 'node.kubernetes.io/instance-type': n.karpenter ? 'm7i.large' : 'standard-4' };
  if (n.karpenter) Object.assign(labels, { 'karpenter.sh/nodepool': 'default', 'karpenter.sh/registered': 'true' });
  return simulatedNode({
    name: n.name,
    labels,
    taints: [TAINT],
    providerID: n.karpenter ? providerID(n) : undefined,
    faults: n.brokenDns ? { dns: 'dead' } : undefined,
  });
}

/** What the Helm chart grants the worker: read Services and EndpointSlices. */
async function workerRbac(kc: k8s.KubeConfig): Promise<void> {
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

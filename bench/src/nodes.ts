// Nodes the bench creates that nobody plays: verified long ago and untainted, as a kubelet on EKS
// registers them (labels, capacity, node info, 50 images, conditions: kubeletNodeStatus) with the
// annotations the kubelet, the EBS and EFS CSI drivers and Karpenter put on such a node, about
// 16 KB of JSON each with their managedFields, each with the condition and the NodeVerification
// kube-node-ready left when it opened it (a Passed status with every check's result). What a controller pays to know them
// is what is measured.
import { k8s, kubeletNodeStatus, SIMULATED_LABEL, simulatedNode, statusCode } from '@kube-node-ready/sandbox';
import { installationOf, newNodeVerification, NodeVerificationApi, statusOf, VERIFIED_CONDITION, type NodeVerification } from '../../packages/controller/src/api/nodeverification.js';
import { ConditionReason } from '../../packages/controller/src/controllers/node/verification/condition.js';
import { Outcome, Phase } from '../../packages/controller/src/controllers/node/verification/types.js';
import { RUN_LABEL } from './burst.js';
import { VERIFIED_LABEL } from './controller.js';
import { pool, sleep } from './util.js';

/** The i-th realistic verified Node of `run` (a value of the bench's run label). */
export function realisticNode(run: string, i: number): k8s.V1Node {
  const name = realisticNodeName(i);
  const node = simulatedNode({ name, labels: { [RUN_LABEL]: run, [VERIFIED_LABEL]: 'true', 'karpenter.sh/nodepool': 'default', 'karpenter.sh/registered': 'true', 'karpenter.sh/initialized': 'true' } });
  // Not played by the simulated kubelet: these nodes only need to exist. Their Leases are not
  // renewed, so kube-controller-manager marks them Unknown after its grace period (the same churn for
  // every controller measured beside them).
  delete node.metadata!.labels![SIMULATED_LABEL];
  const ip = `10.3.${(i >> 8) & 255}.${i & 255}`;
  const instance = `i-0${(0x3a5b7c9d000 + i).toString(16)}`;
  node.metadata!.annotations = {
    'alpha.kubernetes.io/provided-node-ip': ip,
    'csi.volume.kubernetes.io/nodeid': JSON.stringify({ 'ebs.csi.aws.com': instance, 'efs.csi.aws.com': instance }),
    'karpenter.k8s.aws/ec2nodeclass-hash': '15616957348189460630',
    'karpenter.k8s.aws/ec2nodeclass-hash-version': 'v4',
    'karpenter.sh/nodepool-hash': '6821555240594823858',
    'karpenter.sh/nodepool-hash-version': 'v3',
    'node.alpha.kubernetes.io/ttl': '0',
    'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
  };
  node.spec = { ...node.spec, taints: [] };
  const status = kubeletNodeStatus(node, ip, 10250, true, new Date());
  // The condition kube-node-ready wrote when it opened the node: without it the controller
  // finds each node's verdict missing from its Node and writes it (one write per Node at start-up).
  const verifiedAt = new Date(Date.now() - VERIFIED_AGO_MS);
  const verified = { type: DEFAULT_CONDITION_TYPE, status: 'True', reason: ConditionReason.Passed, message: PASSED_MESSAGE, lastHeartbeatTime: verifiedAt, lastTransitionTime: verifiedAt };
  node.status = { ...node.status, ...status, conditions: [...(status.conditions ?? []), verified] };
  return node;
}

export const realisticNodeName = (i: number): string => `ip-10-3-${(i >> 8) & 255}-${i & 255}.us-west-2.compute.internal`;

/**
 * Creates realistic Nodes `from`..`to - 1` of `run` (50 requests in flight), reporting progress every
 * 5 s; returns the size of one as the API serves it (JSON bytes).
 */
export async function createRealisticNodes(kc: k8s.KubeConfig, run: string, from: number, to: number, progress: (line: string) => void): Promise<{ ms: number; nodeObjectBytes: number }> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const started = Date.now();
  let created = 0;
  let lastReport = started;
  await pool(
    Array.from({ length: Math.max(0, to - from) }, (_, k) => from + k),
    50,
    async (i) => {
      const node = realisticNode(run, i);
      await createWithRetries(() => core.createNode({ body: node }));
      await createVerification(custom, (await core.readNode({ name: realisticNodeName(i) })) ?? node);
      created++;
      if (Date.now() - lastReport > 5000) {
        lastReport = Date.now();
        progress(`${from + created}/${to} realistic nodes created, ${((Date.now() - started) / 1000).toFixed(1)}s`);
      }
    },
  );
  return { ms: Date.now() - started, nodeObjectBytes: JSON.stringify(await core.readNode({ name: realisticNodeName(from) })).length };
}

/** The condition type of the controllers the bench runs (the default): their NodeVerifications carry its installation label. */
const DEFAULT_CONDITION_TYPE = 'kube-node-ready.io/NetworkVerified';

/** The checks of a passed attempt as the worker reports them (names and typical durations). */
const PASSED_CHECKS = ['dns', 'api', 'tcp', 'service', 'mtu', 'nodeport', 'conntrack', 'egress'].map((name, i) => ({ name, ok: true, durationMs: 40 + 17 * i }));
const PASSED_MESSAGE = `all checks passed in 1.2s (${PASSED_CHECKS.map((c) => c.name).join(', ')})`;
/** How long ago the nodes were verified. */
const VERIFIED_AGO_MS = 3_600_000;

/** The NodeVerification kube-node-ready left on `node` when it opened it. */
async function createVerification(custom: k8s.CustomObjectsApi, node: k8s.V1Node): Promise<void> {
  const coords = { group: NodeVerificationApi.group, version: NodeVerificationApi.version, plural: NodeVerificationApi.plural };
  const nv = (await createWithRetries(() => custom.createClusterCustomObject({ ...coords, body: newNodeVerification(node, installationOf(DEFAULT_CONDITION_TYPE)) }))) as NodeVerification | undefined;
  const current = nv ?? ((await custom.getClusterCustomObject({ ...coords, name: node.metadata?.name ?? '' })) as NodeVerification);
  const at = Date.now() - VERIFIED_AGO_MS;
  const state = {
    uid: node.metadata?.uid ?? '',
    attempt: 1,
    failures: 0,
    phase: Phase.Passed,
    lastOutcome: Outcome.Passed,
    lastMessage: PASSED_MESSAGE,
    lastAttempt: 1,
    lastChecks: PASSED_CHECKS,
    lastFinishedAt: at,
    pod: `kube-system/knr-${node.metadata?.name ?? ''}-a1`.slice(0, 63),
    launchableAt: at - 5_000,
    firstLaunchAt: at - 4_000,
    verifiedAt: at,
  };
  const condition = { type: VERIFIED_CONDITION, status: 'True' as const, reason: ConditionReason.Passed, message: state.lastMessage };
  await createWithRetries(() => custom.replaceClusterCustomObject({ ...coords, name: node.metadata?.name ?? '', body: { ...current, status: statusOf(state, node, condition, current, at) } }));
}

/** A loaded apiserver drops a request now and then (a reset, a 429, a 5xx): one request is worth three tries. Undefined: it had been applied. */
async function createWithRetries<T>(create: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await create();
    } catch (err) {
      const code = statusCode(err);
      if (code === 409 && attempt > 1) return undefined; // the try that failed was applied after all
      if (attempt >= 3 || (code !== undefined && code !== 429 && code < 500)) throw err;
      await sleep(1000 * attempt);
    }
  }
}

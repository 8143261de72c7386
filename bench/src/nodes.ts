// Nodes the bench creates that nobody plays: verified long ago and untainted, as a kubelet on EKS
// registers them (labels, capacity, node info, 50 images, conditions: kubeletNodeStatus), about
// 15 KB of JSON each with their managedFields. What a controller pays to know them is what is measured.
import { kubeletNodeStatus, SIMULATED_LABEL, simulatedNode, statusCode, type k8s } from '@kube-node-ready/sandbox';
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
  node.spec = { ...node.spec, taints: [] };
  node.status = { ...node.status, ...kubeletNodeStatus(node, `10.3.${(i >> 8) & 255}.${i & 255}`, 10250, true, new Date()) };
  return node;
}

export const realisticNodeName = (i: number): string => `ip-10-3-${(i >> 8) & 255}-${i & 255}.us-west-2.compute.internal`;

/**
 * Creates realistic Nodes `from`..`to - 1` of `run` (50 requests in flight), reporting progress every
 * 5 s; returns the size of one as the API serves it (JSON bytes).
 */
export async function createRealisticNodes(core: k8s.CoreV1Api, run: string, from: number, to: number, progress: (line: string) => void): Promise<{ ms: number; nodeObjectBytes: number }> {
  const started = Date.now();
  let created = 0;
  let lastReport = started;
  await pool(
    Array.from({ length: Math.max(0, to - from) }, (_, k) => from + k),
    50,
    async (i) => {
      await createWithRetries(core, realisticNode(run, i));
      created++;
      if (Date.now() - lastReport > 5000) {
        lastReport = Date.now();
        progress(`${from + created}/${to} realistic nodes created, ${((Date.now() - started) / 1000).toFixed(1)}s`);
      }
    },
  );
  return { ms: Date.now() - started, nodeObjectBytes: JSON.stringify(await core.readNode({ name: realisticNodeName(from) })).length };
}

/** A loaded apiserver drops a request now and then (a reset, a 429, a 5xx): one node is worth three tries. */
async function createWithRetries(core: k8s.CoreV1Api, node: k8s.V1Node): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await core.createNode({ body: node });
      return;
    } catch (err) {
      const code = statusCode(err);
      if (code === 409 && attempt > 1) return; // the try that failed was applied after all
      if (attempt >= 3 || (code !== undefined && code !== 429 && code < 500)) throw err;
      await sleep(1000 * attempt);
    }
  }
}

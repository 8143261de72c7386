// Karpenter's real nodes: the kwok provider creates a Node object for each NodeClaim, as a cloud
// creates an instance; for a NodePool whose template labels it real (REAL_NODE_LABEL), the sandbox
// then starts a real node of that name, whose kubelet takes the Node object over (a kubelet whose
// Node exists registers by updating it: Karpenter's labels, startup taints and provider ID stay). When
// Karpenter deletes the Node (its NodeClaim deleted, the instance terminated), the real node stops.
import type { Logger } from '@kube-node-ready/core';
import { k8s, listWatch } from './kube.js';
import { parseFaultSpec } from './real-node-faults.js';
import { REAL_NODE_LABEL, type RealNodes } from './real-node.js';

/** The label Karpenter puts on the nodes it launches (the NodePool's name). */
const NODEPOOL_LABEL = 'karpenter.sh/nodepool';
/**
 * Template annotation of a real NodePool: the faults its nodes start with, comma-separated, each
 * `FAULT` or `FAULT=VALUE` (real-node-faults.ts), e.g. `dns-blocked` for a broken pool.
 */
export const REAL_NODE_FAULTS_ANNOTATION = 'sandbox.kube-node-ready.io/real-faults';

export function startKarpenterRealNodes(kc: k8s.KubeConfig, realNodes: Pick<RealNodes, 'add' | 'remove' | 'names'>, log: Logger): { stop: () => void } {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const selector = `${REAL_NODE_LABEL}=true,${NODEPOOL_LABEL}`;
  /** Nodes being started or stopped: one change at a time per node. */
  const busy = new Map<string, Promise<void>>();
  const serially = (name: string, work: () => Promise<void>) => {
    const next = (busy.get(name) ?? Promise.resolve()).then(work).catch((err: unknown) => log.warn({ node: name, err: String(err) }, 'Karpenter real node: change failed'));
    busy.set(name, next);
    void next.finally(() => busy.get(name) === next && busy.delete(name));
  };
  const started = new Set<string>();
  const start = (node: k8s.V1Node) => {
    const name = node.metadata?.name;
    if (!name || node.metadata?.deletionTimestamp || started.has(name) || realNodes.names().includes(name)) return;
    started.add(name);
    serially(name, async () => {
      const faults = (node.metadata?.annotations?.[REAL_NODE_FAULTS_ANNOTATION] ?? '').split(',').filter(Boolean).map(parseFaultSpec);
      log.info({ node: name, nodePool: node.metadata?.labels?.[NODEPOOL_LABEL], faults }, 'Karpenter launched a real node: starting its kubelet');
      await realNodes.add({ name, faults });
    });
  };
  const stop = (name: string) => {
    if (!started.delete(name)) return;
    serially(name, async () => {
      if (!realNodes.names().includes(name)) return;
      log.info({ node: name }, 'Karpenter removed a real node\'s Node: stopping it');
      await realNodes.remove(name);
    });
  };
  return listWatch<k8s.V1Node>(
    kc,
    '/api/v1/nodes',
    () => core.listNode({ labelSelector: selector }),
    (type, node) => (type === 'DELETED' ? stop(node.metadata?.name ?? '') : start(node)),
    (nodes) => nodes.forEach(start),
    (err) => log.debug({ err: String(err) }, 'Karpenter real nodes: watch failed; listing again'),
    { labelSelector: selector },
  );
}

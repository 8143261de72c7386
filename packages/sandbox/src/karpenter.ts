import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { createIgnoreExists, k8s, statusCode } from './kube.js';
import { SIMULATED_LABEL } from './node-registry.js';
import { REAL_NODE_FAULTS_ANNOTATION } from './karpenter-real-nodes.js';
import { REAL_NODE_LABEL } from './real-node.js';
import { sleep } from './proc.js';

export const NODEPOOLS = { group: 'karpenter.sh', version: 'v1', plural: 'nodepools' } as const;
export const NODECLAIMS = { group: 'karpenter.sh', version: 'v1', plural: 'nodeclaims' } as const;
const KWOK_NODECLASSES = { group: 'karpenter.kwok.sh', version: 'v1alpha1', plural: 'kwoknodeclasses' } as const;
/** The KWOKNodeClass every sandbox NodePool refers to. */
export const KWOK_NODECLASS = 'default';

/**
 * Installs Karpenter's CRDs (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass, ...), copied from its
 * Go module beside the binary by build.sh, and waits until NodePools and NodeClaims are served.
 */
export async function installKarpenterCrds(kc: k8s.KubeConfig, crdDir: string): Promise<void> {
  const api = kc.makeApiClient(k8s.ApiextensionsV1Api);
  let files: string[];
  try {
    files = readdirSync(crdDir).filter((f) => f.endsWith('.yaml'));
  } catch (err) {
    throw new Error(`Karpenter's CRDs are missing in ${crdDir}: run \`bash packages/sandbox/go/build.sh karpenter\` (${String(err)})`, { cause: err });
  }
  for (const f of files) {
    const crd = parseYaml(readFileSync(join(crdDir, f), 'utf8')) as k8s.V1CustomResourceDefinition;
    await createIgnoreExists(() => api.createCustomResourceDefinition({ body: crd }));
  }
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  for (const ref of [NODEPOOLS, NODECLAIMS, KWOK_NODECLASSES]) {
    for (let i = 0; ; i++) {
      try {
        await custom.listClusterCustomObject({ ...ref, limit: 1 });
        break;
      } catch (err) {
        // 404 until the group is discovered; 429 "storage is (re)initializing" right after creation.
        if ((statusCode(err) !== 404 && statusCode(err) !== 429) || i >= 300) throw new Error(`${ref.plural}.${ref.group} not served 60s after creating its CRD: ${String(err)}`, { cause: err });
      }
      await sleep(200);
    }
  }
}

/**
 * The KWOKNodeClass the sandbox's NodePools refer to, Ready. (A cloud provider's node class controller
 * sets Ready once it resolved its subnets and images; the kwok provider has none, and Karpenter ignores
 * a NodePool whose node class is not Ready.)
 */
export async function installKwokNodeClass(kc: k8s.KubeConfig): Promise<void> {
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  await createIgnoreExists(() =>
    custom.createClusterCustomObject({ ...KWOK_NODECLASSES, body: { apiVersion: 'karpenter.kwok.sh/v1alpha1', kind: 'KWOKNodeClass', metadata: { name: KWOK_NODECLASS } } }),
  );
  const ready = { type: 'Ready', status: 'True', reason: 'Ready', message: '', observedGeneration: 1, lastTransitionTime: new Date().toISOString() };
  await custom.patchClusterCustomObjectStatus(
    { ...KWOK_NODECLASSES, name: KWOK_NODECLASS, body: { status: { conditions: [ready] } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
}

export interface NodePoolOptions {
  name: string;
  /** Taints Karpenter puts on the node at registration, for another system to remove (ours). */
  startupTaints?: k8s.V1Taint[];
  taints?: k8s.V1Taint[];
  /** Template labels (on the Node from creation); the simulated-node label, or the real-node one, is always added. */
  labels?: Record<string, string>;
  /**
   * Real nodes (karpenter-real-nodes.ts): a real kubelet, containerd, CNI and kube-proxy take each
   * Node over, starting with these faults (real-node-faults.ts: `FAULT` or `FAULT=VALUE`).
   */
  real?: { faults?: string[] };
  /** Template annotations: the sandbox's fault and bring-up knobs go here. */
  annotations?: Record<string, string>;
  /** Limit on the pool's total CPU (Karpenter stops launching beyond it). */
  cpuLimit?: string;
  /** Extra requirements, e.g. an instance size. */
  requirements?: Array<{ key: string; operator: string; values?: string[] }>;
}

/**
 * A NodePool whose nodes the simulated kubelet plays, or real nodes run (`real`). Consolidation and expiry are off, so
 * Karpenter removes a node only when its NodeClaim is deleted (by a test, or by remediation).
 */
export function simulatedNodePool(o: NodePoolOptions): Record<string, unknown> {
  return {
    apiVersion: 'karpenter.sh/v1',
    kind: 'NodePool',
    metadata: { name: o.name },
    spec: {
      template: {
        metadata: {
          labels: { [o.real ? REAL_NODE_LABEL : SIMULATED_LABEL]: 'true', ...(o.labels ?? {}) },
          annotations: { ...(o.annotations ?? {}), ...(o.real?.faults?.length ? { [REAL_NODE_FAULTS_ANNOTATION]: o.real.faults.join(',') } : {}) },
        },
        spec: {
          nodeClassRef: { group: 'karpenter.kwok.sh', kind: 'KWOKNodeClass', name: KWOK_NODECLASS },
          requirements: [
            { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
            { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64'] },
            { key: 'karpenter.sh/capacity-type', operator: 'In', values: ['on-demand'] },
            ...(o.requirements ?? []),
          ],
          ...(o.startupTaints?.length ? { startupTaints: o.startupTaints } : {}),
          ...(o.taints?.length ? { taints: o.taints } : {}),
          expireAfter: 'Never',
        },
      },
      disruption: { consolidationPolicy: 'WhenEmpty', consolidateAfter: 'Never' },
      ...(o.cpuLimit ? { limits: { cpu: o.cpuLimit } } : {}),
    },
  };
}

export async function createNodePool(kc: k8s.KubeConfig, o: NodePoolOptions): Promise<void> {
  await kc.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({ ...NODEPOOLS, body: simulatedNodePool(o) });
}

export async function deleteNodePool(kc: k8s.KubeConfig, name: string): Promise<void> {
  await kc
    .makeApiClient(k8s.CustomObjectsApi)
    .deleteClusterCustomObject({ ...NODEPOOLS, name })
    .catch((err) => {
      if (statusCode(err) !== 404) throw err;
    });
}

export interface NodeClaim {
  metadata: { name: string; uid?: string; labels?: Record<string, string>; deletionTimestamp?: string; creationTimestamp?: string };
  status?: { nodeName?: string; providerID?: string; conditions?: Array<{ type: string; status: string; reason?: string }> };
}

export async function listNodeClaims(kc: k8s.KubeConfig, nodePool?: string): Promise<NodeClaim[]> {
  const list = (await kc
    .makeApiClient(k8s.CustomObjectsApi)
    .listClusterCustomObject({ ...NODECLAIMS, ...(nodePool ? { labelSelector: `karpenter.sh/nodepool=${nodePool}` } : {}) })) as { items: NodeClaim[] };
  return list.items;
}

/** Names of the NodeClaims that exist now. */
export async function nodeClaimNames(kc: k8s.KubeConfig, nodePool?: string): Promise<Set<string>> {
  return new Set((await listNodeClaims(kc, nodePool)).map((c) => c.metadata.name));
}

// Karpenter's nodes as real nodes: a NodePool labelled real launches a node for a pending pod, a real
// kubelet takes the Node object Karpenter's kwok provider created over, the controller verifies it
// with the worker from the image and opens it, and the pod runs there. The NodeClaim deleted, the
// real node stops with its Node.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { repoRoot, sandboxControl } from '@kube-node-ready/sandbox';
import { harness, readNode, type Harness } from '../../packages/controller/test/harness.js';
import { createNodePool, deleteNodePool, listNodeClaims, NODECLAIMS } from '../../packages/sandbox/src/karpenter.js';
import { k8s } from '../../packages/sandbox/src/kube.js';
import { CLUSTER_DNS_SERVICE } from '../../packages/sandbox/src/coredns.js';
import { REAL_NODE_LABEL, realNodeProductImage } from '../../packages/sandbox/src/real-node.js';
import { core, sandbox, uniqueName, verificationInPhase, waitFor } from '../sandbox.js';
import { holdRealNodeLock } from './machine-lock.js';

holdRealNodeLock();
let h: Harness;
let pool: string | undefined;

beforeAll(async () => {
  h = await harness('realkarp');
}, 120_000);

afterAll(async () => {
  await h?.stopAll();
  if (pool) await deleteNodePool(sandbox().kc, pool);
  await h?.cleanup();
});

const realNodes = async () => (await sandboxControl(sandbox().state.dir, 'GET', '/real-nodes')) as { nodes: string[]; details: Array<{ name: string; dir: string }> };
const realNodeNames = async () => (await realNodes()).nodes;

/** The end of a real node's kubelet log, for a test that timed out waiting for it. */
async function kubeletLogTail(name: string): Promise<string> {
  const dir = (await realNodes()).details.find((d) => d.name === name)?.dir;
  if (!dir) return `real node ${name} is not running (the daemon's log says why: karpenter-real-nodes)`;
  const log = join(dir, 'kubelet.log');
  const lines = existsSync(log) ? readFileSync(log, 'utf8').trimEnd().split('\n') : [`${log} does not exist`];
  return `the last lines of ${log}:\n${lines.slice(-30).join('\n')}`;
}

it('Karpenter launches a real node for a pending pod: its kubelet takes the Node over, it is verified and opened, the pod runs; the NodeClaim deleted, the real node stops', async () => {
  const image = realNodeProductImage(repoRoot());
  // Short: Karpenter's kwok provider names the node `kwok-<pool>-<random words and numbers>`, and the
  // real kubelet labels it kubernetes.io/hostname with that name, which must be at most 63 bytes.
  pool = uniqueName('rp');
  // A dedicated pool: its taint keeps other tests' pending pods off it; the worker tolerates it.
  const dedicated = { key: 'test.kube-node-ready.io/pool', value: pool, effect: 'NoSchedule' };
  await h.start({
    worker: {
      image: { repository: image.repository, digest: image.digest },
      scheduleTimeout: '60s',
      startTimeout: '120s',
      tolerations: [{ key: dedicated.key, operator: 'Equal', value: pool, effect: 'NoSchedule' }],
    },
    // Real nodes ask real CoreDNS: the "no ready endpoint" evidence reads its Service.
    reconciliation: { clusterDnsService: CLUSTER_DNS_SERVICE },
  });
  await createNodePool(sandbox().kc, { name: pool, real: {}, taints: [dedicated], startupTaints: [h.taint], labels: { [h.selector.key]: h.selector.value } });
  await sandbox()
    .kc.makeApiClient(k8s.AppsV1Api)
    .createNamespacedDeployment({
      namespace: h.namespace,
      body: {
        metadata: { name: 'app' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'app' } },
          template: {
            metadata: { labels: { app: 'app' } },
            spec: {
              terminationGracePeriodSeconds: 1,
              nodeSelector: { 'karpenter.sh/nodepool': pool },
              tolerations: [{ key: dedicated.key, operator: 'Equal', value: pool, effect: 'NoSchedule' }],
              containers: [
                { name: 'main', image: `${image.repository}@${image.digest}`, command: ['/nodejs/bin/node', '-e', 'setTimeout(() => {}, 3600_000)'], resources: { requests: { cpu: '100m', memory: '64Mi' } } },
              ],
            },
          },
        },
      },
    });

  const claim = await waitFor(async () => (await listNodeClaims(sandbox().kc, pool)).find((c) => c.status?.nodeName), `Karpenter to launch a node in NodePool ${pool}`, 120_000, 500);
  const name = claim.status!.nodeName!;
  // The real kubelet took the Node over: its runtime and version, Karpenter's labels and startup taint kept.
  // (Its start waits for the system node and CoreDNS when this is the sandbox's first real node.)
  const node = await waitFor(
    async () => {
      const n = await readNode(name);
      return n?.status?.nodeInfo?.containerRuntimeVersion?.startsWith('containerd://') ? n : undefined;
    },
    `the real kubelet of ${name} to take its Node over`,
    300_000,
  ).catch(async (err: unknown) => {
    throw new Error(`${String(err)}\n${await kubeletLogTail(name)}`);
  });
  expect(node.metadata?.labels?.[REAL_NODE_LABEL]).toBe('true');
  expect(node.metadata?.labels?.['karpenter.sh/nodepool']).toBe(pool);
  expect(node.spec?.providerID, 'the provider ID Karpenter matches its NodeClaim by').toBe(claim.status?.providerID);
  expect(await realNodeNames()).toContain(name);

  await h.waitForOpen([name], `the Karpenter real node ${name} to be verified and opened`, 300_000);
  expect((await verificationInPhase(name, 'Passed')).status?.attempt).toBe(1);
  await waitFor(
    async () => (await core().listNamespacedPod({ namespace: h.namespace, labelSelector: 'app=app' })).items.find((p) => p.spec?.nodeName === name && p.status?.phase === 'Running'),
    `the pending pod to run on ${name}`,
    120_000,
  );
  // Karpenter counts it initialized: Ready, its startup taint gone.
  await waitFor(
    async () => (await listNodeClaims(sandbox().kc, pool)).find((c) => c.metadata.name === claim.metadata.name)?.status?.conditions?.some((c) => c.type === 'Initialized' && c.status === 'True'),
    `NodeClaim ${claim.metadata.name} to be Initialized`,
    60_000,
  );

  // The instance goes with its NodeClaim: the Node is deleted, the real node stopped.
  await sandbox().kc.makeApiClient(k8s.AppsV1Api).deleteNamespacedDeployment({ namespace: h.namespace, name: 'app' });
  await sandbox().kc.makeApiClient(k8s.CustomObjectsApi).deleteClusterCustomObject({ ...NODECLAIMS, name: claim.metadata.name });
  await waitFor(async () => !(await realNodeNames()).includes(name) && (await readNode(name)) === undefined, `real node ${name} to stop once its NodeClaim is deleted`, 180_000);
}, 720_000);

// DaemonSet mode on a real node: the chart installed with `deploymentMode=daemonset` and the image
// from the sandbox's registry by digest; kube-controller-manager's DaemonSet controller places the
// agent on the real node, its kubelet pulls and runs it, the agent verifies its own node from the
// node's pod network and opens it (through the chart's admission policy, with its pod-bound token).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, sandboxControl } from '@kube-node-ready/sandbox';
import { CLUSTER_DNS_SERVICE } from '../../packages/sandbox/src/coredns.js';
import { realNodeProductImage } from '../../packages/sandbox/src/real-node.js';
import { CHART_DIR, helm } from '../chart/helm.js';
import { core, createNamespace, deleteNode, sandbox, uniqueName, verificationInPhase, waitFor } from '../sandbox.js';
import { holdRealNodeLock } from './machine-lock.js';

holdRealNodeLock();
let namespace = '';
let release = '';
let id = '';
let dir = '';
const nodes: string[] = [];
const taint = () => ({ key: `rds-${id}.kube-node-ready.io/unverified`, value: 'true', effect: 'NoSchedule' });
const verifiedLabel = () => ({ key: `rds-${id}.kube-node-ready.io/verified`, value: 'true' });
const placement = () => ({ [`rds-${id}.kube-node-ready.io/pool`]: 'true' });
const helmKube = (args: string[]) => helm([...args, '--kubeconfig', sandbox().state.kubeconfig]);

beforeAll(async () => {
  namespace = await createNamespace('rds');
  id = namespace.split('-').pop() as string;
  release = `knr-${id}`;
  const image = realNodeProductImage(repoRoot());
  const values = {
    deploymentMode: 'daemonset',
    image: { repository: image.repository, digest: image.digest },
    daemonset: { nodeSelector: placement() },
    config: {
      worker: { timeout: '30s' },
      // The real nodes' cluster DNS is CoreDNS's Service (docs/sandbox.md, Real nodes).
      reconciliation: { initialBackoff: '1s', maxBackoff: '2s', maxRetries: 2, clusterDnsService: CLUSTER_DNS_SERVICE },
      nodeManagement: { taints: [taint()], verifiedLabel: verifiedLabel(), condition: { type: `rds-${id}.kube-node-ready.io/NetworkVerified` } },
    },
  };
  dir = mkdtempSync(join(tmpdir(), 'knr-rds-'));
  writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
  const install = await helmKube(['install', release, CHART_DIR, '--namespace', namespace, '--values', join(dir, 'values.json')]);
  if (install.code !== 0) throw new Error(`helm install --set deploymentMode=daemonset: ${install.stderr}`);
}, 180_000);

afterAll(async () => {
  for (const n of nodes) {
    await sandboxControl(sandbox().state.dir, 'POST', `/remove-real-node/${n}`).catch(() => undefined);
    await deleteNode(n);
  }
  if (release) await helmKube(['uninstall', release, '--namespace', namespace]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('DaemonSet mode on a real node', () => {
  it("the agent, placed by the DaemonSet controller and run by the node's kubelet from the image, verifies its own node and opens it", async () => {
    const name = uniqueName('real-ds');
    const t = taint();
    const [key, value] = Object.entries(placement())[0]!;
    const query = new URLSearchParams([
      ['taint', `${t.key}=${t.value}:${t.effect}`],
      ['label', `${key}=${value}`],
    ]);
    await sandboxControl(sandbox().state.dir, 'POST', `/add-real-node/${name}?${query.toString()}`, 300_000);
    nodes.push(name);
    const describePods = async () =>
      (await core().listNamespacedPod({ namespace, fieldSelector: `spec.nodeName=${name}` })).items.map((p) => `${p.metadata?.name} ${p.status?.phase} ${JSON.stringify(p.status?.containerStatuses?.[0]?.state ?? {})}`).join('; ') || '(no pod)';
    await waitFor(
      async () => (await core().readNode({ name })).metadata?.labels?.[verifiedLabel().key] === verifiedLabel().value,
      `the agent to open the real node ${name}`,
      240_000,
      500,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\npods on ${name}: ${await describePods()}`, { cause: err });
    });
    const node = await core().readNode({ name });
    expect((node.spec?.taints ?? []).map((x) => x.key)).not.toContain(t.key);
    const nv = await verificationInPhase(name, 'Passed');
    expect(nv.status?.attempt).toBe(1);
  }, 300_000);
});

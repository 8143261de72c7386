// The readiness gates' sources against the real apiserver, with kube-controller-manager's DaemonSet
// controller, the scheduler and the simulated kubelet: a required DaemonSet's pod turning Ready on a
// node wakes that node, its CSINode's drivers changing wakes it too, a change of where the DaemonSet
// runs wakes every node, and evaluateGates() read from these caches follows each step.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '@kube-node-ready/core';
import { k8s } from '@kube-node-ready/sandbox';
import { realClock } from '../../../../clock.js';
import { KubeClient } from '../../../../kube/client.js';
import { addNode, core, createNamespace, deleteNode, sandbox, uniqueName, waitFor } from '../../../../../../../test/sandbox.js';
import { parseGatesConfig } from './config.js';
import { evaluateGates } from './evaluate.js';
import { GateSources } from './sources.js';

const OURS = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
const PICK = 'test.kube-node-ready.io/gate-agent';

let namespace: string;
let node: string;
let sources: GateSources | undefined;

beforeAll(async () => {
  namespace = await createNamespace('gates');
  node = await addNode({ prefix: 'gates', labels: { [PICK]: 'yes' } });
}, 60_000);

afterAll(async () => {
  await sources?.stop();
  if (node) await deleteNode(node);
  if (namespace) await core().deleteNamespace({ name: namespace }).catch(() => undefined);
});

it('a required DaemonSet\'s pod turning Ready on a node wakes that node; its CSINode\'s drivers and the DaemonSet\'s template wake too; evaluateGates follows', async () => {
  const apps = sandbox().kc.makeApiClient(k8s.AppsV1Api);
  const storage = sandbox().kc.makeApiClient(k8s.StorageV1Api);
  const driver = `${uniqueName('gate')}.csi.example.com`;
  const gates = parseGatesConfig({ requireDaemonSets: [{ namespace, selector: { matchLabels: { tier: 'node' } } }], requireCSIDrivers: [driver] });
  const kube = new KubeClient(sandbox().kc, { qps: 50, burst: 50, clock: realClock, log: silentLogger() });
  // The node as the controller would read it: closed by our taint (the DaemonSet tolerates every taint).
  const closed = (): k8s.V1Node => ({ metadata: { name: node, labels: { [PICK]: 'yes' } }, spec: { taints: [OURS] } });
  /** Each wake of our node, with what the gates said at that moment. */
  const wakes: string[][] = [];
  let wokeAll = 0;
  const s = (sources = new GateSources({
    kube,
    clock: realClock,
    log: silentLogger(),
    gates: [gates],
    watchTimeoutSeconds: 5,
  }));
  s.on({
    wake: (n) => {
      if (n === node) wakes.push(evaluateGates(closed(), gates, s, [OURS]).waitingFor);
    },
    wakeAll: () => wokeAll++,
  });
  await s.start();
  const verdict = () => evaluateGates(closed(), gates, s, [OURS]);
  const pods = async () =>
    (await core().listNamespacedPod({ namespace })).items
      .map((p) => `${p.metadata?.name} on ${p.spec?.nodeName ?? '-'} ${p.status?.phase} ready=${p.status?.conditions?.find((c) => c.type === 'Ready')?.status}`)
      .join('; ') || 'none';
  const seen = async () => `wakes: ${JSON.stringify(wakes)}, wakeAll: ${wokeAll}, verdict: ${JSON.stringify(verdict())}, health: ${JSON.stringify(s.health())}, pods: ${await pods()}`;
  const until = async (what: string, holds: () => boolean, timeoutMs = 60_000): Promise<void> => {
    await waitFor(async () => holds(), what, timeoutMs).catch(async (err: unknown) => {
      throw new Error(`${String(err)}\n${await seen()}`);
    });
  };
  const dsWaits = (lines: readonly string[]) => lines.some((l) => l.startsWith(`DaemonSet ${namespace}/gate-agent`));

  await apps.createNamespacedDaemonSet({
    namespace,
    body: {
      metadata: { name: 'gate-agent', labels: { tier: 'node' } },
      spec: {
        selector: { matchLabels: { 'app.kubernetes.io/name': 'gate-agent' } },
        template: {
          metadata: { labels: { 'app.kubernetes.io/name': 'gate-agent' } },
          spec: { nodeSelector: { [PICK]: 'yes' }, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'agent', image: 'sandbox-shell', command: ['/bin/sh', '-c', 'exec sleep 3600'] }] },
        },
      },
    },
  });
  // A new required DaemonSet: every node may wait for it now.
  await until('wakeAll once the DaemonSet appears', () => wokeAll > 0);
  // Its pod appears on the node (a wake while not Ready), then turns Ready: a wake at which the gate holds.
  await until('a wake of the node at which its DaemonSet pod is Ready', () => wakes.some((w) => !dsWaits(w)), 90_000);
  expect(wakes.some(dsWaits), await seen()).toBe(true);
  expect(verdict().waitingFor, await seen()).toEqual([`CSI driver ${driver} not registered (the node has no CSINode yet)`]);

  // Its CSINode registers the driver: the node is woken and every gate holds.
  const before = wakes.length;
  await storage.createCSINode({ body: { metadata: { name: node }, spec: { drivers: [{ name: driver, nodeID: node }] } } });
  try {
    await until('a wake of the node by its CSINode', () => wakes.length > before && wakes.at(-1)?.length === 0);
    expect(verdict(), await seen()).toEqual({ held: true, waitingFor: [], notAwaited: [] });
  } finally {
    await storage.deleteCSINode({ name: node }).catch(() => undefined);
  }

  // The DaemonSet stops tolerating the verification taint: every node may be affected (wakeAll), and
  // a closed node does not wait for it, saying why.
  const all = wokeAll;
  await apps.patchNamespacedDaemonSet({ namespace, name: 'gate-agent', body: [{ op: 'replace', path: '/spec/template/spec/tolerations', value: [{ key: 'example.com/other', operator: 'Exists' }] }] });
  await until('wakeAll once the DaemonSet\'s tolerations changed', () => wokeAll > all);
  expect(verdict().notAwaited, await seen()).toEqual([
    `DaemonSet ${namespace}/gate-agent: not awaited: it does not tolerate the verification taint node-ready/unverified=true:NoSchedule, so it can only run once the node is open`,
  ]);
}, 180_000);

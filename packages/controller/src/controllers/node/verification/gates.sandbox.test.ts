// Readiness gates end to end against the real apiserver, with kube-controller-manager's DaemonSet
// controller, the scheduler and the simulated kubelet (its readiness probes):
// - a required DaemonSet whose pod turns Ready 20 s after it starts keeps the node closed, with no
//   attempt used, until then (the first worker pod is created after the DaemonSet pod is Ready);
//   a required DaemonSet that does not tolerate the verification taint is not waited for;
// - a CSI gate and a resource gate (mode before) hold the node until its CSINode registers the
//   driver and its allocatable shows the resource; in mode parallel the worker runs at once and
//   the passed node opens once the resource appears.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { k8s } from '@kube-node-ready/sandbox';
import type { ControllerConfigInput } from '../../../config/schema.js';
import { harness, nodeEventsWhen, progressOf, readNode, verificationCondition, waitFor, type Harness } from '../../../../test/harness.js';
import { core, createNamespace, readVerification, sandbox } from '../../../../../../test/sandbox.js';

let h: Harness;
let namespace: string;

beforeAll(async () => {
  h = await harness('ctlgates');
  namespace = await createNamespace('gates');
}, 60_000);

afterAll(async () => {
  await h?.cleanup();
  if (namespace) await core().deleteNamespace({ name: namespace }).catch(() => undefined);
});

const POOL = 'gates.kube-node-ready.test/pool';
const DS_READY_AFTER_S = 20;

/** A DaemonSet of `sleep` pods on the nodes of `pool`; `tolerateAll`: it runs beside every taint (ours too); `readyAfterS`: its pod turns Ready that long after it starts (a readiness probe). */
function daemonSet(name: string, pool: string, opts: { tolerateAll: boolean; readyAfterS?: number }): k8s.V1DaemonSet {
  return {
    metadata: { name },
    spec: {
      selector: { matchLabels: { 'app.kubernetes.io/name': name } },
      template: {
        metadata: { labels: { 'app.kubernetes.io/name': name } },
        spec: {
          nodeSelector: { [POOL]: pool },
          ...(opts.tolerateAll ? { tolerations: [{ operator: 'Exists' }] } : {}),
          containers: [
            {
              name: 'agent',
              image: 'sandbox-shell',
              command: ['/bin/sh', '-c', 'exec sleep 3600'],
              ...(opts.readyAfterS ? { readinessProbe: { exec: { command: ['/bin/sh', '-c', 'true'] }, initialDelaySeconds: opts.readyAfterS, periodSeconds: 1 } } : {}),
            },
          ],
        },
      },
    },
  };
}

/** The pods of DaemonSet `name` on `node`: name, phase, Ready and its last transition. */
async function daemonPods(name: string, node: string): Promise<Array<{ name: string; phase?: string; ready?: string; readyAt?: string }>> {
  const pods = await core().listNamespacedPod({ namespace, labelSelector: `app.kubernetes.io/name=${name}`, fieldSelector: `spec.nodeName=${node}` });
  return pods.items.map((p) => {
    const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
    return { name: p.metadata?.name ?? '', ...(p.status?.phase ? { phase: p.status.phase } : {}), ...(ready ? { ready: ready.status, readyAt: String(ready.lastTransitionTime) } : {}) };
  });
}

describe('readiness gates', () => {
  it('a DaemonSet pod Ready 20 s after the node keeps it closed, with no attempt used, until then; a DaemonSet that does not tolerate the verification taint is not waited for', async () => {
    const apps = sandbox().kc.makeApiClient(k8s.AppsV1Api);
    await apps.createNamespacedDaemonSet({ namespace, body: daemonSet('slow-agent', 'ds', { tolerateAll: true, readyAfterS: DS_READY_AFTER_S }) });
    await apps.createNamespacedDaemonSet({ namespace, body: daemonSet('after-open', 'ds', { tolerateAll: false }) });
    const ctl = await h.start({
      gates: { requireDaemonSets: [{ namespace, name: 'slow-agent' }, { namespace, name: 'after-open' }] },
    } as ControllerConfigInput);
    const node = await h.addNode({ prefix: 'gate-ds', labels: { [POOL]: 'ds' } });
    const seen = async () => `node ${node}: ${JSON.stringify(await progressOf(node))}, condition ${JSON.stringify(await verificationCondition(node))}, slow-agent pods ${JSON.stringify(await daemonPods('slow-agent', node))}, after-open pods ${JSON.stringify(await daemonPods('after-open', node))}`;
    const explain = async (err: unknown): Promise<never> => {
      throw new Error(`${String(err)}\n${await seen()}`, { cause: err });
    };

    // While the DaemonSet pod is not Ready the node waits for it (recorded once it has waited 10 s),
    // without an attempt, and the condition names it but not the DaemonSet that cannot run yet.
    const waiting = await waitFor(async () => {
      const c = await verificationCondition(node);
      return c?.reason === 'WaitingForGates' ? c : undefined;
    }, `${node}'s NodeVerification to say it waits for its gates`, 60_000).catch(explain);
    expect(waiting.message).toContain(`DaemonSet ${namespace}/slow-agent: `);
    expect(waiting.message).not.toContain('after-open');
    expect(await progressOf(node), await seen()).toMatchObject({ phase: 'Waiting', attempt: '0' });
    const events = await nodeEventsWhen(node, (list) => list.some((e) => e.reason === 'VerificationWaitingForGates'), 'the VerificationWaitingForGates Event');
    expect(events.find((e) => e.reason === 'VerificationWaitingForGates')?.message).toContain(`no attempt until the node's readiness gates hold; waiting for: DaemonSet ${namespace}/slow-agent`);

    // Then its pod turns Ready and the node is verified: one attempt, launched after the pod was Ready.
    await h.waitForOpen([node], 'the node to open once its DaemonSet pod is Ready', 120_000).catch(explain);
    const [pod] = await daemonPods('slow-agent', node);
    expect(pod?.ready, await seen()).toBe('True');
    const status = (await readVerification(node))?.status;
    expect(status, await seen()).toMatchObject({ phase: 'Passed', attempt: 1, failures: 0 });
    const firstLaunch = Date.parse(String(status?.firstLaunchAt));
    // Timestamps of whole seconds on the pod's side: the launch is no earlier than the second it turned Ready.
    expect(firstLaunch, await seen()).toBeGreaterThanOrEqual(Date.parse(String(pod?.readyAt)));
    expect(ctl.logs.some((l) => l['node'] === node && String(l['msg']).includes('waiting for the readiness gates before the first attempt'))).toBe(true);
    // The DaemonSet that could not run on the closed node runs now that it is open.
    await waitFor(async () => ((await daemonPods('after-open', node)).length > 0 ? true : undefined), `an after-open pod on ${node} once it is open`).catch(explain);
  }, 240_000);

  it('a CSI gate and a resource gate hold the node until its CSINode and allocatable say so; in mode parallel the passed node opens once they hold', async () => {
    const driver = 'disk.csi.kube-node-ready.test';
    const resource = 'kube-node-ready.test/widget';
    await h.stopAll();
    const ctl = await h.start({
      profiles: [
        { name: 'storage', nodeSelector: { matchLabels: { [POOL]: 'storage' } }, gates: { requireCSIDrivers: [driver], requireResources: { [resource]: 2 } } },
        { name: 'parallel', nodeSelector: { matchLabels: { [POOL]: 'parallel' } }, gates: { mode: 'parallel', requireResources: { [resource]: 1 } } },
      ],
    } as ControllerConfigInput);
    const [storage, parallel] = await Promise.all([h.addNode({ prefix: 'gate-csi', labels: { [POOL]: 'storage' } }), h.addNode({ prefix: 'gate-par', labels: { [POOL]: 'parallel' } })]);
    const seen = async () =>
      `${storage}: ${JSON.stringify(await progressOf(storage))} ${JSON.stringify(await verificationCondition(storage))}; ${parallel}: ${JSON.stringify(await progressOf(parallel))} ${JSON.stringify(await verificationCondition(parallel))}`;
    const explain = async (err: unknown): Promise<never> => {
      throw new Error(`${String(err)}\n${await seen()}`, { cause: err });
    };
    const conditionSays = (node: string, reason: string, text: string) =>
      waitFor(async () => {
        const c = await verificationCondition(node);
        return c?.reason === reason && c.message?.includes(text) ? c : undefined;
      }, `${node}'s condition ${reason} saying "${text}"`, 60_000).catch(explain);
    /** What a device plugin registering does: the kubelet puts the resource in capacity and allocatable. */
    const advertise = (node: string, count: string) =>
      core().patchNodeStatus({ name: node, body: { status: { capacity: { [resource]: count }, allocatable: { [resource]: count } } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));

    // mode before: both gates named, no attempt.
    await conditionSays(storage, 'WaitingForGates', `CSI driver ${driver} not registered (the node has no CSINode yet); allocatable ${resource}: none, need 2`);
    // mode parallel: the worker ran and passed; the node stays closed for the resource.
    await conditionSays(parallel, 'WaitingForGates', `attempt 1 passed; the node opens once its readiness gates hold; waiting for: allocatable ${resource}: none, need 1`);
    expect((await readNode(parallel))?.spec?.taints?.some((t) => t.key === h.taint.key), await seen()).toBe(true);

    // The CSINode registers the driver: only the resource is left; too little of it is not enough.
    const csi = sandbox().kc.makeApiClient(k8s.StorageV1Api);
    await csi.createCSINode({ body: { metadata: { name: storage }, spec: { drivers: [{ name: driver, nodeID: storage }] } } });
    await advertise(storage, '1');
    await conditionSays(storage, 'WaitingForGates', `waiting for: allocatable ${resource}: 1, need 2`);
    expect(await progressOf(storage), await seen()).toMatchObject({ phase: 'Waiting', attempt: '0' });

    // Enough of it: the storage node is verified (its first attempt now), the parallel one opens.
    await Promise.all([advertise(storage, '2'), advertise(parallel, '1')]);
    await h.waitForOpen([storage, parallel], 'both nodes to open once their gates hold', 120_000).catch(explain);
    expect((await readVerification(storage))?.status, await seen()).toMatchObject({ phase: 'Passed', attempt: 1, failures: 0 });
    expect((await readVerification(parallel))?.status, await seen()).toMatchObject({ phase: 'Passed', attempt: 1, failures: 0 });
    expect(await ctl.counter('kube_node_ready_verifications_total{status="success",profile="storage"}'), await seen()).toBe(1);
    await csi.deleteCSINode({ name: storage }).catch(() => undefined);
  }, 240_000);
});

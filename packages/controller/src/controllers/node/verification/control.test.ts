// ControlRuns' own logic: which node runs the control, what its pod is, when an answer holds. Its
// use by the controller against the real API server: cluster-wide.sandbox.test.ts.
import { Profiles } from '../../../config/profiles.js';
import { WorkerConfigMap } from './worker-config.js';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kube-node-ready/core';
import { PodAnnotation } from '../../../api/well-known.js';
import { aNode, summaryText, testConfig, testProgress } from '../../../testing/builders.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { Phase } from './types.js';
import { CONTROL_FOR_ANNOTATION, CONTROL_LABEL, CONTROL_VALID_MS, ControlRuns, isControlPod } from './control.js';

const config = testConfig();
const ZONE = 'topology.kubernetes.io/zone';

function setup(nodes: V1Node[], opts: { refuse?: boolean } = {}) {
  const clock = new FakeClock();
  /** false: the pod cache lags (control pods are read live). */
  const cache = { visible: true };
  const pods = new Map<string, V1Pod>();
  const deleted: string[] = [];
  const results: string[] = [];
  const runs = new ControlRuns({
    config,
    clock,
    log: silentLogger(),
    kube: {
      createPod: async (pod) => {
        if (opts.refuse) throw Object.assign(new Error('admission webhook "quota" denied the request'), { code: 403, body: { reason: 'Forbidden', message: 'denied' } });
        const created = { ...structuredClone(pod), status: { phase: 'Pending' } };
        created.metadata!.creationTimestamp = new Date(clock.now());
        pods.set(pod.metadata!.name!, created);
        return created;
      },
      getPod: async (_ns, name) => pods.get(name),
      deletePod: async (_ns, name) => {
        deleted.push(name);
        pods.delete(name);
      },
    },
    nodes: { list: () => nodes, get: (name) => nodes.find((n) => n.metadata?.name === name) },
    progress: testProgress,
    pods: { list: () => (cache.visible ? [...pods.values()] : []), get: (name) => (cache.visible ? pods.get(name) : undefined) },
    worker: { image: 'kube-node-ready:test', configs: new WorkerConfigMap(new Profiles(config)) },
    observed: (r) => results.push(r),
  });
  /** The control pod's container exits with a summary of these checks. */
  const finish = (checks: Record<string, boolean>) => {
    const pod = [...pods.values()].at(-1)!;
    const at = new Date(clock.now());
    const summary = summaryText(Object.entries(checks).map(([name, ok]) => ({ name, ok, durationMs: 5, ...(ok ? {} : { error: 'timeout' }) })));
    pod.status = {
      phase: Object.values(checks).every(Boolean) ? 'Succeeded' : 'Failed',
      containerStatuses: [{ name: 'worker', image: '', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: Object.values(checks).every(Boolean) ? 0 : 1, message: summary, startedAt: at, finishedAt: at } } }],
    };
  };
  return { clock, pods, deleted, results, runs, finish, cache };
}

const verified = (name: string, verifiedAt: number, zone?: string) => {
  const b = aNode(name).verified().withState({ attempt: 1, failures: 0, phase: Phase.Passed, verifiedAt });
  return (zone ? b.label(ZONE, zone) : b).build();
};
const failing = (zone?: string) => (zone ? aNode('new-1').tainted().label(ZONE, zone) : aNode('new-1').tainted()).build();

describe('ControlRuns', () => {
  it('runs only the failed checks on the most recently verified node of the failing node\'s zone, as a worker pod the node\'s own verification ignores', async () => {
    const nodes = [verified('old-a', 1_000, 'a'), verified('new-b', 9_000, 'b'), verified('new-a', 5_000, 'a'), aNode('unverified').build()];
    const { runs, pods } = setup(nodes);
    expect(await runs.verdict(['tcp', 'dns'], failing('a'))).toEqual({ kind: 'pending', node: 'new-a' });
    const [pod] = [...pods.values()];
    expect(pod?.spec?.containers[0]?.args?.slice(-2)).toEqual(['--checks', 'dns,tcp']);
    expect(pod?.metadata?.labels?.[CONTROL_LABEL]).toBe('dns.tcp');
    expect(pod?.metadata?.annotations).toEqual({ [CONTROL_FOR_ANNOTATION]: 'new-1' });
    expect(pod?.metadata?.annotations?.[PodAnnotation.NodeName]).toBeUndefined();
    expect(pod?.metadata?.ownerReferences?.[0]?.name).toBe('new-a');
    expect(JSON.stringify(pod?.spec?.affinity)).toContain('"values":["new-a"]');
    expect(isControlPod(pod!)).toBe(true);
    // Without a zone of its own, the most recently verified node anywhere.
    const other = setup(nodes);
    expect(await other.runs.verdict(['dns'], failing())).toEqual({ kind: 'pending', node: 'new-b' });
  });

  it('a node the worker cannot run on now is not a control: not Ready, tainted, deleting, not Linux', async () => {
    const nodes = [
      aNode('notready').verified().notReady().build(),
      aNode('tainted').verified().withTaints({ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }).build(),
      aNode('deleting').verified().deleting().build(),
      aNode('windows').verified().label('kubernetes.io/os', 'windows').build(),
    ];
    const { runs, pods, results } = setup(nodes);
    expect(await runs.verdict(['dns'], failing())).toEqual({ kind: 'unavailable', why: expect.stringMatching(/^no verified node can run one now: /) });
    expect(pods.size).toBe(0);
    expect(results).toEqual(['unavailable']);
  });

  it('one run answers every node failing the same checks while it runs and for CONTROL_VALID_MS after; then a new one runs', async () => {
    const { runs, pods, deleted, clock, finish, results } = setup([verified('v', 1_000)]);
    expect((await runs.verdict(['dns'], failing())).kind).toBe('pending');
    expect((await runs.verdict(['dns'], failing())).kind).toBe('pending');
    expect(pods.size).toBe(1);
    const [name] = [...pods.keys()];
    finish({ dns: true });
    expect(await runs.verdict(['dns'], failing())).toEqual({ kind: 'passed', node: 'v', checks: ['dns'] });
    expect(deleted).toEqual([name]);
    await clock.advance(CONTROL_VALID_MS);
    expect(await runs.verdict(['dns'], failing())).toEqual({ kind: 'passed', node: 'v', checks: ['dns'] });
    await clock.advance(1);
    expect((await runs.verdict(['dns'], failing())).kind).toBe('pending');
    finish({ dns: false });
    expect(await runs.verdict(['dns'], failing())).toMatchObject({ kind: 'failed', node: 'v', checks: ['dns'] });
    expect(results).toEqual(['passed', 'failed']);
  });

  it('two reconciles reading the finished pod live at once end the run once', async () => {
    const { runs, deleted, clock, finish, results, cache } = setup([verified('v', 1_000)]);
    await runs.verdict(['dns'], failing());
    cache.visible = false;
    finish({ dns: true });
    await clock.advance(10_000);
    const both = await Promise.all([runs.verdict(['dns'], failing()), runs.verdict(['dns'], failing())]);
    expect(both.map((v) => v.kind)).toEqual(['passed', 'passed']);
    expect(results).toEqual(['passed']);
    expect(deleted).toHaveLength(1);
  });

  it('a control pod that gives no summary, or that the API refuses, answers nothing', async () => {
    const gone = setup([verified('v', 1_000)]);
    await gone.runs.verdict(['dns'], failing());
    gone.pods.clear();
    await gone.clock.advance(10_000);
    expect(await gone.runs.verdict(['dns'], failing())).toEqual({ kind: 'unavailable', why: expect.stringMatching(/^the control pod knr-control-dns-\w+ is gone$/) });

    const refused = setup([verified('v', 1_000)], { refuse: true });
    expect(await refused.runs.verdict(['dns'], failing())).toEqual({ kind: 'unavailable', why: expect.stringMatching(/^the API server refused the control pod/) });
    expect(refused.deleted).toEqual([]);
  });

  it('sweep deletes control pods nobody waits for (a previous leader\'s)', async () => {
    const { runs, pods, deleted } = setup([verified('v', 1_000)]);
    pods.set('knr-control-dns-old', { metadata: { name: 'knr-control-dns-old', labels: { [CONTROL_LABEL]: 'dns' } } });
    pods.set('knr-worker', { metadata: { name: 'knr-worker', labels: {} } });
    await runs.verdict(['dns'], failing());
    await runs.sweep();
    expect(deleted).toEqual(['knr-control-dns-old']);
  });
});

// Container checks against the sandbox's API server and simulated kubelet: the worker pod that
// pod-spec.ts builds with container checks is accepted and run (one pod, the worker and each check
// a container), and evaluateWorkerPod reads each check's result from the pod status the kubelet
// reports: a pass, a failure printed to stdout (FallbackToLogsOnError), an image that cannot start
// and a timeout, each ending the attempt as docs/worker.md says. The simulated kubelet runs a
// container's image as a local command (docs/sandbox.md): the checks use `sandbox-shell` (/bin/sh);
// an image it has no command for cannot start (CreateContainerError), as an unpullable image would not.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addNode, core, createNamespace, deleteNode, readPod, waitFor } from '../../../../../../test/sandbox.js';
import type { ControllerConfig } from '../../../config/schema.js';
import { testConfig } from '../../../testing/builders.js';
import { containerCheckSchema, type ContainerCheckInput } from './container-checks.js';
import { evaluateWorkerPod } from './pod-result.js';
import { buildWorkerPod } from './pod-spec.js';
import { Outcome, type AttemptResult } from './types.js';

let namespace = '';
let node = '';
let config: ControllerConfig;
let n = 0;

beforeAll(async () => {
  namespace = await createNamespace('cc');
  config = testConfig({ worker: { namespace, serviceAccountName: 'default', configMapName: 'knr-cc', priorityClassName: '' } });
  await core().createNamespacedConfigMap({ namespace, body: { metadata: { name: 'knr-cc' }, data: { 'worker.yaml': '{}' } } });
  node = await addNode({ prefix: 'cc' });
}, 60_000);

afterAll(async () => {
  if (node) await deleteNode(node);
  if (namespace) await core().deleteNamespace({ name: namespace }).catch(() => undefined);
});

/**
 * Runs a worker pod with these checks on the test node (the worker: the sandbox's worker that passes
 * at once, or `worker` as a shell command) and returns the attempt's result once evaluateWorkerPod
 * says it is done, with how long that took from the pod's creation.
 */
async function attempt(checks: ContainerCheckInput[], worker?: string): Promise<{ result: AttemptResult; tookMs: number; pod: V1Pod }> {
  const nodeObject = await core().readNode({ name: node });
  const pod = buildWorkerPod({
    node: nodeObject,
    attempt: ++n,
    podName: `knr-cc-${n}-${namespace.split('-').pop()}`,
    config,
    image: worker ? 'sandbox-shell' : 'kube-node-ready-instant',
    configHash: 'test',
    containerChecks: checks.map((c) => containerCheckSchema.parse(c)),
  });
  if (worker) pod.spec!.containers[0]!.command = ['/bin/sh', '-c', worker];
  const created = await core().createNamespacedPod({ namespace, body: pod });
  const start = Date.now();
  let last: V1Pod | undefined;
  try {
    const result = await waitFor(
      async () => {
        last = await readPod(namespace, created.metadata!.name!);
        const progress = last && evaluateWorkerPod(last, Date.now(), config.worker);
        return progress?.done ? progress.result : undefined;
      },
      `the attempt of pod ${created.metadata!.name!} to finish`,
      90_000,
      250,
    );
    return { result, tookMs: Date.now() - start, pod: last! };
  } catch (err) {
    throw new Error(`${(err as Error).message}\npod status: ${JSON.stringify(last?.status)}`, { cause: err });
  }
}

const sh = (name: string, script: string, extra: Partial<ContainerCheckInput> = {}): ContainerCheckInput => ({ name, image: 'sandbox-shell', command: ['/bin/sh', '-c', script], ...extra });

describe('container checks in the worker pod', () => {
  it('each check is reported on its own: a pass, a write to /tmp read back, and a failure printed to stdout', async () => {
    const { result, pod } = await attempt([
      sh('fine', 'exit 0'),
      sh('scratch', 'echo "$NODE_NAME" > /tmp/probe && [ "$(cat /tmp/probe)" = "$NODE_NAME" ]'),
      sh('disk', 'echo "disk /data is read-only"; exit 1'),
    ]);
    expect(pod.spec?.containers.map((c) => c.name)).toEqual(['worker', 'fine', 'scratch', 'disk']);
    expect(result.outcome).toBe(Outcome.ChecksFailed);
    expect(result.message).toBe('check failed: disk: exit code 1: disk /data is read-only');
    expect(result.failedChecks).toEqual(['disk']);
    expect(result.checks.map((c) => [c.name, c.ok, c.error])).toEqual([
      ['fine', true, undefined],
      ['scratch', true, undefined],
      ['disk', false, 'exit code 1: disk /data is read-only'],
    ]);
    expect(pod.status?.phase).toBe('Failed'); // a finished pod: kept for `kubectl logs` by keepFailedPods
  }, 120_000);

  it('all pass: the attempt passes, naming the checks', async () => {
    const { result } = await attempt([sh('fine', 'exit 0')]);
    expect(result.outcome).toBe(Outcome.Passed);
    expect(result.message).toMatch(/^all checks passed in \S+ \(fine\)$/);
  }, 120_000);

  it('a check that cannot start fails at once with the kubelet\'s reason, while the worker still runs', async () => {
    const { result, tookMs, pod } = await attempt([{ name: 'gpu', image: 'registry.example.com/no-such-check:1' }], 'sleep 60');
    expect(result.outcome).toBe(Outcome.ChecksFailed);
    expect(result.message).toMatch(/^check failed: gpu: CreateContainerError: .*no-such-check.* \(before the worker's checks finished\)$/);
    expect(tookMs).toBeLessThan(30_000);
    expect(pod.status?.containerStatuses?.find((c) => c.name === 'worker')?.state?.running).toBeDefined();
    await core().deleteNamespacedPod({ namespace, name: pod.metadata!.name!, gracePeriodSeconds: 0 });
  }, 120_000);

  it('a check still running after its timeout fails as timed out', async () => {
    const { result, pod } = await attempt([sh('slow', 'sleep 60', { timeout: '2s' })]);
    expect(result.outcome).toBe(Outcome.ChecksFailed);
    expect(result.message).toMatch(/^check failed: slow: timeout: still running \d+(\.\d+)?s after it started \(timeout 2s\)$/);
    await core().deleteNamespacedPod({ namespace, name: pod.metadata!.name!, gracePeriodSeconds: 0 });
  }, 120_000);
});

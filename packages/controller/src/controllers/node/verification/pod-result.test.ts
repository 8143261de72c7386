import { describe, expect, it } from 'vitest';
import { aNode, aWorkerPod, summaryText, testConfig } from '../../../testing/builders.js';
import { containerCheckSchema } from './container-checks.js';
import { evaluateWorkerPod, MAX_MESSAGE, RUN_GRACE_MS, type PodProgress } from './pod-result.js';
import { Outcome } from './types.js';

const T0 = Date.UTC(2025, 0, 1, 0, 0, 0);
const S = 1000;
const config = testConfig(); // scheduleTimeout 2m, startTimeout 3m, timeout 60s
const node = aNode('node-1').tainted().build();
const pod = () => aWorkerPod(node, 1).createdAt(T0);

function outcome(progress: PodProgress): { outcome: string; message: string } | { waiting: string; requeueAfterMs: number } {
  return progress.done
    ? { outcome: progress.result.outcome, message: progress.result.message }
    : { waiting: progress.stage, requeueAfterMs: progress.requeueAfterMs };
}

describe('evaluateWorkerPod: in progress, with the time left until its next deadline', () => {
  it.each([
    ['just created, not scheduled', pod().build(), T0 + 10 * S, { waiting: 'Scheduling', requeueAfterMs: 110 * S }],
    ['unschedulable but within scheduleTimeout', pod().unschedulable().build(), T0 + 119 * S, { waiting: 'Scheduling', requeueAfterMs: S }],
    ['scheduled, pulling its image', pod().scheduledAt(T0 + 5 * S).waiting('ContainerCreating').build(), T0 + 65 * S, { waiting: 'Starting', requeueAfterMs: 120 * S }],
    ['running', pod().scheduledAt(T0).runningSince(T0 + 10 * S).build(), T0 + 20 * S, { waiting: 'Running', requeueAfterMs: 50 * S + RUN_GRACE_MS }],
  ])('%s', (_name, p, now, expected) => {
    expect(outcome(evaluateWorkerPod(p, now, config.worker))).toEqual(expected);
  });
});

describe('evaluateWorkerPod: outcomes', () => {
  it.each([
    ['exit 0 with a passing summary', pod().scheduledAt(T0).passed(['dns', 'api']).build(), T0, Outcome.Passed, 'all checks passed in 24ms (dns, api)'],
    [
      'exit 1 naming the failed checks and their errors',
      pod().scheduledAt(T0).checksFailed({ dns: 'kubernetes.default.svc.cluster.local: SERVFAIL from 10.96.0.10' }).build(),
      T0,
      Outcome.ChecksFailed,
      'check failed: dns: kubernetes.default.svc.cluster.local: SERVFAIL from 10.96.0.10',
    ],
    ['several failed checks', pod().scheduledAt(T0).checksFailed({ dns: 'timeout', tcp: 'connection refused' }).build(), T0, Outcome.ChecksFailed, 'checks failed: dns: timeout; tcp: connection refused'],
    ['exit 2: configuration error', pod().exited(2, summaryText([], { ok: false, error: 'checks.dns.names: expected a list' })).build(), T0, Outcome.WorkerError, 'the worker exited with code 2 (configuration error): checks.dns.names: expected a list'],
    ['exit 3: internal error, unstructured message', pod().exited(3, 'TypeError: boom\n    at x').build(), T0, Outcome.WorkerError, 'the worker exited with code 3 (internal error): TypeError: boom'],
    ['OOM killed', pod().exited(137, '', { reason: 'OOMKilled' }).build(), T0, Outcome.WorkerError, 'the worker exited with code 137 (OOMKilled)'],
    ['exit 0 with a malformed summary', pod().exited(0, 'hello').build(), T0, Outcome.WorkerError, 'the worker exited with code 0 but its summary is unusable: termination message is not JSON: "hello"'],
    ['exit 0 with no summary at all', pod().exited(0, '').build(), T0, Outcome.WorkerError, 'the worker exited with code 0 but its summary is unusable: empty termination message'],
    ['exit 1 with a summary of the wrong version', pod().exited(1, '{"v":2}').build(), T0, Outcome.WorkerError, 'the worker exited with code 1 but its summary is unusable: invalid summary: v: unsupported summary version 2'],
    ['exit 0 while the summary says failed', pod().exited(0, summaryText([{ name: 'dns', ok: false, durationMs: 1 }])).build(), T0, Outcome.WorkerError, "the worker's exit code 0 contradicts its summary (ok: false)"],
    ['kubelet deadline', pod().scheduledAt(T0).runningSince(T0).failedWith('DeadlineExceeded', 'Pod was active on the node longer than the specified deadline').build(), T0, Outcome.DeadlineExceeded, 'the worker pod exceeded its activeDeadlineSeconds: Pod was active on the node longer than the specified deadline'],
    ['evicted', pod().scheduledAt(T0).failedWith('Evicted', 'The node was low on resource: memory.').build(), T0, Outcome.PodDeleted, 'the worker pod was evicted (Evicted): The node was low on resource: memory.'],
    ['rejected by the kubelet at admission', pod().failedWith('OutOfcpu', 'Node didn\'t have enough resource: cpu').build(), T0, Outcome.WorkerError, "the worker pod failed without a result: OutOfcpu: Node didn't have enough resource: cpu"],
    ['being deleted before it finished', pod().scheduledAt(T0).runningSince(T0).deleting().build(), T0, Outcome.PodDeleted, 'the worker pod was deleted before it reported a result'],
    ['not scheduled in time, with the scheduler\'s reason', pod().unschedulable('0/5 nodes are available: 5 node(s) didn\'t match Pod\'s node affinity/selector.').build(), T0 + 120 * S, Outcome.NotScheduled, "the worker pod was not scheduled within 2m: 0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector."],
    ['not started in time, with the kubelet\'s reason', pod().scheduledAt(T0).waiting('ImagePullBackOff', 'Back-off pulling image "x"').build(), T0 + 180 * S, Outcome.NotStarted, 'the worker container did not start within 3m of scheduling: ImagePullBackOff: Back-off pulling image "x"'],
    ['running past worker.timeout (kubelet gone)', pod().scheduledAt(T0).runningSince(T0 + 10 * S).build(), T0 + 85 * S, Outcome.DeadlineExceeded, 'the worker was still running 1m15s after it started (worker.timeout 1m)'],
  ])('%s', (_name, p, now, expected, message) => {
    expect(outcome(evaluateWorkerPod(p, now, config.worker))).toEqual({ outcome: expected, message });
  });

  describe('not started: the pod sandbox waits for a new node\'s network (PodReadyToStartContainers)', () => {
    const bringUp = { until: T0 + 600 * S, timeoutMs: 600 * S };
    const creating = () => pod().scheduledAt(T0).sandboxReady(false, T0).waiting('ContainerCreating');

    it('waits up to the bring-up deadline while the sandbox is not created, then fails naming the CNI', () => {
      expect(evaluateWorkerPod(creating().build(), T0 + 300 * S, config.worker, [], bringUp)).toEqual({ done: false, stage: 'Starting', requeueAfterMs: 300 * S });
      expect(outcome(evaluateWorkerPod(creating().build(), T0 + 600 * S, config.worker, [], bringUp))).toEqual({
        outcome: Outcome.NotStarted,
        message: "the worker pod's sandbox was not created within nodeManagement.bringUpTimeout (10m) of the node's creation: the node's pod network (CNI) is not working: ContainerCreating",
      });
    });

    it('on a node past its bring-up (a later attempt), the sandbox gets startTimeout from scheduling', () => {
      const old = { until: T0 - S, timeoutMs: 600 * S };
      expect(outcome(evaluateWorkerPod(creating().build(), T0 + 180 * S, config.worker, [], old))).toEqual({
        outcome: Outcome.NotStarted,
        message: "the worker pod's sandbox was not created within 3m of scheduling: the node's pod network (CNI) is not working: ContainerCreating",
      });
    });

    it('counts startTimeout (the image pull) from the sandbox, not from scheduling', () => {
      const pulling = pod().scheduledAt(T0).sandboxReady(true, T0 + 100 * S).waiting('ContainerCreating').build();
      expect(evaluateWorkerPod(pulling, T0 + 200 * S, config.worker, [], bringUp)).toEqual({ done: false, stage: 'Starting', requeueAfterMs: 80 * S });
      expect(outcome(evaluateWorkerPod(pulling, T0 + 280 * S, config.worker, [], bringUp))).toEqual({
        outcome: Outcome.NotStarted,
        message: 'the worker container did not start within 3m of its pod sandbox being created: ContainerCreating',
      });
    });
  });

  describe('not scheduled: the taints the worker does not tolerate', () => {
    const scheduler = '0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.';
    const cilium = { key: 'node.cilium.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };
    const unschedulable = { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' };
    const notScheduled = (taints: Array<{ key: string; value?: string; effect: string }>, message = scheduler) =>
      outcome(evaluateWorkerPod(pod().unschedulable(message).build(), T0 + 120 * S, config.worker, taints));

    it('names the node\'s taint the worker does not tolerate, then quotes the scheduler', () => {
      expect(notScheduled([{ key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' }, cilium])).toEqual({
        outcome: Outcome.NotScheduled,
        message: `the worker pod was not scheduled within 2m: the node has taint node.cilium.io/agent-not-ready=true:NoSchedule, which the worker does not tolerate (scheduler: ${scheduler})`,
      });
    });

    it('names every such taint; the verification taint, not-ready and unreachable are tolerated', () => {
      const taints = [
        { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/unreachable', effect: 'NoSchedule' },
        cilium,
        unschedulable,
      ];
      expect(notScheduled(taints, '')).toEqual({
        outcome: Outcome.NotScheduled,
        message: 'the worker pod was not scheduled within 2m: the node has taints node.cilium.io/agent-not-ready=true:NoSchedule, node.kubernetes.io/unschedulable:NoSchedule, which the worker does not tolerate',
      });
    });

    it('a taint tolerated through worker.tolerations is not named', () => {
      const tolerant = testConfig({ worker: { tolerations: [{ key: cilium.key, operator: 'Exists' }] } });
      const p = aWorkerPod(node, 1, tolerant).createdAt(T0).unschedulable(scheduler).build();
      expect(outcome(evaluateWorkerPod(p, T0 + 120 * S, tolerant.worker, [cilium]))).toEqual({
        outcome: Outcome.NotScheduled,
        message: `the worker pod was not scheduled within 2m: ${scheduler}`,
      });
    });
  });

  it('reports failed check names and every check for metrics', () => {
    const progress = evaluateWorkerPod(pod().checksFailed({ dns: 'timeout', podnet: 'no answer' }, ['api', 'tcp']).build(), T0, config.worker);
    expect(progress.done && progress.result.failedChecks).toEqual(['dns', 'podnet']);
    expect(progress.done && progress.result.checks.map((c) => `${c.name}:${c.ok}`)).toEqual(['api:true', 'tcp:true', 'dns:false', 'podnet:false']);
    expect(progress.done && progress.result.exitCode).toBe(1);
  });

  describe('warnings', () => {
    const slow = 'dns: kubernetes.default.svc.cluster.local @10.96.0.10:53: slow: 3.5s, the UDP query was sent 4 times (over dns.slowAfter 1s)';
    const mtu = "mtu: don't-fragment is off for UDP (net.ipv4.ip_no_pmtu_disc=1): a large query may have passed in fragments";
    const checks = ['dns', 'mtu'].map((name) => ({ name, ok: true, durationMs: 12 }));

    it('a pass with warnings says so, then each warning with its check', () => {
      const progress = evaluateWorkerPod(pod().exited(0, summaryText(checks, { warnings: [slow, mtu] })).build(), T0, config.worker);
      expect(outcome(progress)).toEqual({ outcome: Outcome.Passed, message: `all checks passed with warnings in 24ms (dns, mtu): ${slow}; ${mtu}` });
      expect(progress.done && progress.result.warnings).toEqual([
        { check: 'dns', message: slow },
        { check: 'mtu', message: mtu },
      ]);
    });

    it('a failed attempt keeps its message and carries the warnings', () => {
      const failed = [{ name: 'dns', ok: true, durationMs: 5 }, { name: 'tcp', ok: false, durationMs: 5, error: 'connection refused' }];
      const progress = evaluateWorkerPod(pod().exited(1, summaryText(failed, { warnings: [slow] })).build(), T0, config.worker);
      expect(outcome(progress)).toEqual({ outcome: Outcome.ChecksFailed, message: 'check failed: tcp: connection refused' });
      expect(progress.done && progress.result.warnings).toEqual([{ check: 'dns', message: slow }]);
    });

    it('a warning whose prefix is no check of the summary counts as unknown, on one line', () => {
      const progress = evaluateWorkerPod(pod().exited(0, summaryText(checks, { warnings: ['a\nb: c', 'egress: slow', 'no prefix'] })).build(), T0, config.worker);
      expect(progress.done && progress.result.warnings).toEqual([
        { check: 'unknown', message: 'a b: c' },
        { check: 'unknown', message: 'egress: slow' },
        { check: 'unknown', message: 'no prefix' },
      ]);
    });

    it('none without the field (an older worker)', () => {
      const progress = evaluateWorkerPod(pod().passed(['dns']).build(), T0, config.worker);
      expect(progress.done && progress.result).toMatchObject({ message: 'all checks passed in 12ms (dns)', warnings: [] });
    });

    it('the verdict survives when the warnings fill the message', () => {
      const progress = evaluateWorkerPod(pod().exited(0, summaryText(checks, { warnings: [`dns: ${'x'.repeat(2000)}`] })).build(), T0, config.worker);
      expect(progress.done && progress.result.message).toMatch(/^all checks passed with warnings in 24ms \(dns, mtu\): dns: x+\.\.\.$/);
      expect(progress.done && progress.result.message.length).toBe(MAX_MESSAGE);
    });
  });

  it('keeps the container start and finish times', () => {
    const progress = evaluateWorkerPod(pod().passed(['dns'], { startedAt: T0 + 5 * S, finishedAt: T0 + 8 * S }).build(), T0, config.worker);
    expect(progress.done && [progress.result.startedAt, progress.result.finishedAt]).toEqual([T0 + 5 * S, T0 + 8 * S]);
  });

  it('bounds the message, however long the errors are', () => {
    const progress = evaluateWorkerPod(pod().checksFailed({ dns: 'x'.repeat(5000) }).build(), T0, config.worker);
    expect(progress.done && progress.result.message.length).toBe(MAX_MESSAGE);
  });

  it('never throws on a pod without status', () => {
    const p = pod().build();
    delete p.status;
    expect(evaluateWorkerPod(p, T0, config.worker)).toEqual({ done: false, stage: 'Scheduling', requeueAfterMs: 120 * S });
  });
});

describe('evaluateWorkerPod: container checks beside the worker', () => {
  const checks = [containerCheckSchema.parse({ name: 'gpu', image: 'cuda:12', command: ['nvidia-smi'], timeout: '30s' }), containerCheckSchema.parse({ name: 'disk', image: 'busybox:1' })];
  // The worker ran from T0+10s to T0+12s (its 24ms of checks); the checks started at T0+11s.
  const withChecks = () => aWorkerPod(node, 1, config, checks).createdAt(T0).scheduledAt(T0).sandboxReady(true, T0);
  const ran = (code: number, message = '', seconds = 3): { exited: [number, string, number, number] } => ({ exited: [code, message, T0 + 11 * S, T0 + (11 + seconds) * S] });
  const result = (progress: PodProgress) => (progress.done ? progress.result : undefined);

  it('all pass: one verdict naming every check, each container check with its exit and duration', () => {
    const p = withChecks().passed(['dns', 'api']).check('gpu', ran(0)).check('disk', ran(0, '', 1)).build();
    const progress = evaluateWorkerPod(p, T0 + 15 * S, config.worker);
    expect(outcome(progress)).toEqual({ outcome: Outcome.Passed, message: 'all checks passed in 3s (dns, api, gpu, disk)' });
    expect(result(progress)?.checks).toEqual([
      { name: 'dns', ok: true, durationMs: 12 },
      { name: 'api', ok: true, durationMs: 12 },
      { name: 'gpu', ok: true, durationMs: 3000 },
      { name: 'disk', ok: true, durationMs: 1000 },
    ]);
    expect(result(progress)?.failedChecks).toEqual([]);
  });

  it('exit 1 with a message: that check fails with its exit code and message (FallbackToLogsOnError gives what it printed)', () => {
    const p = withChecks().passed(['dns']).check('gpu', ran(1, 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.\n')).check('disk', ran(0)).phase('Failed').build();
    const progress = evaluateWorkerPod(p, T0 + 15 * S, config.worker);
    expect(outcome(progress)).toEqual({
      outcome: Outcome.ChecksFailed,
      message: "check failed: gpu: exit code 1: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    });
    expect(result(progress)).toMatchObject({ failedChecks: ['gpu'], exitCode: 0 });
    expect(result(progress)?.checks.find((c) => c.name === 'gpu')).toEqual({ name: 'gpu', ok: false, durationMs: 3000, error: "exit code 1: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." });
  });

  it('the worker\'s failed checks and ours, in one message, in that order', () => {
    const p = withChecks().checksFailed({ dns: 'timeout' }).check('gpu', ran(2, 'no device')).check('disk', ran(0)).build();
    const progress = evaluateWorkerPod(p, T0 + 15 * S, config.worker);
    expect(outcome(progress)).toEqual({ outcome: Outcome.ChecksFailed, message: 'checks failed: dns: timeout; gpu: exit code 2: no device' });
    expect(result(progress)?.failedChecks).toEqual(['dns', 'gpu']);
  });

  it('a worker error keeps its outcome; the failed check is named after it', () => {
    const p = withChecks().exited(137, '', { reason: 'OOMKilled' }).check('gpu', ran(1, 'boom')).check('disk', ran(0)).build();
    expect(outcome(evaluateWorkerPod(p, T0 + 15 * S, config.worker))).toEqual({ outcome: Outcome.WorkerError, message: 'the worker exited with code 137 (OOMKilled); check failed: gpu: exit code 1: boom' });
  });

  it('keeps the first KB of a check\'s message', () => {
    const p = withChecks().passed(['dns']).check('gpu', ran(1, 'x'.repeat(4000))).check('disk', ran(0)).build();
    const gpu = result(evaluateWorkerPod(p, T0 + 15 * S, config.worker))?.checks.find((c) => c.name === 'gpu');
    expect(gpu?.error).toBe(`exit code 1: ${'x'.repeat(1024)}`);
  });

  it.each([
    ['ErrImagePull', 'failed to pull and unpack image "docker.io/library/cuda:12": not found'],
    ['ImagePullBackOff', 'Back-off pulling image "cuda:12"'],
    ['InvalidImageName', 'Failed to apply default image tag "Cuda::12": couldn\'t parse image name'],
    ['CreateContainerConfigError', 'configmap "x" not found'],
  ])('a check that cannot start (%s) fails at once with the kubelet\'s reason, while the worker still runs', (reason, message) => {
    const p = withChecks().runningSince(T0 + 10 * S).check('gpu', { waiting: [reason, message] }).check('disk', { runningSince: T0 + 11 * S }).phase('Pending').build();
    const progress = evaluateWorkerPod(p, T0 + 12 * S, config.worker);
    expect(outcome(progress)).toEqual({ outcome: Outcome.ChecksFailed, message: `check failed: gpu: ${reason}: ${message} (before the worker's checks finished)` });
    expect(result(progress)).toMatchObject({ failedChecks: ['gpu'], checks: [{ name: 'gpu', ok: false, durationMs: 0, error: `${reason}: ${message}` }] });
  });

  it('an image pull error fails the check before the worker has even started', () => {
    const p = withChecks().waiting('ContainerCreating').check('gpu', { waiting: ['ErrImagePull', 'not found'] }).build();
    expect(outcome(evaluateWorkerPod(p, T0 + 5 * S, config.worker))).toEqual({ outcome: Outcome.ChecksFailed, message: "check failed: gpu: ErrImagePull: not found (before the worker's checks finished)" });
  });

  it('timeout: the worker is done, a check still runs: wait for its timeout, then it fails as timed out', () => {
    const p = withChecks().passed(['dns']).phase('Running').check('gpu', { runningSince: T0 + 11 * S }).check('disk', ran(0)).build();
    expect(evaluateWorkerPod(p, T0 + 20 * S, config.worker)).toEqual({ done: false, stage: 'Running', requeueAfterMs: 21 * S });
    const progress = evaluateWorkerPod(p, T0 + 41 * S, config.worker);
    expect(outcome(progress)).toEqual({ outcome: Outcome.ChecksFailed, message: 'check failed: gpu: timeout: still running 30s after it started (timeout 30s)' });
    expect(result(progress)?.checks.map((c) => `${c.name}:${c.ok}:${c.durationMs}`)).toEqual(['dns:true:12', 'gpu:false:30000', 'disk:true:3000']);
  });

  it('timeout: a check past its timeout ends the attempt even while the worker runs; before it, the nearer deadline wakes the controller', () => {
    const p = withChecks().runningSince(T0 + 10 * S).check('gpu', { runningSince: T0 + 11 * S }).check('disk', { runningSince: T0 + 11 * S }).build();
    expect(evaluateWorkerPod(p, T0 + 20 * S, config.worker)).toEqual({ done: false, stage: 'Running', requeueAfterMs: 21 * S });
    expect(outcome(evaluateWorkerPod(p, T0 + 41 * S, config.worker))).toEqual({
      outcome: Outcome.ChecksFailed,
      message: "check failed: gpu: timeout: still running 30s after it started (timeout 30s) (before the worker's checks finished)",
    });
  });

  it('a check not started once the worker has: it gets the worker\'s start deadline, then fails naming the kubelet\'s reason', () => {
    const p = withChecks().passed(['dns']).phase('Pending').check('gpu', { waiting: ['ContainerCreating'] }).check('disk', ran(0)).build();
    expect(evaluateWorkerPod(p, T0 + 60 * S, config.worker)).toEqual({ done: false, stage: 'Running', requeueAfterMs: 120 * S });
    expect(outcome(evaluateWorkerPod(p, T0 + 180 * S, config.worker))).toEqual({ outcome: Outcome.ChecksFailed, message: 'check failed: gpu: its container did not start within 3m (worker.startTimeout): ContainerCreating' });
  });

  it('the worker\'s own deadlines come first while it has not started', () => {
    const p = withChecks().waiting('ImagePullBackOff', 'Back-off pulling image "x"').check('gpu', { waiting: ['ContainerCreating'] }).build();
    expect(outcome(evaluateWorkerPod(p, T0 + 180 * S, config.worker))).toEqual({
      outcome: Outcome.NotStarted,
      message: 'the worker container did not start within 3m of scheduling: ImagePullBackOff: Back-off pulling image "x"',
    });
  });
});

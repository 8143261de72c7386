import type { V1ContainerState, V1ContainerStatus, V1Node, V1Pod, V1Taint } from '@kubernetes/client-node';
import { Karpenter } from '../api/well-known.js';
import { parseConfig } from '../config/load.js';
import type { ControllerConfig, ControllerConfigInput } from '../config/schema.js';
import type { ContainerCheck } from '../controllers/node/verification/container-checks.js';
import { workerPodName } from '../controllers/node/verification/naming.js';
import { buildWorkerPod } from '../controllers/node/verification/pod-spec.js';
import type { StateRead } from '../controllers/node/verification/store.js';
import type { CheckSummary, WorkerSummary } from '../controllers/node/verification/summary.js';
import type { VerificationState } from '../controllers/node/verification/types.js';

/** Object builders for tests: `aNode('n1').tainted().inNodePool('gpu').build()`. */

export function testConfig(input: ControllerConfigInput = {}): ControllerConfig {
  return parseConfig(input) as ControllerConfig;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export const DEFAULT_TAINT: V1Taint = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };

export class NodeBuilder {
  private readonly node: V1Node;

  constructor(name: string) {
    this.node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, uid: `uid-${name}`, resourceVersion: '100', labels: {}, annotations: {}, creationTimestamp: new Date(Date.UTC(2025, 0, 1)) },
      spec: { taints: [] },
      // Ready, as a node's kubelet reports it once it is up (notReady() and withoutReady() change it).
      status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' }] },
    };
  }

  /** The kubelet reports NotReady (status False), or `Unknown` when the node controller lost it. */
  notReady(reason = 'KubeletNotReady', message = 'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady', status: 'False' | 'Unknown' = 'False'): this {
    this.withoutReady();
    (this.node.status!.conditions ??= []).push({ type: 'Ready', status, reason, message });
    return this;
  }

  /** No Ready condition yet: the kubelet registered the node but has not posted its status. */
  withoutReady(): this {
    const status = (this.node.status ??= {});
    status.conditions = (status.conditions ?? []).filter((c) => c.type !== 'Ready');
    return this;
  }

  uid(uid: string): this {
    this.meta().uid = uid;
    return this;
  }

  resourceVersion(rv: string): this {
    this.meta().resourceVersion = rv;
    return this;
  }

  createdAt(ms: number): this {
    this.meta().creationTimestamp = new Date(ms);
    return this;
  }

  tainted(taint: V1Taint = DEFAULT_TAINT): this {
    this.spec().taints = [...(this.spec().taints ?? []), taint];
    return this;
  }

  withTaints(...taints: V1Taint[]): this {
    this.spec().taints = [...(this.spec().taints ?? []), ...taints];
    return this;
  }

  label(key: string, value: string): this {
    this.meta().labels = { ...this.meta().labels, [key]: value };
    return this;
  }

  annotate(key: string, value: string): this {
    this.meta().annotations = { ...this.meta().annotations, [key]: value };
    return this;
  }

  verified(): this {
    return this.label('node-ready/verified', 'true');
  }

  inNodePool(pool: string): this {
    return this.label(Karpenter.NodePoolLabel, pool);
  }

  registered(): this {
    return this.label(Karpenter.RegisteredLabel, 'true');
  }

  /**
   * Gives the node stored progress (for this node's UID by default), as its NodeVerification would
   * hold it: kept on the built node under a test-only annotation, read back by testProgress.
   */
  withState(state: Omit<VerificationState, 'uid'> & { uid?: string }): this {
    const full: VerificationState = { uid: this.meta().uid ?? '', ...state };
    return this.annotate(TEST_STATE_ANNOTATION, JSON.stringify(full));
  }

  deleting(at = Date.UTC(2025, 0, 1)): this {
    this.meta().deletionTimestamp = new Date(at);
    return this;
  }

  /** A node condition, e.g. the one this installation writes (testConfig's type by default). */
  withCondition(status: 'True' | 'False' | 'Unknown', type = testConfig().nodeManagement.condition.type, reason = 'Passed'): this {
    const conditions = ((this.node.status ??= {}).conditions ??= []);
    conditions.push({ type, status, reason });
    return this;
  }

  build(): V1Node {
    return structuredClone(this.node);
  }

  private meta(): NonNullable<V1Node['metadata']> {
    return this.node.metadata as NonNullable<V1Node['metadata']>;
  }

  private spec(): NonNullable<V1Node['spec']> {
    return this.node.spec as NonNullable<V1Node['spec']>;
  }
}

export function aNode(name = 'node-1'): NodeBuilder {
  return new NodeBuilder(name);
}

/**
 * A worker pod as the controller creates it, then moved through its life the way the API server,
 * scheduler and kubelet would report it. Timestamps are strings, as in watch events.
 */
export class WorkerPodBuilder {
  private readonly pod: V1Pod;

  constructor(node: V1Node, attempt: number, config: ControllerConfig = testConfig(), containerChecks: readonly ContainerCheck[] = []) {
    const podName = workerPodName(node.metadata?.name ?? '', node.metadata?.uid ?? '', attempt);
    this.pod = buildWorkerPod({ node, attempt, podName, config, image: 'kube-node-ready:test', configHash: 'hash', containerChecks });
    this.pod.status = { phase: 'Pending', conditions: [] };
  }

  createdAt(ms: number): this {
    (this.pod.metadata as NonNullable<V1Pod['metadata']>).creationTimestamp = iso(ms) as unknown as Date;
    return this;
  }

  unschedulable(message = '0/3 nodes are available: 1 node(s) had untolerated taint.'): this {
    this.status().conditions = [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }];
    return this;
  }

  scheduledAt(ms: number): this {
    this.status().conditions = [{ type: 'PodScheduled', status: 'True', lastTransitionTime: iso(ms) as unknown as Date }];
    return this;
  }

  /** The kubelet's PodReadyToStartContainers: whether the pod sandbox (its network) exists, since `ms`. */
  sandboxReady(ready: boolean, ms: number): this {
    const conditions = (this.status().conditions ??= []).filter((c) => c.type !== 'PodReadyToStartContainers');
    conditions.push({ type: 'PodReadyToStartContainers', status: ready ? 'True' : 'False', lastTransitionTime: iso(ms) as unknown as Date });
    this.status().conditions = conditions;
    return this;
  }

  waiting(reason: string, message?: string): this {
    return this.containerStatus({ name: 'worker', image: 'kube-node-ready:test', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason, ...(message ? { message } : {}) } } });
  }

  runningSince(ms: number): this {
    this.status().phase = 'Running';
    this.status().startTime = iso(ms) as unknown as Date;
    return this.containerStatus({ name: 'worker', image: 'kube-node-ready:test', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: iso(ms) as unknown as Date } } });
  }

  /** The container exited; phase follows the exit code as the kubelet sets it. */
  exited(exitCode: number, message: string, opts: { startedAt?: number; finishedAt?: number; reason?: string } = {}): this {
    const startedAt = opts.startedAt ?? Date.UTC(2025, 0, 1, 0, 0, 10);
    const finishedAt = opts.finishedAt ?? startedAt + 2_000;
    this.status().phase = exitCode === 0 ? 'Succeeded' : 'Failed';
    return this.containerStatus({
      name: 'worker',
      image: 'kube-node-ready:test',
      imageID: '',
      ready: false,
      restartCount: 0,
      state: {
        terminated: {
          exitCode,
          message,
          reason: opts.reason ?? (exitCode === 0 ? 'Completed' : 'Error'),
          startedAt: iso(startedAt) as unknown as Date,
          finishedAt: iso(finishedAt) as unknown as Date,
        },
      },
    });
  }

  /**
   * The status of the container check `name` (a container of the pod beside the worker):
   * `{ waiting: [reason, message] }`, `{ runningSince: ms }` or `{ exited: [code, message, startedAt, finishedAt] }`.
   */
  check(name: string, state: { waiting: [string, string?] } | { runningSince: number } | { exited: [number, string, number, number] }): this {
    const s: V1ContainerState =
      'waiting' in state
        ? { waiting: { reason: state.waiting[0], ...(state.waiting[1] ? { message: state.waiting[1] } : {}) } }
        : 'runningSince' in state
          ? { running: { startedAt: iso(state.runningSince) as unknown as Date } }
          : {
              terminated: {
                exitCode: state.exited[0],
                message: state.exited[1],
                reason: state.exited[0] === 0 ? 'Completed' : 'Error',
                startedAt: iso(state.exited[2]) as unknown as Date,
                finishedAt: iso(state.exited[3]) as unknown as Date,
              },
            };
    return this.containerStatus({ name, image: 'check:test', imageID: '', ready: 'running' in s, restartCount: 0, state: s });
  }

  /** status.phase as the kubelet reports it (Running while any container runs or waits). */
  phase(phase: string): this {
    this.status().phase = phase;
    return this;
  }

  /** Sets one container's status, keeping the others'. */
  private containerStatus(status: V1ContainerStatus): this {
    const others = (this.status().containerStatuses ?? []).filter((c) => c.name !== status.name);
    this.status().containerStatuses = [...others, status];
    return this;
  }

  passed(checks: string[] = ['dns', 'api', 'tcp', 'service'], opts: { startedAt?: number; finishedAt?: number } = {}): this {
    return this.exited(0, summaryText(checks.map((name) => ({ name, ok: true, durationMs: 12 }))), opts);
  }

  checksFailed(failed: Record<string, string>, passed: string[] = ['api']): this {
    const checks: CheckSummary[] = [
      ...passed.map((name) => ({ name, ok: true, durationMs: 5 })),
      ...Object.entries(failed).map(([name, error]) => ({ name, ok: false, durationMs: 1000, error })),
    ];
    return this.exited(1, summaryText(checks));
  }

  /** status.phase Failed with a pod-level reason (Evicted, DeadlineExceeded...). */
  failedWith(reason: string, message = ''): this {
    this.status().phase = 'Failed';
    this.status().reason = reason;
    if (message) this.status().message = message;
    return this;
  }

  deleting(at = Date.UTC(2025, 0, 1)): this {
    (this.pod.metadata as NonNullable<V1Pod['metadata']>).deletionTimestamp = iso(at) as unknown as Date;
    return this;
  }

  annotate(key: string, value: string): this {
    const meta = this.pod.metadata as NonNullable<V1Pod['metadata']>;
    meta.annotations = { ...meta.annotations, [key]: value };
    return this;
  }

  build(): V1Pod {
    return structuredClone(this.pod);
  }

  private status(): NonNullable<V1Pod['status']> {
    return this.pod.status as NonNullable<V1Pod['status']>;
  }
}

export function aWorkerPod(node: V1Node, attempt = 1, config?: ControllerConfig, containerChecks?: readonly ContainerCheck[]): WorkerPodBuilder {
  return new WorkerPodBuilder(node, attempt, config, containerChecks);
}

export function summaryText(checks: CheckSummary[], extra: Partial<WorkerSummary> = {}): string {
  const summary: WorkerSummary = {
    v: 1,
    ok: checks.every((c) => c.ok),
    node: 'node-1',
    durationMs: checks.reduce((sum, c) => sum + c.durationMs, 0),
    checks,
    ...extra,
  };
  return JSON.stringify(summary);
}

/** Where withState() keeps a test node's progress (never read by the product). */
const TEST_STATE_ANNOTATION = 'test.kube-node-ready.io/state';

/** A ProgressStore reader for unit tests: the progress withState() gave the node, for the node's current UID. */
export const testProgress = {
  read(node: V1Node): StateRead {
    const text = node.metadata?.annotations?.[TEST_STATE_ANNOTATION];
    if (text === undefined) return { kind: 'none' };
    const state = JSON.parse(text) as VerificationState;
    return state.uid === node.metadata?.uid ? { kind: 'ok', state } : { kind: 'none' };
  },
};

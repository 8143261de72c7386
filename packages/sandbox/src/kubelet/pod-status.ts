import type { k8s } from '../kube.js';

export interface TerminatedView {
  exitCode: number;
  reason?: string;
  message?: string;
  startedAt?: string;
  finishedAt?: string;
}

/** What the kubelet knows about one container (init or regular) of a pod. */
export interface ContainerView {
  name: string;
  /** An init container; `sidecar` for one with restartPolicy Always (it keeps running). */
  init?: 'init' | 'sidecar';
  /** The process of the current run (absent before the first start). */
  proc?: unknown;
  startedAt?: string;
  finishedAt?: string;
  exitCode?: number;
  reason?: string;
  message?: string;
  restartCount: number;
  waiting?: { reason: string; message?: string };
  /** Readiness (probe result; true without a readiness probe) and startup of the current run. */
  ready?: boolean;
  started?: boolean;
  /** The run before the current one, when the current one is running again. */
  lastTerminated?: TerminatedView;
}

export interface PodView {
  uid: string;
  /** The pod sandbox exists (network set up): containers can start. */
  sandboxReady: boolean;
  deadlineExceeded: boolean;
  containers: ContainerView[];
}

export type ConditionMemory = Record<string, { status: string; lastTransitionTime: string }>;

export interface PodStatusResult {
  phase: string;
  reason?: string;
  message?: string;
  conditions: Array<Record<string, unknown>>;
  containerStatuses: k8s.V1ContainerStatus[];
  initContainerStatuses: k8s.V1ContainerStatus[];
  /** The conditions' statuses and transition times, to pass in next time. */
  memory: ConditionMemory;
}

/**
 * The pod status a kubelet reports (pkg/kubelet/kubelet_pods.go generateAPIPodStatus and getPhase),
 * from what the simulated kubelet knows. Pure: the caller sends it.
 *
 * - Phase: Failed when an init container failed and restartPolicy is Never; Pending while an init
 *   container has not completed or a container waits to start for the first time; Running while a
 *   container runs (or restarts); Succeeded/Failed once every container stopped for good.
 * - Conditions: PodReadyToStartContainers (the sandbox exists), Initialized (init containers
 *   completed), ContainersReady and Ready (every container running and passing its readiness probe).
 *   A condition's lastTransitionTime changes only when its status does (Deployment availability
 *   counts minReadySeconds from it).
 */
export function podStatus(pod: k8s.V1Pod, run: PodView, previous: ConditionMemory, now: string): PodStatusResult {
  const policy = pod.spec?.restartPolicy ?? 'Always';
  const hasInit = (pod.spec?.initContainers ?? []).length > 0;
  const byName = new Map(run.containers.map((c) => [c.name, c]));
  const defaultWaiting = hasInit ? 'PodInitializing' : 'ContainerCreating';

  const status = (spec: k8s.V1Container, init: boolean): k8s.V1ContainerStatus => {
    const c = byName.get(spec.name) ?? { name: spec.name, restartCount: 0 };
    const running = c.proc !== undefined && c.exitCode === undefined && !c.waiting && c.startedAt !== undefined;
    let state: k8s.V1ContainerState;
    if (c.waiting) state = { waiting: c.waiting };
    else if (c.exitCode !== undefined) state = { terminated: terminated(c, run.deadlineExceeded) as unknown as k8s.V1ContainerStateTerminated };
    else if (c.startedAt) state = { running: { startedAt: c.startedAt as unknown as Date } };
    else state = { waiting: { reason: defaultWaiting } };
    // Between runs (back-off) the last run is the waiting container's last state; while running again, the one before.
    const last = c.waiting && c.exitCode !== undefined ? terminated(c, false) : running ? c.lastTerminated : undefined;
    // A regular init container is ready once it completed; a sidecar and a container while they run and pass readiness.
    const regularInit = init && spec.restartPolicy !== 'Always';
    return {
      name: spec.name,
      image: spec.image ?? '',
      imageID: `sandbox://${spec.image}`,
      containerID: c.startedAt ? `sandbox://${run.uid}/${c.name}` : undefined,
      ready: regularInit ? state.terminated?.exitCode === 0 : running && (c.ready ?? true) && (c.started ?? true),
      started: running && (c.started ?? true),
      restartCount: c.restartCount,
      state,
      ...(last ? { lastState: { terminated: last as unknown as k8s.V1ContainerStateTerminated } } : {}),
    } as k8s.V1ContainerStatus;
  };
  const initSpecs = pod.spec?.initContainers ?? [];
  const specs = pod.spec?.containers ?? [];
  const initContainerStatuses = initSpecs.map((s) => status(s, true));
  const containerStatuses = specs.map((s) => status(s, false));

  // Phase, as getPhase.
  let pendingInit = 0;
  let failedInit = 0;
  initSpecs.forEach((spec, i) => {
    const st = initContainerStatuses[i]!;
    if (spec.restartPolicy === 'Always') {
      if (!st.started) pendingInit++;
      return;
    }
    if (st.state?.running) pendingInit++;
    else if (st.state?.terminated) {
      if (st.state.terminated.exitCode !== 0) failedInit++;
    } else if (st.lastState?.terminated) {
      if (st.lastState.terminated.exitCode !== 0) failedInit++;
    } else pendingInit++;
  });
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const st of containerStatuses) {
    if (st.state?.running) running++;
    else if (st.state?.terminated) {
      stopped++;
      if (st.state.terminated.exitCode === 0) succeeded++;
    } else if (st.lastState?.terminated) {
      stopped++;
      if (st.lastState.terminated.exitCode === 0) succeeded++;
    } else waiting++;
  }
  let phase: string;
  let reason: string | undefined;
  let message: string | undefined;
  if (run.deadlineExceeded) {
    phase = 'Failed';
    reason = 'DeadlineExceeded';
    message = 'Pod was active on the node longer than the specified deadline';
  } else if (failedInit > 0 && policy === 'Never') phase = 'Failed';
  else if (!run.sandboxReady || pendingInit > 0 || waiting > 0) phase = 'Pending';
  else if (running > 0) phase = 'Running';
  else if (stopped > 0) {
    const allDone = run.containers.every((c) => c.init !== undefined || (c.exitCode !== undefined && !c.waiting));
    if (policy === 'Never' || (policy === 'OnFailure' && allDone)) phase = stopped === succeeded ? 'Succeeded' : 'Failed';
    else if (policy === 'OnFailure' && stopped === succeeded) phase = 'Succeeded';
    else phase = 'Running';
  } else phase = 'Pending';

  // Conditions.
  const memory: ConditionMemory = {};
  const conditions: Array<Record<string, unknown>> = [];
  const cond = (type: string, ok: boolean, why?: string, text?: string) => {
    const s = ok ? 'True' : 'False';
    const before = previous[type];
    const lastTransitionTime = before && before.status === s ? before.lastTransitionTime : now;
    memory[type] = { status: s, lastTransitionTime };
    conditions.push({ type, status: s, lastProbeTime: null, lastTransitionTime, ...(ok ? {} : { reason: why, message: text }) });
  };
  const incompleteInit = initSpecs.filter((s, i) => (s.restartPolicy === 'Always' ? !initContainerStatuses[i]!.started : initContainerStatuses[i]!.state?.terminated?.exitCode !== 0)).map((s) => s.name);
  const unready = [
    ...initSpecs.filter((s, i) => s.restartPolicy === 'Always' && !initContainerStatuses[i]!.ready).map((s) => s.name),
    ...specs.filter((_, i) => !containerStatuses[i]!.ready).map((s) => s.name),
  ];
  const completed = phase === 'Succeeded' ? 'PodCompleted' : undefined;
  cond('PodReadyToStartContainers', run.sandboxReady);
  cond('Initialized', incompleteInit.length === 0, 'ContainersNotInitialized', `containers with incomplete status: [${incompleteInit.join(' ')}]`);
  const containersReady = unready.length === 0 && phase === 'Running';
  const unreadyText = `containers with unready status: [${unready.join(' ')}]`;
  cond('ContainersReady', containersReady, completed ?? 'ContainersNotReady', completed ? undefined : unreadyText);
  cond('Ready', containersReady, completed ?? 'ContainersNotReady', completed ? undefined : unreadyText);
  return { phase, reason, message, conditions, containerStatuses, initContainerStatuses, memory };
}

function terminated(c: ContainerView, deadlineExceeded: boolean): TerminatedView {
  return {
    exitCode: c.exitCode!,
    reason: deadlineExceeded && c.exitCode !== 0 ? 'Error' : c.reason,
    message: c.message,
    startedAt: c.startedAt,
    finishedAt: c.finishedAt,
  };
}

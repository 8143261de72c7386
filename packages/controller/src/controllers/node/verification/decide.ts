import { formatDuration } from '@kube-node-ready/core';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ControllerConfig } from '../../../config/schema.js';
import { Karpenter, NODE_NOT_READY_TAINT, NODE_UNREACHABLE_TAINT, PodAnnotation } from '../../../api/well-known.js';
import { annotation, isPodTerminal, label, nodeName, nodeTaints, nodeUid, toMillis } from '../../../kube/objects.js';
import { workerPodName } from './naming.js';
import { clusterWideVerdict, type Blame, type ControlAnswer, type Judgement } from './cluster-wide.js';
import { evaluateWorkerPod } from './pod-result.js';
import type { CheckSummary } from './summary.js';
import { workerNodeName, workerTolerations } from './pod-spec.js';
import { formatTaint, untoleratedTaints } from './taints.js';
import { Outcome, Phase, type AttemptResult, type Failing, type VerificationState } from './types.js';

/**
 * The verification state machine, as one pure function: from the node, its worker pods, the time
 * and the stored progress, decide the single next step. No I/O; the controller's executor applies
 * the Action (controller.ts). Table tests: decide.test.ts. States and transitions:
 * docs/architecture.md.
 */

export interface PodRef {
  namespace: string;
  name: string;
}

export type IgnoreReason =
  /** The node is being deleted. */
  | 'NodeDeleting'
  /** The node carries the verified label. */
  | 'Verified'
  /** No verification taint and no verification of ours in progress. */
  | 'NotCandidate'
  /** Retries exhausted: the taint stays until remediation or `kube-node-ready verify`. */
  | 'Failed';

export type WaitReason =
  | 'Scheduling'
  | 'Starting'
  | 'Running'
  | 'Backoff'
  | 'ConcurrencyLimit'
  /** The worker passed, but Karpenter has not registered the node: it would put the taint back. */
  | 'KarpenterRegistration'
  /** The node cannot run the worker yet (NotReady, another startup taint): no attempt is used. */
  | 'NodeNotLaunchable'
  /**
   * The node's readiness gates (config gates) do not hold yet: before its first attempt (mode
   * before; no attempt or slot is used), or after an attempt passed (it opens once they hold).
   */
  | 'GatesPending'
  /** The node's operating system (label kubernetes.io/os) is not Linux: the worker cannot run there at all. */
  | 'UnsupportedOS'
  /** The attempt failed checks most new nodes fail alike: judged when the control run on a verified node ends. */
  | 'ControlRun';

export type Action =
  | {
      kind: 'Ignore';
      reason: IgnoreReason;
      cleanup: PodRef[];
      /** Verified while the worker pod of an attempt newer than the progress read exists (it passed, the node opened, its record was not written yet). */
      adopt?: VerificationState;
    }
  | {
      kind: 'Wait';
      reason: WaitReason;
      /** Undefined: wait for a watch event (or the resync). */
      requeueAfterMs?: number;
      /** The attempt being waited on, if any. */
      attempt?: number;
      /**
       * An attempt in flight newer than the progress read: its worker pod was found (created before a
       * restart or a leader change). Held in memory, not written: the pod is its record.
       */
      adopt?: VerificationState;
      /** NodeNotLaunchable: what the node must become first (launchBlockers()); GatesPending: what its gates wait for. */
      waitingFor?: string[];
      /**
       * NodeNotLaunchable: the node waits only for its own Ready (booting; its kubelet and CNI
       * coming up), not for a taint the worker does not tolerate.
       */
      bootingOnly?: boolean;
      /** NodeNotLaunchable, GatesPending before an attempt: still waiting nodeManagement.bringUpTimeout after its creation. */
      overdue?: boolean;
      cleanup: PodRef[];
    }
  | {
      kind: 'Launch';
      attempt: number;
      podName: string;
      /** State to store once the pod exists. */
      state: VerificationState;
      cleanup: PodRef[];
      requeueAfterMs: number;
    }
  | {
      kind: 'Complete';
      attempt: number;
      /** The attempt's pod, when it still exists. */
      pod?: PodRef;
      result: AttemptResult;
      state: VerificationState;
      /** Passed: remove the verification taints and add the verified label in the same write. */
      open: boolean;
      /** Delete the attempt's pod once the result is stored (else it is kept for `kubectl logs`). */
      deletePod: boolean;
      /**
       * A pass gets an Event of its own: one after failed or inconclusive attempts of this
       * verification (their Events are on the node). A pass at the first attempt has none: the
       * condition and the NodeVerification say it (ADR 0006).
       */
      tellPass: boolean;
      cleanup: PodRef[];
      requeueAfterMs?: number;
      /** A failed attempt judged against the cluster: the checks an inconclusive one blames, and the control run's answer (recorded once stored: recordVerdict). */
      clusterWide?: { blamed: Blame[]; control?: ControlAnswer };
    };

export interface DecideContext {
  /** Progress stored in the node's NodeVerification, or in memory in dry-run mode. */
  state: VerificationState | undefined;
  /**
   * Verification slots this node cannot have now: verifications in flight cluster-wide (not this
   * node's), plus the nodes that wait ahead of it in line (slots.ts: served in order of arrival).
   */
  slotsTaken: number;
  /** When the controller first found the node able to run the worker (it may have waited for a slot since). */
  launchableSince?: number;
  /**
   * What the cluster says about the failed checks of the attempt that finished (gathered only for
   * one: attemptToJudge). Without it a failed attempt counts against the node.
   */
  judgement?: Judgement;
  /**
   * What the node's readiness gates wait for (config gates, gates/evaluate.ts), one line each;
   * empty or undefined: they hold, or none is configured. In mode `before` no attempt starts while
   * they wait; in either mode a passed attempt opens the node only once they hold.
   */
  gates?: readonly string[];
}

/** A node whose worker pod the API server refused tries again this often (the policy may be fixed any time). */
export const POD_REFUSED_RETRY_MS = 30_000;

/** The kubelet's operating-system label. */
export const OS_LABEL = 'kubernetes.io/os';

/**
 * How often a node waiting for a free verification slot looks again. Freed slots wake the nodes
 * first in line, so this is the safety net (a reservation whose pod never appeared) and what keeps
 * a waiting node's place: it must stay well under VerificationSlots' waitingTtlMs (60 s). Every
 * waiting node costs a reconcile per interval, so it is not shorter than it needs to be.
 */
export const CONCURRENCY_RECHECK_MS = 20_000;

/** How often a node whose attempt waits for a control run is reconciled again. */
export const CONTROL_POLL_MS = 2_000;

export function decide(
  node: V1Node,
  workerPods: readonly V1Pod[],
  now: number,
  config: ControllerConfig,
  ctx: DecideContext,
): Action {
  const uid = nodeUid(node);
  const { mine, foreign } = partitionPods(workerPods, node);
  const state = ctx.state?.uid === uid ? ctx.state : undefined;
  const keep = config.worker.keepFailedPods;

  // 1. The node is going away: stop and remove every worker.
  if (node.metadata?.deletionTimestamp) {
    return { kind: 'Ignore', reason: 'NodeDeleting', cleanup: cleanup(mine, foreign, { keep: 0, all: true }) };
  }

  // 2. Verified: nothing to do but tidy up. An attempt in flight that the progress read does not
  //    have yet (the node opened, then the controller stopped before recording the pass) goes
  //    with it, for the record.
  const latest = mine.at(-1);
  const latestAttempt = latest ? podAttempt(latest) : 0;
  if (isVerified(node, config)) {
    const unrecorded = latest && latestAttempt > (state?.attempt ?? 0) ? { ...carried(state, uid), attempt: latestAttempt, phase: Phase.Verifying, pod: `${latest.metadata?.namespace ?? ''}/${latest.metadata?.name ?? ''}` } : undefined;
    return { kind: 'Ignore', reason: 'Verified', cleanup: cleanup(mine, foreign, { keep: 0 }), ...(unrecorded ? { adopt: unrecorded } : {}) };
  }

  // 3. Not a candidate: no verification taint and nothing of ours in progress.
  if (!isCandidate(node, state, config)) {
    return { kind: 'Ignore', reason: 'NotCandidate', cleanup: cleanup(mine, foreign, { keep: 0 }) };
  }

  // 3b. The worker is a Linux program: a node of another operating system (a Windows node) is never
  //     sent one. It is reported and left as it is: its taint stays, and remediation leaves it alone
  //     (a replacement would be the same). Putting the verification taint on it is a configuration error.
  if (unsupportedOS(node) !== undefined) {
    return { kind: 'Wait', reason: 'UnsupportedOS', cleanup: cleanup(mine, foreign, { keep: 0, all: true }) };
  }

  // 4. Retries exhausted: the taint stays; remediation (or a reset) takes it from here.
  if (state?.phase === Phase.Failed && latestAttempt <= state.attempt) {
    return { kind: 'Ignore', reason: 'Failed', cleanup: cleanup(mine, foreign, { keep }) };
  }

  // 4b. No verdict within nodeManagement.startupTimeout of the node's creation: the verification
  //     ends with onStartupTimeout (keep, open, replace), whatever it was doing.
  const storedInFlight = state?.phase === Phase.Verifying ? state.attempt : 0;
  const inFlight = Math.max(storedInFlight, latestAttempt > (state?.attempt ?? 0) ? latestAttempt : 0);
  const gates = ctx.gates ?? [];
  const timedOut = startupTimeout(node, state, Math.max(state?.attempt ?? 0, latestAttempt), inFlight, { mine, foreign }, now, config, ctx);
  if (timedOut) return timedOut;

  // 5. An attempt in flight: the stored one, or a pod newer than the stored state (created just
  //    before a restart, before its state was written): follow it to its result.
  if (inFlight > 0) {
    const pod = mine.find((p) => podAttempt(p) === inFlight);
    return follow(node, pod, inFlight, state, { mine, foreign }, now, config, ctx.judgement, gates);
  }

  // 6. Backing off after a failed attempt.
  if (state?.phase === Phase.Backoff && state.nextAttemptAt !== undefined && now < state.nextAttemptAt) {
    return { kind: 'Wait', reason: 'Backoff', requeueAfterMs: state.nextAttemptAt - now, cleanup: cleanup(mine, foreign, { keep }) };
  }

  // 7. The node cannot run the worker yet (NotReady, another agent's startup taint): wait without
  //    using an attempt or a slot; its next change (Ready, a taint removed) wakes it. Past
  //    nodeManagement.bringUpTimeout it is reported as never launchable (only the stuck-node rule
  //    of remediation may act on that).
  const waitingFor = launchBlockers(node, config);
  if (waitingFor.length > 0) {
    const wait = waitBeforeAttempt('NodeNotLaunchable', waitingFor, node, now, config, cleanup(mine, foreign, { keep }));
    return waitingFor.every((b) => b.startsWith(READY_BLOCKER)) ? { ...wait, bootingOnly: true } : wait;
  }

  // 7b. Readiness gates, mode before: no attempt, and no slot, until they hold. A gate's source
  //     changing (a DaemonSet pod turning Ready, a CSINode, the node's allocatable) wakes the node.
  if (gates.length > 0 && config.gates.mode === 'before') return waitBeforeAttempt('GatesPending', [...gates], node, now, config, cleanup(mine, foreign, { keep }));

  // 8. Bounded concurrency, cluster-wide, first come first served.
  if (ctx.slotsTaken >= config.reconciliation.maxConcurrentVerifications) {
    return { kind: 'Wait', reason: 'ConcurrencyLimit', requeueAfterMs: CONCURRENCY_RECHECK_MS, cleanup: cleanup(mine, foreign, { keep }) };
  }

  // 9. Start the next attempt. Its number is new even if the stored state was lost.
  const attempt = Math.max(state?.attempt ?? 0, latestAttempt) + 1;
  const podName = workerPodName(nodeName(node), uid, attempt);
  const base = carried(state, uid);
  return {
    kind: 'Launch',
    attempt,
    podName,
    state: { ...base, attempt, phase: Phase.Verifying, pod: `${config.worker.namespace}/${podName}`, launchableAt: Math.min(base.launchableAt ?? now, ctx.launchableSince ?? now), firstLaunchAt: base.firstLaunchAt ?? now },
    cleanup: cleanup(mine, foreign, { keep }),
    requeueAfterMs: config.worker.scheduleTimeout,
  };
}

/**
 * A wait before any attempt (the node cannot run the worker yet, or its gates do not hold): no
 * attempt or slot is used; past nodeManagement.bringUpTimeout after the node's creation it is
 * reported as overdue (only the stuck-node rule of remediation may act on that).
 */
function waitBeforeAttempt(reason: 'NodeNotLaunchable' | 'GatesPending', waitingFor: string[], node: V1Node, now: number, config: ControllerConfig, pods: PodRef[]): Extract<Action, { kind: 'Wait' }> {
  const created = toMillis(node.metadata?.creationTimestamp) ?? now;
  const overdueAt = created + config.nodeManagement.bringUpTimeout;
  return {
    kind: 'Wait',
    reason,
    waitingFor,
    overdue: now >= overdueAt,
    ...(now < overdueAt ? { requeueAfterMs: overdueAt - now } : {}),
    cleanup: pods,
  };
}

/**
 * Step 4b: the startup timeout (nodeManagement.startupTimeout, off at 0). A node without a verdict
 * that long after its creation ends its verification as StartupTimeout, failed: `keep` and
 * `replace` leave it closed (remediation acts only on `replace`), `open` removes our taints without
 * verifying it. Not while the wait is the cluster's doing, which says nothing about the node: its
 * latest attempt was inconclusive (a cluster-wide fault), or it waits for a verification slot
 * other nodes hold. An attempt in flight is abandoned: its pod goes.
 */
function startupTimeout(
  node: V1Node,
  state: VerificationState | undefined,
  attempt: number,
  inFlight: number,
  pods: { mine: V1Pod[]; foreign: V1Pod[] },
  now: number,
  config: ControllerConfig,
  ctx: DecideContext,
): Extract<Action, { kind: 'Complete' }> | undefined {
  const { startupTimeout: timeout, onStartupTimeout: onTimeout } = config.nodeManagement;
  const created = toMillis(node.metadata?.creationTimestamp);
  if (timeout <= 0 || created === undefined || now < created + timeout) return undefined;
  if (state?.lastOutcome === Outcome.ClusterWide) return undefined;
  const blockers = launchBlockers(node, config);
  const gates = ctx.gates ?? [];
  const gatesFirst = gates.length > 0 && config.gates.mode === 'before';
  const backingOff = state?.phase === Phase.Backoff && state.nextAttemptAt !== undefined && now < state.nextAttemptAt;
  if (inFlight === 0 && !backingOff && blockers.length === 0 && !gatesFirst && ctx.slotsTaken >= config.reconciliation.maxConcurrentVerifications) return undefined;
  const gatesWait = gates.length > 0 ? `; its readiness gates were waiting for: ${gates.join('; ')}` : '';
  const doing =
    blockers.length > 0
      ? `the node still could not run the worker (waiting for: ${blockers.join('; ')})`
      : inFlight > 0
        ? `attempt ${inFlight} was still running${gatesWait}`
        : backingOff
          ? `it was backing off after ${state?.failures ?? 0} failed attempts (last: ${state?.lastMessage ?? 'no details'})${gatesWait}`
          : gatesFirst
            ? `no attempt had started: its readiness gates were waiting for: ${gates.join('; ')}`
            : 'no attempt had started';
  const result: AttemptResult = {
    outcome: Outcome.StartupTimeout,
    message: `no verdict within nodeManagement.startupTimeout (${formatDuration(timeout)}) of the node's creation: ${doing}`,
    failedChecks: [],
    checks: [],
    warnings: [],
  };
  const base: VerificationState = { ...carried(state, nodeUid(node)), attempt };
  return {
    kind: 'Complete',
    attempt,
    result,
    state: { ...finished(base, result, now), phase: Phase.Failed, failedAt: now },
    open: onTimeout === 'open',
    deletePod: false,
    tellPass: true,
    // The attempt in flight, if any, is not finished: it goes with every unfinished pod.
    cleanup: cleanup(pods.mine, pods.foreign, { keep: config.worker.keepFailedPods }),
  };
}

/** Step 5: the attempt's pod decides: still going, finished, or gone. */
function follow(
  node: V1Node,
  pod: V1Pod | undefined,
  attempt: number,
  state: VerificationState | undefined,
  pods: { mine: V1Pod[]; foreign: V1Pod[] },
  now: number,
  config: ControllerConfig,
  judgement: Judgement | undefined,
  gates: readonly string[],
): Action {
  const uid = nodeUid(node);
  const base: VerificationState = { ...carried(state, uid), attempt, phase: Phase.Verifying };
  if (pod) base.pod = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
  else if (state?.attempt === attempt && state.pod) base.pod = state.pod;
  // Adopted after a restart during the first attempt: the verification began with this pod.
  base.firstLaunchAt ??= toMillis(pod?.metadata?.creationTimestamp);
  if (base.firstLaunchAt === undefined) delete base.firstLaunchAt;
  const behind = state?.attempt !== attempt || state.phase !== Phase.Verifying;
  const keep = config.worker.keepFailedPods;

  // 5a. The pod is gone (the caller confirmed it with a live read): a failed attempt.
  if (!pod) {
    const result: AttemptResult = {
      outcome: Outcome.PodDeleted,
      message: 'the worker pod disappeared before it reported a result',
      failedChecks: [],
      checks: [],
      warnings: [],
    };
    return complete(attempt, undefined, result, base, pods, now, config, undefined);
  }

  // 5b. Still scheduling, starting or running: wait for its next deadline.
  const bringUpTimeout = config.nodeManagement.bringUpTimeout;
  const created = toMillis(node.metadata?.creationTimestamp);
  const bringUp = created === undefined ? undefined : { until: created + bringUpTimeout, timeoutMs: bringUpTimeout };
  const progress = evaluateWorkerPod(pod, now, config.worker, nodeTaints(node), bringUp);
  if (!progress.done) {
    return {
      kind: 'Wait',
      reason: progress.stage,
      requeueAfterMs: progress.requeueAfterMs,
      attempt,
      ...(behind ? { adopt: base } : {}),
      cleanup: cleanup(pods.mine, pods.foreign, { keep, inFlight: attempt }),
    };
  }

  // 5c. Passed, but Karpenter would re-add the taint until it has registered the node.
  if (progress.result.outcome === Outcome.Passed && !karpenterRegistered(node)) {
    return {
      kind: 'Wait',
      reason: 'KarpenterRegistration',
      attempt,
      ...(behind ? { adopt: base } : {}),
      cleanup: cleanup(pods.mine, pods.foreign, { keep, inFlight: attempt }),
    };
  }

  // 5c'. Passed, but the readiness gates do not hold yet (mode parallel, or one stopped holding
  //      while the attempt ran): the node opens once they do.
  if (progress.result.outcome === Outcome.Passed && gates.length > 0) {
    return {
      kind: 'Wait',
      reason: 'GatesPending',
      attempt,
      waitingFor: [...gates],
      ...(behind ? { adopt: base } : {}),
      cleanup: cleanup(pods.mine, pods.foreign, { keep, inFlight: attempt }),
    };
  }

  // 5d. Failed checks most new nodes fail alike: a control run on a verified node is under way.
  //     Nothing is written meanwhile; the finished pod keeps the attempt's result.
  if (progress.result.outcome === Outcome.ChecksFailed && judgement?.control === 'pending') {
    return { kind: 'Wait', reason: 'ControlRun', requeueAfterMs: CONTROL_POLL_MS, attempt, cleanup: cleanup(pods.mine, pods.foreign, { keep, inFlight: attempt }) };
  }

  // 5e. Finished: record the outcome.
  return complete(attempt, pod, progress.result, base, pods, now, config, judgement);
}

function complete(
  attempt: number,
  pod: V1Pod | undefined,
  result: AttemptResult,
  base: VerificationState,
  pods: { mine: V1Pod[]; foreign: V1Pod[] },
  now: number,
  config: ControllerConfig,
  judgement: Judgement | undefined,
): Action {
  const passed = result.outcome === Outcome.Passed;
  const { state, clusterWide, ...recorded } = attemptRecord(base, result, now, config, judgement);
  const keep = passed ? 0 : config.worker.keepFailedPods;
  // A pod that never finished (not scheduled / not started / over its deadline) is always removed.
  const deletePod = pod !== undefined && (keep === 0 || !isPodTerminal(pod));
  const others = pods.mine.filter((p) => p !== pod);
  const keepOthers = deletePod || !pod ? keep : Math.max(0, keep - 1);
  const action: Extract<Action, { kind: 'Complete' }> = {
    kind: 'Complete',
    attempt,
    result: recorded.result,
    state,
    open: passed,
    deletePod,
    tellPass: base.lastOutcome !== undefined && base.lastOutcome !== Outcome.Passed,
    cleanup: cleanup(others, pods.foreign, { keep: keepOthers }),
  };
  if (pod) action.pod = podRef(pod);
  if (clusterWide) action.clusterWide = clusterWide;
  if (state.phase === Phase.Backoff && state.nextAttemptAt !== undefined) action.requeueAfterMs = state.nextAttemptAt - now;
  return action;
}

/**
 * What a finished attempt records: its result (a failed one judged against the cluster: its
 * message may name the nodes failing alike, its outcome may become ClusterWide) and the progress
 * after it. Pure; the one place an attempt's verdict is made.
 */
export function attemptRecord(
  base: VerificationState,
  result: AttemptResult,
  now: number,
  config: ControllerConfig,
  judgement?: Judgement,
): { result: AttemptResult; state: VerificationState; clusterWide?: { blamed: Blame[]; control?: ControlAnswer } } {
  if (result.outcome === Outcome.Passed) return { result, state: passedState(base, result, now) };
  const verdict = result.outcome === Outcome.ChecksFailed && judgement ? clusterWideVerdict(judgement, result.message) : undefined;
  const control = judgement?.control === 'pending' ? undefined : judgement?.control;
  const clusterWide = verdict ? { blamed: verdict.blamed, ...(control ? { control } : {}) } : undefined;
  if (!verdict) return { result, state: failedState(base, result, now, config) };
  if (!verdict.inconclusive) {
    const named = { ...result, message: verdict.message };
    return { result: named, state: failedState(base, named, now, config), ...(clusterWide ? { clusterWide } : {}) };
  }
  const inconclusive = { ...result, outcome: Outcome.ClusterWide, message: verdict.message };
  return { result: inconclusive, state: inconclusiveState(base, inconclusive, now, config), ...(clusterWide ? { clusterWide } : {}) };
}

/**
 * The progress after an inconclusive attempt (the cause is outside the node): not counted (its
 * failure count stays), no remediation signal, tried again after a backoff that grows with the
 * attempts not counted (a short blip costs a short wait; a long outage is not hammered).
 */
function inconclusiveState(base: VerificationState, result: AttemptResult, now: number, config: ControllerConfig): VerificationState {
  const delay = backoffDelay(Math.max(1, base.attempt - base.failures), config.reconciliation);
  const state: VerificationState = {
    uid: base.uid,
    attempt: base.attempt,
    failures: base.failures,
    phase: Phase.Backoff,
    nextAttemptAt: now + delay,
    lastOutcome: result.outcome,
    lastMessage: result.message,
  };
  if (base.verifiedAt !== undefined) state.verifiedAt = base.verifiedAt;
  const failing = failingAfter(base.failing, result, now);
  if (failing !== undefined) state.failing = failing;
  return state;
}

/**
 * The failed checks of the attempt decide() would complete now as failed, if any: what the
 * controller gathers the cluster's judgement for before it decides (decide() is pure: asked
 * without a judgement, it says which attempt finished and how).
 */
export function attemptToJudge(node: V1Node, workerPods: readonly V1Pod[], now: number, config: ControllerConfig, state: VerificationState | undefined): readonly CheckSummary[] | undefined {
  // Failed checks are reported by a worker container that has ended: without one there is nothing to judge.
  if (!workerPods.some((p) => p.status?.containerStatuses?.some((c) => c.state?.terminated !== undefined))) return undefined;
  const action = decide(node, workerPods, now, config, { state, slotsTaken: 0 });
  return action.kind === 'Complete' && action.result.outcome === Outcome.ChecksFailed ? action.result.checks : undefined;
}

/** The progress after a passed attempt (exported for the DaemonSet agent, which runs the same state machine on its own node). */
export function passedState(base: VerificationState, result: AttemptResult, now: number): VerificationState {
  return { ...finished(base, result, now), failures: 0, phase: Phase.Passed, lastOutcome: Outcome.Passed, verifiedAt: now };
}

/** What every finished attempt records: its number, message, checks and end, and the verification's times. */
function finished(base: VerificationState, result: AttemptResult, now: number): VerificationState {
  const state: VerificationState = {
    uid: base.uid,
    attempt: base.attempt,
    failures: base.failures,
    phase: base.phase,
    lastOutcome: result.outcome,
    lastMessage: result.message,
    lastAttempt: base.attempt,
    lastChecks: result.checks.map(({ name, ok, durationMs, error, target }) => ({ name, ok, durationMs, ...(error !== undefined ? { error } : {}), ...(target !== undefined ? { target } : {}) })),
    lastFinishedAt: result.finishedAt ?? now,
  };
  for (const key of ['pod', 'launchableAt', 'firstLaunchAt', 'verifiedAt'] as const) if (base[key] !== undefined) (state as Record<typeof key, unknown>)[key] = base[key];
  return state;
}

/** The progress after a failed attempt: Backoff with its next attempt time, or Failed once retries are exhausted. */
export function failedState(base: VerificationState, result: AttemptResult, now: number, config: ControllerConfig): VerificationState {
  const failures = base.failures + 1;
  const state: VerificationState = { ...finished(base, result, now), failures, phase: Phase.Failed, failedAt: now };
  const failing = failingAfter(base.failing, result, now);
  if (failing !== undefined) state.failing = failing;
  if (failures <= config.reconciliation.maxRetries) {
    state.phase = Phase.Backoff;
    delete state.failedAt;
    state.nextAttemptAt = now + backoffDelay(failures, config.reconciliation);
  }
  return state;
}

/**
 * The node's failing streak after a failed attempt: begun now unless it was already failing, and
 * the checks this attempt failed against a target (an attempt without any, a worker that did not
 * report, keeps the last ones).
 */
function failingAfter(before: Failing | undefined, result: AttemptResult, now: number): Failing | undefined {
  const checks: Record<string, string> = {};
  for (const c of result.checks) if (!c.ok && c.target) checks[c.name] = c.target;
  if (Object.keys(checks).length === 0) return before && { ...before, at: now };
  return { since: before?.since ?? now, at: now, checks };
}

/** Delay before retry number `failures` (1-based): initial x factor^(failures-1), capped. */
export function backoffDelay(failures: number, r: ControllerConfig['reconciliation']): number {
  const delay = r.initialBackoff * r.backoffFactor ** Math.max(0, failures - 1);
  return Math.min(r.maxBackoff, Math.round(delay));
}

/**
 * What a new attempt inherits: the last attempt's record and verifiedAt; within this verification
 * also the failure count, the failing streak and when the node became launchable and was first launched.
 */
export function carried(state: VerificationState | undefined, uid: string): VerificationState {
  const sameVerification = state !== undefined && state.phase !== Phase.Passed;
  const out: VerificationState = {
    uid,
    attempt: state?.attempt ?? 0,
    failures: sameVerification ? state.failures : 0,
    phase: Phase.Verifying,
  };
  for (const key of ['lastOutcome', 'lastMessage', 'lastAttempt', 'lastChecks', 'lastFinishedAt', 'verifiedAt'] as const) {
    if (state?.[key] !== undefined) (out as Record<typeof key, unknown>)[key] = state[key];
  }
  if (sameVerification) {
    for (const key of ['failing', 'launchableAt', 'firstLaunchAt'] as const) if (state[key] !== undefined) (out as Record<typeof key, unknown>)[key] = state[key];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Node predicates (exported for the controller's event filter and for remediation)

export function isVerified(node: V1Node, config: ControllerConfig): boolean {
  const { key, value } = config.nodeManagement.verifiedLabel;
  return label(node, key) === value;
}

/**
 * A node to verify: it carries a verification taint, has a verification under way or done
 * (`state`: a node whose verified label was removed is verified again), or every node is
 * (verifyUntaintedNodes). A node only seen waiting (phase Waiting) whose taint went is not.
 */
export function isCandidate(node: V1Node, state: VerificationState | undefined, config: ControllerConfig): boolean {
  return hasVerificationTaint(node, config) || (state !== undefined && state.phase !== Phase.Waiting) || config.nodeManagement.verifyUntaintedNodes;
}

/** Any configured verification taint, matched by key and effect (the value is not ours to judge). */
export function hasVerificationTaint(node: V1Node, config: ControllerConfig): boolean {
  return nodeTaints(node).some((t) => isVerificationTaint(t, config));
}

export function isVerificationTaint(taint: { key: string; effect: string }, config: ControllerConfig): boolean {
  return config.nodeManagement.taints.some((c) => c.key === taint.key && c.effect === taint.effect);
}

/** Taints that shadow the Ready condition (the node lifecycle controller's): Ready says it first. */
const READY_SHADOW_TAINTS = new Set([NODE_NOT_READY_TAINT, NODE_UNREACHABLE_TAINT]);

/** How launchBlockers() begins the node's own readiness (the other blockers are taints). */
const READY_BLOCKER = 'Ready (';

/**
 * What keeps a worker from running on the node now, in words (empty: launch). The node must be
 * Ready, and carry no NoSchedule/NoExecute taint the worker does not tolerate (a CNI agent's,
 * karpenter.sh/unregistered, node.cloudprovider.kubernetes.io/uninitialized): a worker launched
 * before would only wait for the scheduler or the CNI and use up its deadlines.
 */
export function launchBlockers(node: V1Node, config: ControllerConfig): string[] {
  const blockers: string[] = [];
  const ready = (node.status?.conditions ?? []).find((c) => c.type === 'Ready');
  if (!ready) blockers.push(`${READY_BLOCKER}the kubelet has not reported the node status yet)`);
  else if (ready.status !== 'True') {
    const why = [ready.reason, ready.message].filter(Boolean).join(': ');
    blockers.push(`${READY_BLOCKER}${ready.status === 'False' ? 'NotReady' : ready.status}${why ? `: ${why}` : ''})`);
  }
  const taints = untoleratedTaints(nodeTaints(node), workerTolerations(config)).filter((t) => !READY_SHADOW_TAINTS.has(t.key));
  if (taints.length > 0) blockers.push(`${taints.length === 1 ? 'taint' : 'taints'} ${taints.map(formatTaint).join(', ')} removed (the worker does not tolerate ${taints.length === 1 ? 'it' : 'them'})`);
  return blockers;
}

/** The node's operating system when the worker cannot run on it (kubernetes.io/os set and not linux), else undefined. */
export function unsupportedOS(node: V1Node): string | undefined {
  const os = label(node, OS_LABEL);
  return os !== undefined && os !== 'linux' ? os : undefined;
}

/** Karpenter-managed nodes (label karpenter.sh/nodepool) must carry karpenter.sh/registered=true. */
export function karpenterRegistered(node: V1Node): boolean {
  if (label(node, Karpenter.NodePoolLabel) === undefined) return true;
  return label(node, Karpenter.RegisteredLabel) === 'true';
}

// ---------------------------------------------------------------------------------------------
// Worker pods of a node

/** Attempt number a worker pod was created for (0 if unreadable). */
export function podAttempt(pod: V1Pod): number {
  const n = Number(annotation(pod, PodAnnotation.Attempt));
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/**
 * This node's worker pods (same name and UID, sorted by attempt), and pods left by an earlier node
 * of the same name (other UID) or unreadable ones, which are only ever deleted.
 */
function partitionPods(pods: readonly V1Pod[], node: V1Node): { mine: V1Pod[]; foreign: V1Pod[] } {
  const mine: V1Pod[] = [];
  const foreign: V1Pod[] = [];
  for (const pod of pods) {
    if (workerNodeName(pod) !== nodeName(node)) continue;
    if (annotation(pod, PodAnnotation.NodeUid) === nodeUid(node) && podAttempt(pod) > 0) mine.push(pod);
    else foreign.push(pod);
  }
  mine.sort((a, b) => podAttempt(a) - podAttempt(b));
  return { mine, foreign };
}

/**
 * Pods to delete: foreign ones; unfinished pods of old attempts (orphans); finished ones beyond
 * the newest `keep`. The in-flight attempt's pod is never touched.
 */
function cleanup(
  mine: readonly V1Pod[],
  foreign: readonly V1Pod[],
  opts: { keep: number; inFlight?: number; all?: boolean },
): PodRef[] {
  if (opts.all) return refs([...mine, ...foreign].filter((p) => !p.metadata?.deletionTimestamp));
  const doomed: V1Pod[] = [...foreign];
  const finished: V1Pod[] = [];
  for (const pod of mine) {
    if (podAttempt(pod) === opts.inFlight) continue;
    if (isPodTerminal(pod)) finished.push(pod);
    else doomed.push(pod);
  }
  // `mine` is sorted by attempt: the newest finished pods are at the end.
  doomed.push(...finished.slice(0, Math.max(0, finished.length - opts.keep)));
  return refs(doomed.filter((p) => !p.metadata?.deletionTimestamp));
}

export function podRef(pod: V1Pod): PodRef {
  return { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' };
}

function refs(pods: readonly V1Pod[]): PodRef[] {
  return pods.map(podRef);
}

import type { V1ContainerStateTerminated, V1Pod, V1PodStatus, V1Taint } from '@kubernetes/client-node';
import { encodeSummary, ExitCode, formatDuration } from '@kube-node-ready/core';
import { WorkerContainer } from '../../../api/well-known.js';
import type { WorkerConfig } from '../../../config/schema.js';
import { toMillis } from '../../../kube/objects.js';
import { containerChecksOf } from './container-checks.js';
import { parseSummary, type CheckSummary, type WorkerSummary } from './summary.js';
import { formatTaint, untoleratedTaints } from './taints.js';
import { Outcome, type AttemptResult, type WorkerWarning } from './types.js';

/**
 * Reads a worker pod: still in progress (and until when we wait), or finished with an outcome.
 * Pure: every deadline comes from timestamps on the pod and the injected `now`; `nodeTaints` (the
 * node's current taints) name what kept an unscheduled pod off its node.
 */
export type PodProgress =
  | { done: false; stage: 'Scheduling' | 'Starting' | 'Running'; requeueAfterMs: number }
  | { done: true; result: AttemptResult };

/** Time the worker gets beyond worker.timeout to write its summary and for the kubelet to report it. */
export const RUN_GRACE_MS = 15_000;
/** Longest message we put in an Event or a condition (both are shown by `kubectl describe`). */
export const MAX_MESSAGE = 1024;

/** Pod-level reasons (status.reason) that mean the pod was taken away rather than failing on its own. */
const EVICTION_REASONS = new Set(['Evicted', 'Preempting', 'NodeShutdown', 'Terminated', 'NodeLost', 'Shutdown']);

/**
 * Waiting reasons of a container that will not start without a change (restartPolicy Never: the
 * kubelet would retry a pull, but an attempt does not wait for that): a container check waiting
 * with one has failed.
 */
const CANNOT_START = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'RegistryUnavailable',
  'SignatureValidationFailed',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'PreStartHookError',
  'PostStartHookError',
  'CrashLoopBackOff',
]);

/** The most of a container check's termination message kept in its error. */
export const MAX_CHECK_MESSAGE = 1024;

/** The node side of the start deadline: the pod sandbox may wait for the node's network until `until` (ms). */
export interface BringUp {
  /** Node creation + nodeManagement.bringUpTimeout. */
  until: number;
  /** nodeManagement.bringUpTimeout, for the message. */
  timeoutMs: number;
}

export function evaluateWorkerPod(pod: V1Pod, now: number, worker: WorkerConfig, nodeTaints: readonly V1Taint[] = [], bringUp?: BringUp): PodProgress {
  const status = pod.status ?? {};
  const container = status.containerStatuses?.find((c) => c.name === WorkerContainer.Name);
  const terminated = container?.state?.terminated;
  const terminal = status.phase === 'Succeeded' || status.phase === 'Failed';

  // 1. Deleted while not finished: the result will never come.
  if (pod.metadata?.deletionTimestamp && !terminal && !terminated) {
    return finished(Outcome.PodDeleted, 'the worker pod was deleted before it reported a result');
  }

  // 2. Pod-level failures the kubelet reports without (or before) a container result.
  if (status.phase === 'Failed' && status.reason === 'DeadlineExceeded') {
    return finished(Outcome.DeadlineExceeded, `the worker pod exceeded its activeDeadlineSeconds${suffix(status.message)}`, terminated);
  }
  if (status.phase === 'Failed' && status.reason && EVICTION_REASONS.has(status.reason)) {
    return finished(Outcome.PodDeleted, `the worker pod was evicted (${status.reason})${suffix(status.message)}`, terminated);
  }

  // 3. The container checks beside the worker: each finished, or running until its deadline. One
  //    that cannot start or outlives its timeout ends the attempt at once.
  const created = toMillis(pod.metadata?.creationTimestamp) ?? now;
  const workerStarted = terminated !== undefined || container?.state?.running !== undefined;
  const startBy = workerStarted ? containerStartDeadline(status, created, worker) : undefined;
  const checks = containerChecksOf(pod, worker.timeout).map((c) => checkProgress(status, c, now, startBy, worker.startTimeout));
  const results = checks.flatMap((c) => (c.done ? [c.check] : []));
  const ended = checks.some((c) => c.done && c.ends);
  const pendingUntil = Math.min(...checks.flatMap((c) => (c.done ? [] : [c.until])));

  // 4. The worker container finished: its exit code and summary decide, with the checks'.
  if (terminated) {
    if (ended || results.length === checks.length) return fromTermination(terminated, results);
    return { done: false, stage: 'Running', requeueAfterMs: Math.max(0, pendingUntil - now) };
  }
  if (ended) {
    const failed = results.filter((c) => !c.ok);
    return finished(Outcome.ChecksFailed, `${failedMessage(failed)} (before the worker's checks finished)`, undefined, { checks: results, failedChecks: failed.map((c) => c.name) });
  }
  if (terminal) {
    const why = status.reason ? `${status.reason}${suffix(status.message)}` : 'no container result was reported';
    return finished(Outcome.WorkerError, `the worker pod ${status.phase === 'Failed' ? 'failed' : 'ended'} without a result: ${why}`);
  }

  // 5. The worker is still pending or running: its deadlines, and the checks'.
  const progress = unfinishedWorker(pod, status, now, worker, created, nodeTaints, bringUp);
  if (!progress.done && pendingUntil < now + progress.requeueAfterMs) return { ...progress, requeueAfterMs: Math.max(0, pendingUntil - now) };
  return progress;
}

/** The worker container has not finished: which of its deadlines applies. */
function unfinishedWorker(pod: V1Pod, status: V1PodStatus, now: number, worker: WorkerConfig, created: number, nodeTaints: readonly V1Taint[], bringUp: BringUp | undefined): PodProgress {
  const container = status.containerStatuses?.find((c) => c.name === WorkerContainer.Name);
  const scheduled = status.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status !== 'True') {
    const deadline = created + worker.scheduleTimeout;
    if (now < deadline) return { done: false, stage: 'Scheduling', requeueAfterMs: deadline - now };
    return finished(Outcome.NotScheduled, `the worker pod was not scheduled within ${formatDuration(worker.scheduleTimeout)}${notScheduledWhy(pod, scheduled?.message, nodeTaints)}`);
  }

  const running = container?.state?.running;
  const startedAt = toMillis(running?.startedAt);
  if (startedAt === undefined) {
    const scheduledAt = toMillis(scheduled.lastTransitionTime) ?? created;
    const waiting = container?.state?.waiting;
    const why = waiting?.reason ? `: ${waiting.reason}${suffix(waiting.message)}` : '';
    // The kubelet's PodReadyToStartContainers: False until the pod sandbox (its network, from the
    // CNI) exists. While a new node's CNI comes up that is the node still starting, not a failed
    // attempt: it may take until the bring-up deadline. The container's own start (image pull)
    // then counts from the sandbox. Kubelets that do not report the condition: from scheduling.
    const sandbox = status.conditions?.find((c) => c.type === 'PodReadyToStartContainers');
    if (sandbox?.status === 'False') {
      const deadline = Math.max(scheduledAt + worker.startTimeout, bringUp?.until ?? 0);
      if (now < deadline) return { done: false, stage: 'Starting', requeueAfterMs: deadline - now };
      const within = bringUp && bringUp.until > scheduledAt + worker.startTimeout ? `nodeManagement.bringUpTimeout (${formatDuration(bringUp.timeoutMs)}) of the node's creation` : `${formatDuration(worker.startTimeout)} of scheduling`;
      return finished(Outcome.NotStarted, `the worker pod's sandbox was not created within ${within}: the node's pod network (CNI) is not working${why}`);
    }
    const from = sandbox?.status === 'True' ? (toMillis(sandbox.lastTransitionTime) ?? scheduledAt) : scheduledAt;
    const deadline = containerStartDeadline(status, created, worker);
    if (now < deadline) return { done: false, stage: 'Starting', requeueAfterMs: deadline - now };
    return finished(Outcome.NotStarted, `the worker container did not start within ${formatDuration(worker.startTimeout)} of ${from > scheduledAt ? 'its pod sandbox being created' : 'scheduling'}${why}`);
  }

  const deadline = startedAt + worker.timeout + RUN_GRACE_MS;
  if (now < deadline) return { done: false, stage: 'Running', requeueAfterMs: deadline - now };
  return finished(
    Outcome.DeadlineExceeded,
    `the worker was still running ${formatDuration(now - startedAt)} after it started (worker.timeout ${formatDuration(worker.timeout)})`,
    undefined,
    { startedAt },
  );
}

/**
 * By when a container of the pod must have started (its image pulled): worker.startTimeout after
 * its pod sandbox was created, after scheduling where the kubelet does not report
 * PodReadyToStartContainers.
 */
function containerStartDeadline(status: V1PodStatus, created: number, worker: WorkerConfig): number {
  const scheduledAt = toMillis(status.conditions?.find((c) => c.type === 'PodScheduled')?.lastTransitionTime) ?? created;
  const sandbox = status.conditions?.find((c) => c.type === 'PodReadyToStartContainers');
  const from = sandbox?.status === 'True' ? (toMillis(sandbox.lastTransitionTime) ?? scheduledAt) : scheduledAt;
  return Math.max(from, scheduledAt) + worker.startTimeout;
}

/** A container check: finished (`ends`: it ended the attempt early), or running or starting until a deadline. */
type CheckProgress = { done: true; check: CheckSummary; ends: boolean } | { done: false; until: number };

/**
 * One container check, from its container's status. Not started: it waits up to `startBy` (once
 * the worker has started; until then the worker's own start deadline applies to the pod).
 */
function checkProgress(status: V1PodStatus, check: { name: string; timeoutMs: number }, now: number, startBy: number | undefined, startTimeoutMs: number): CheckProgress {
  const { name, timeoutMs } = check;
  const state = status.containerStatuses?.find((c) => c.name === name)?.state;
  if (state?.terminated) return { done: true, ends: false, check: terminatedCheck(name, state.terminated) };
  const waiting = state?.waiting;
  if (waiting?.reason && CANNOT_START.has(waiting.reason)) {
    return { done: true, ends: true, check: { name, ok: false, durationMs: 0, error: bounded(`${waiting.reason}${suffix(waiting.message)}`) } };
  }
  const startedAt = toMillis(state?.running?.startedAt);
  if (startedAt !== undefined) {
    if (now < startedAt + timeoutMs) return { done: false, until: startedAt + timeoutMs };
    const error = `timeout: still running ${formatDuration(now - startedAt)} after it started (timeout ${formatDuration(timeoutMs)})`;
    return { done: true, ends: true, check: { name, ok: false, durationMs: now - startedAt, error } };
  }
  if (startBy === undefined || now < startBy) return { done: false, until: startBy ?? Number.POSITIVE_INFINITY };
  const why = waiting?.reason ? `: ${waiting.reason}${suffix(waiting.message)}` : '';
  return { done: true, ends: true, check: { name, ok: false, durationMs: 0, error: bounded(`its container did not start within ${formatDuration(startTimeoutMs)} (worker.startTimeout)${why}`) } };
}

/** A container check that ran: exit 0 passes; any other exit fails with the first KB of its termination message. */
function terminatedCheck(name: string, t: V1ContainerStateTerminated): CheckSummary {
  const startedAt = toMillis(t.startedAt);
  const finishedAt = toMillis(t.finishedAt);
  const durationMs = startedAt !== undefined && finishedAt !== undefined ? Math.max(0, finishedAt - startedAt) : 0;
  if (t.exitCode === 0) return { name, ok: true, durationMs };
  const reason = t.reason && t.reason !== 'Error' ? ` (${t.reason})` : '';
  const message = oneLine(t.message ?? '').slice(0, MAX_CHECK_MESSAGE);
  return { name, ok: false, durationMs, error: `exit code ${t.exitCode}${reason}${suffix(message)}` };
}

function failedMessage(failed: readonly CheckSummary[]): string {
  return `${failed.length === 1 ? 'check' : 'checks'} failed: ${failed.map((c) => `${c.name}: ${c.error ?? 'failed'}`).join('; ')}`;
}

/**
 * The scheduler's message says "node(s) had untolerated taint(s)" without naming them; the taints
 * of the node that the pod's tolerations do not match are the answer, so they come first.
 */
function notScheduledWhy(pod: V1Pod, schedulerMessage: string | undefined, nodeTaints: readonly V1Taint[]): string {
  const blocking = untoleratedTaints(nodeTaints, pod.spec?.tolerations ?? []);
  if (blocking.length === 0) return suffix(schedulerMessage);
  const taints = `the node has ${blocking.length === 1 ? 'taint' : 'taints'} ${blocking.map(formatTaint).join(', ')}, which the worker does not tolerate`;
  return `: ${taints}${schedulerMessage ? ` (scheduler: ${schedulerMessage})` : ''}`;
}

const EXIT_MEANING: Record<number, string> = {
  [ExitCode.CONFIG_ERROR]: 'configuration error',
  [ExitCode.INTERNAL_ERROR]: 'internal error',
  137: 'killed',
  143: 'terminated',
};

/**
 * The verdict of a worker run inside this process (the DaemonSet agent runs the checks itself):
 * judged exactly as a worker container that ended with this exit code and summary.
 */
export function inProcessVerdict(exitCode: number, summary: WorkerSummary, startedAt: number, finishedAt: number): AttemptResult {
  const progress = fromTermination({ exitCode, message: encodeSummary(summary), startedAt: new Date(startedAt), finishedAt: new Date(finishedAt) });
  if (!progress.done) throw new Error('a finished run judged as unfinished');
  return progress.result;
}

/** The worker container's result, with the container checks' (`own`) after the worker's checks. */
function fromTermination(t: V1ContainerStateTerminated, own: readonly CheckSummary[] = []): PodProgress {
  const code = t.exitCode;
  const parsed = parseSummary(t.message ?? '');
  const ownFailed = own.filter((c) => !c.ok);
  // A worker that could not judge keeps its outcome; the checks of ours that failed are named after it.
  const andOwn = ownFailed.length > 0 ? `; ${failedMessage(ownFailed)}` : '';

  // 1. Exit 0 and 1 are the worker's verdict: they must come with a readable, consistent summary.
  if (code === ExitCode.OK || code === ExitCode.CHECK_FAILED) {
    if (!parsed.ok) return finished(Outcome.WorkerError, `the worker exited with code ${code} but its summary is unusable: ${parsed.reason}${andOwn}`, t, { checks: [...own] });
    const { summary } = parsed;
    const warnings = warningsOf(summary);
    const checks = [...summary.checks, ...own];
    const failed = checks.filter((c) => !c.ok);
    const workerPassed = code === ExitCode.OK && summary.ok && summary.checks.every((c) => c.ok);
    const workerFailed = code === ExitCode.CHECK_FAILED && !summary.ok;
    if (workerPassed && failed.length === 0) {
      const names = checks.map((c) => c.name).join(', ') || 'no checks';
      const took = `in ${formatDuration(Math.max(summary.durationMs, ...own.map((c) => c.durationMs)))} (${names})`;
      // The warnings go last: when the message is cut to MAX_MESSAGE, the verdict stays whole.
      const message = warnings.length > 0 ? `all checks passed with warnings ${took}: ${warnings.map((w) => w.message).join('; ')}` : `all checks passed ${took}`;
      return finished(Outcome.Passed, message, t, { checks, warnings });
    }
    if (!workerPassed && !workerFailed) {
      return finished(Outcome.WorkerError, `the worker's exit code ${code} contradicts its summary (ok: ${summary.ok})${andOwn}`, t, { checks, warnings });
    }
    const message = failed.length > 0 ? failedMessage(failed) : `checks failed: ${summary.error ?? 'no check reported the failure'}`;
    return finished(Outcome.ChecksFailed, message, t, { checks, failedChecks: failed.map((c) => c.name), warnings });
  }

  // 2. Any other exit: the worker could not do its job (configuration, internal error, killed).
  const meaning = t.reason === 'OOMKilled' ? 'OOMKilled' : (EXIT_MEANING[code] ?? 'unexpected exit code');
  const detail = parsed.ok ? (parsed.summary.error ?? '') : firstLine(t.message ?? '');
  return finished(Outcome.WorkerError, `the worker exited with code ${code} (${meaning})${suffix(detail)}${andOwn}`, t, {
    checks: [...(parsed.ok ? parsed.summary.checks : []), ...own],
    warnings: parsed.ok ? warningsOf(parsed.summary) : [],
  });
}

/**
 * The summary's warnings, each with the check its prefix names. A prefix that is no check of this
 * summary is counted as `unknown`, so a worker cannot grow the metric's label set at will.
 */
function warningsOf(summary: WorkerSummary): WorkerWarning[] {
  const checks = new Set(summary.checks.map((c) => c.name));
  return (summary.warnings ?? []).map((text) => {
    const message = oneLine(text);
    const prefix = /^([^:\s]+):/.exec(message)?.[1];
    return { check: prefix !== undefined && checks.has(prefix) ? prefix : 'unknown', message };
  });
}

function finished(
  outcome: Outcome,
  message: string,
  t?: V1ContainerStateTerminated,
  extra: Partial<Pick<AttemptResult, 'checks' | 'failedChecks' | 'warnings' | 'startedAt'>> = {},
): PodProgress {
  const result: AttemptResult = { outcome, message: bounded(message), failedChecks: [], checks: [], warnings: [], ...extra };
  if (t) {
    result.exitCode = t.exitCode;
    const startedAt = toMillis(t.startedAt);
    const finishedAt = toMillis(t.finishedAt);
    if (startedAt !== undefined) result.startedAt = startedAt;
    if (finishedAt !== undefined) result.finishedAt = finishedAt;
  }
  return { done: true, result };
}

function suffix(text: string | undefined): string {
  return text ? `: ${text}` : '';
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0]?.trim() ?? '';
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** One line of at most MAX_MESSAGE characters. */
export function bounded(text: string): string {
  const line = oneLine(text);
  return line.length <= MAX_MESSAGE ? line : `${line.slice(0, MAX_MESSAGE - 3)}...`;
}

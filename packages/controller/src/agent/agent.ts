import type { V1Node } from '@kubernetes/client-node';
import { errorMessage, formatDuration, type Logger } from '@kube-node-ready/core';
import type { Clock } from '../clock.js';
import type { ControllerConfig } from '../config/schema.js';
import { desiredCondition, writesToNode } from '../controllers/node/verification/condition.js';
import { failedState, karpenterRegistered, passedState, type Action } from '../controllers/node/verification/decide.js';
import { awaitingRegistrationEvent, completedEvents, type NodeEvent } from '../controllers/node/verification/events.js';
import { conditionPatch, taintsToRemove, type ConditionInput } from '../controllers/node/verification/node-patch.js';
import { storeOutcome } from '../controllers/node/verification/open.js';
import type { ProgressStore } from '../controllers/node/verification/store.js';
import { Outcome, Phase, type AttemptResult, type VerificationState } from '../controllers/node/verification/types.js';
import { EventType, Reason } from '../events/reasons.js';
import type { EventRecorder } from '../events/recorder.js';
import type { KubeClient } from '../kube/client.js';
import type { AgentMetrics } from './metrics.js';
import { agentStep, type AgentStep } from './step.js';

/** How often an idle agent (failed, verified, not a candidate) reads its node again: `kube-node-ready verify` may restart it. */
export const IDLE_POLL_MS = 30_000;
/** How often a waiting agent (node not Ready, Karpenter registration) reads its node again. */
export const WAIT_POLL_MS = 2_000;

export interface AgentDeps {
  /** The node this pod runs on (spec.nodeName through the downward API). */
  nodeName: string;
  /** namespace/name of this pod, for Events. */
  pod: string;
  config: ControllerConfig;
  kube: Pick<KubeClient, 'getNode' | 'patchNodeStatus' | 'patchNode'>;
  /** `refresh`: reads the node's NodeVerification live (the agent keeps no cache). */
  store: ProgressStore & { refresh?(name: string): Promise<unknown> };
  events: EventRecorder;
  metrics: AgentMetrics;
  clock: Clock;
  log: Logger;
  /** Runs the checks once, in this process, under worker.timeout. */
  runChecks: () => Promise<AttemptResult>;
}

/**
 * DaemonSet mode (docs/installation.md#daemonset-mode): one agent per unverified node verifies its
 * own node and opens it with the controller's guarded write, which only this node's pod may make
 * (the chart's admission policy). Its progress is the controller's, in the node's NodeVerification
 * (which the admission policy also limits it to), so a restarted pod continues the count. Once the node carries the verified label, the DaemonSet
 * controller removes the pod. No remediation: a failed node keeps its taint, its condition and
 * Event say why, and the pod stays for `kubectl logs`, reading its node every IDLE_POLL_MS.
 */
export class NodeAgent {
  private lastStep = '';
  private ended = false;

  constructor(private readonly deps: AgentDeps) {}

  async run(signal: AbortSignal): Promise<void> {
    const { clock, log } = this.deps;
    while (!signal.aborted) {
      let pause: number;
      try {
        pause = await this.once(signal);
      } catch (err) {
        log.warn({ err: errorMessage(err), retryInMs: WAIT_POLL_MS * 5 }, 'reading or writing the node failed; trying again');
        pause = WAIT_POLL_MS * 5;
      }
      if (pause > 0) await clock.sleep(pause, signal);
    }
  }

  /** One step; returns how long to pause before the next. */
  async once(signal: AbortSignal): Promise<number> {
    const { kube, store, config, clock, nodeName } = this.deps;
    const node = await kube.getNode(nodeName);
    if (!node) {
      this.note('gone', 'the node is gone; this pod goes with it');
      return IDLE_POLL_MS;
    }
    await store.refresh?.(nodeName);
    const read = store.read(node);
    const now = clock.now();
    const step = agentStep(node, read, now, config);
    switch (step.kind) {
      case 'Idle':
        await this.idle(node, read.kind === 'ok' ? read.state : undefined, step);
        return IDLE_POLL_MS;
      case 'Wait':
        if (step.reason === 'Backoff') {
          this.note('backoff', 'backing off before the next attempt', { nextAttemptInMs: step.untilMs - now });
          return Math.max(0, step.untilMs - now);
        }
        this.note(`waiting:${step.waitingFor.join(';')}`, 'the node cannot be verified yet', { waitingFor: step.waitingFor });
        await store.ensure(node);
        return WAIT_POLL_MS;
      case 'Attempt':
        await this.attempt(node, step, signal);
        return 0;
    }
  }

  private async idle(node: V1Node, state: VerificationState | undefined, step: Extract<AgentStep, { kind: 'Idle' }>): Promise<void> {
    const { metrics, clock } = this.deps;
    if (step.reason === 'NotCandidate') {
      this.note('not-candidate', 'the node carries no verification taint: nothing to verify (label it verified, or set nodeManagement.verifyUntaintedNodes)');
      return;
    }
    this.note(`idle:${step.reason}`, step.reason === 'Failed' ? 'verification failed; the taint stays (kube-node-ready verify NODE starts again)' : `idle: ${step.reason}`);
    if (!this.ended && (step.reason === 'Verified' || step.reason === 'Failed')) {
      this.ended = true;
      metrics.recordEnded(step.reason === 'Verified', state?.verifiedAt ?? clock.now());
    }
    if (state && step.reason === 'Failed') await this.syncCondition(node, desiredCondition(state, this.deps.config));
  }

  private async attempt(node: V1Node, step: Extract<AgentStep, { kind: 'Attempt' }>, signal: AbortSignal): Promise<void> {
    const { store, config, clock, log, metrics } = this.deps;
    const max = config.reconciliation.maxRetries + 1;
    if (this.ended) {
      this.ended = false;
      metrics.recordRestarted();
    }
    if (step.interrupted !== undefined) {
      metrics.recordInterrupted();
      log.warn({ attempt: step.interrupted }, 'attempt interrupted (this pod restarted during it); not counted against the node');
    }

    // 1. The attempt is stored before the checks run: a restart continues the count.
    const started = await store.save(node, step.state);
    if (started === 'conflict') return;
    this.lastStep = '';
    const attempt = step.state.attempt;
    this.emit({ type: EventType.Normal, reason: Reason.VerificationStarted, message: `attempt ${step.state.failures + 1} of ${max}: pod ${this.deps.pod} runs the checks on its own node` });
    await this.syncCondition(started, desiredCondition(step.state, config));
    log.info({ attempt, of: max }, 'running the checks');

    // 2. The checks, in this process.
    const result = await this.deps.runChecks();
    if (signal.aborted) return; // stopping: the next pod runs the attempt again, not counted

    // 3. Karpenter re-adds the taint until it has registered the node: wait for it before opening.
    let current = await this.latest(started);
    if (result.outcome === Outcome.Passed && !karpenterRegistered(current)) {
      this.emit(awaitingRegistrationEvent());
      while (!karpenterRegistered(current) && !signal.aborted) {
        await clock.sleep(WAIT_POLL_MS, signal);
        current = await this.latest(current);
      }
      if (signal.aborted) return;
    }

    // 4. A pass opens the node (one guarded Node write), then the outcome is stored.
    const now = clock.now();
    const state = result.outcome === Outcome.Passed ? passedState(step.state, result, now) : failedState(step.state, result, now, config);
    const open = state.phase === Phase.Passed;
    const removedTaints = open ? taintsToRemove(current, config) : [];
    const saved = await storeOutcome({ kube: this.deps.kube, store, config }, current, state, open);
    if (saved === 'conflict') {
      log.warn({ attempt }, 'the node changed during the attempt (a new verification was asked for?): its result is not recorded');
      return;
    }
    metrics.recordAttempt(result);
    if (state.phase === Phase.Passed || state.phase === Phase.Failed) {
      this.ended = true;
      metrics.recordEnded(open && !config.dryRun, now);
    }
    const action: Extract<Action, { kind: 'Complete' }> = {
      kind: 'Complete',
      attempt,
      result,
      state,
      open,
      deletePod: false,
      // The agent tells every step of its own node (ADR 0006 leaves DaemonSet mode as it was).
      tellPass: true,
      cleanup: [],
      ...(state.phase === Phase.Backoff && state.nextAttemptAt !== undefined ? { requeueAfterMs: state.nextAttemptAt - now } : {}),
    };
    for (const event of completedEvents(action, config, { dryRun: config.dryRun, removedTaints })) this.emit(event);
    await this.syncCondition(saved, desiredCondition(state, config));
    const fields = { attempt, outcome: result.outcome, failedChecks: result.failedChecks, phase: state.phase };
    if (open) log.info({ ...fields, removedTaints, dryRun: config.dryRun }, config.dryRun ? 'node passed (dry run: not opened)' : 'node passed and was opened');
    else log.warn({ ...fields, message: result.message, ...(action.requeueAfterMs !== undefined ? { retryIn: formatDuration(action.requeueAfterMs) } : {}) }, 'verification attempt failed');
  }

  /** The node as the API server has it now (the written copy if it is gone meanwhile). */
  private async latest(fallback: V1Node): Promise<V1Node> {
    return (await this.deps.kube.getNode(this.deps.nodeName)) ?? fallback;
  }

  /** The Node carries verdicts (condition.ts writesToNode); every step is in the NodeVerification. */
  private async syncCondition(node: V1Node, wanted: ConditionInput): Promise<void> {
    const { config, kube, clock, nodeName } = this.deps;
    if (!config.nodeManagement.condition.enabled || config.dryRun) return;
    if (!writesToNode(wanted, node.status?.conditions?.find((c) => c.type === wanted.type))) return;
    const patch = conditionPatch(node, wanted, clock.now());
    if (patch) await kube.patchNodeStatus(nodeName, patch);
  }

  private emit(event: NodeEvent): void {
    void this.deps.events.nodeEvent(this.deps.nodeName, event.type, event.reason, event.message);
  }

  /** Logs a step once, not on every poll. */
  private note(key: string, message: string, fields: Record<string, unknown> = {}): void {
    if (this.lastStep === key) return;
    this.lastStep = key;
    this.deps.log.info(fields, message);
  }
}

import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import { PodAnnotation } from '../../../api/well-known.js';
import type { Clock } from '../../../clock.js';
import type { ControllerConfig } from '../../../config/schema.js';
import type { EventRecorder } from '../../../events/recorder.js';
import type { KubeClient } from '../../../kube/client.js';
import { isRefusal, messageOf, reasonOf } from '../../../kube/errors.js';
import { stripObject } from '../../../kube/informer.js';
import { annotation, nodeName, nodeUid, toMillis } from '../../../kube/objects.js';
import type { ControllerMetrics } from '../../../metrics/metrics.js';
import type { NodeStatus } from '../../../metrics/names.js';
import { judgeShared, noteClusterWide, type ClusterWideFailures, type ControlAnswer, type Evidence } from './cluster-wide.js';
import { CONTROL_POLL_MS, type ControlRuns } from './control.js';
import type { ClusterDnsEndpoints } from './dns-endpoints.js';
import { desiredCondition, unsupportedOSCondition, waitingCondition, writesToNode } from './condition.js';
import { carried, decide, hasVerificationTaint, POD_REFUSED_RETRY_MS, podRef, unsupportedOS, type Action, type PodRef } from './decide.js';
import { awaitingRegistrationEvent, completedEvents, podRefusedEvent, startedEvent, unsupportedOSEvent, waitingForNodeEvent, type NodeEvent } from './events.js';
import { workerPodName } from './naming.js';
import { NodeCopies } from './node-copies.js';
import { conditionPatch, taintsToRemove, type ConditionInput } from './node-patch.js';
import { buildWorkerPod, workerNodeName } from './pod-spec.js';
import type { ReactionClock } from './reaction.js';
import { slimNode } from './slim-node.js';
import type { VerificationSlots } from './slots.js';
import type { ProgressStore } from './store.js';
import { Outcome, Phase, type VerificationState } from './types.js';

/**
 * The verification controller: gathers what decide() needs (the node and its worker pods from
 * the informer caches, the stored progress), asks decide() for the next step, and applies it.
 * One reconcile per node at a time (the work queue guarantees it). The node is read from the
 * informer, or from our own last write when the informer has not delivered it yet (NodeCopies).
 * A node write refused because the node changed is retried on a live read of the node (the
 * informer's copy may still be the stale one); other errors go back to the queue's backoff.
 */
export interface VerificationDeps {
  config: ControllerConfig;
  clock: Clock;
  log: Logger;
  kube: Pick<KubeClient, 'getNode' | 'findNode' | 'patchNodeStatus' | 'createPod' | 'getPod' | 'deletePod'>;
  /** Informer caches. */
  nodes: { get(name: string): V1Node | undefined };
  /** The worker pods of a node, by its name (the pod informer's index: workerNodeName). */
  pods: { byIndex(node: string): readonly V1Pod[] };
  store: ProgressStore;
  events: EventRecorder;
  metrics: ControllerMetrics;
  slots: VerificationSlots;
  /** `apiEndpoints`: the API server addresses new worker pods get (`--api-endpoints`), as known now. */
  worker: { image: string; configHash: string; apiEndpoints?: () => readonly string[] };
  /** Puts a node back on the work queue (to wake nodes waiting for a verification slot). */
  enqueue: (name: string) => void;
  /** Recent failed checks of all nodes: a failure shared with other nodes is named cluster-wide. */
  clusterWide?: ClusterWideFailures;
  /** Control runs on verified nodes: whether a failure most new nodes share is theirs (reconciliation.controlRuns). */
  controlRuns?: Pick<ControlRuns, 'verdict'>;
  /** The cluster DNS Service's ready endpoints: none explains a failed dns check (reconciliation.clusterDnsService). */
  clusterDns?: Pick<ClusterDnsEndpoints, 'ready' | 'service'>;
  /** The API server refused a worker pod for this node (remediation's circuit breaker counts it). */
  podRefused?: (node: V1Node) => void;
  /** The clocks of the controller's own reaction (kube_node_ready_reaction_seconds), started by the watch handlers. */
  reactions?: ReactionClock;
}

export interface ReconcileResult {
  requeueAfterMs?: number;
}

/** How long a pod we created stands in for the cache's copy (the watch usually delivers in ms). */
const RECENTLY_CREATED_TTL_MS = 10_000;

/** How long a node may wait to become launchable before the wait is reported (condition, Event). */
const WAITING_REPORT_AFTER_MS = 10_000;

/** Node writes refused for a changed node before the reconcile gives up and requeues. */
const MAX_CONFLICT_ROUNDS = 3;

/**
 * What apply() did. A refused node write reports the worker pod it created first, if any; a
 * conflict found by reading the node live carries that read (`live.node` undefined: it is gone).
 */
type Applied =
  | { kind: 'done'; node: V1Node; state?: VerificationState; report?: Report; result: ReconcileResult }
  | { kind: 'conflict'; launched?: PodRef; live?: { node: V1Node | undefined } };
/** What the condition and the status metric say when it is not the stored progress (a node waiting to become launchable). */
interface Report {
  status: NodeStatus;
  condition: ConditionInput;
}
const CONFLICT: Applied = { kind: 'conflict' };

export class VerificationController {
  /**
   * Pods this controller created that the pod cache may not show yet (client-go's
   * "expectations"): spares a live read when the next reconcile comes before the watch event.
   */
  private readonly recentlyCreated = new Map<string, { pod: V1Pod; at: number }>();
  private readonly reportedInvalid = new Map<string, string>();
  /** Nodes told their worker pod was refused (the Event is recorded once per message): node name -> message. */
  private readonly refusedReported = new Map<string, string>();
  /** Nodes told they wait to become launchable (the Event is recorded once): node name -> `uid|overdue`. */
  private readonly waitingReported = new Map<string, string>();
  /** The condition last written per node: the cache lags our own writes, so compare with this too. */
  private readonly writtenCondition = new Map<string, string>();
  /** The informer's nodes, or the newer copies our own writes and live reads returned. */
  private readonly nodes: NodeCopies;
  /** When each node was first found able to run the worker (NodeVerification status launchableAt). */
  private readonly launchableSince = new Map<string, number>();

  constructor(private readonly deps: VerificationDeps) {
    this.nodes = new NodeCopies(deps.nodes);
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const { config, kube, store } = this.deps;
    const log = this.deps.log.child({ node: name });
    const startedAt = this.deps.clock.now();

    // 1. The node is gone: remove its workers and its metrics.
    let node = this.nodes.get(name) ?? (await this.uncachedNode(name, log));
    if (!node) return this.forget(name, log);
    /** A worker pod this reconcile created for a launch whose progress write was then refused. */
    let launched: PodRef | undefined;

    for (let round = 1; ; round++) {
      // 2. Read the stored progress and the node's worker pods.
      const state = this.readProgress(node, log);
      const pods = await this.workerPods(node, state);

      // 3. Decide, then apply.
      const arrival = toMillis(node.metadata?.creationTimestamp) ?? 0;
      const action = decide(node, pods, this.deps.clock.now(), config, {
        state,
        slotsTaken: this.deps.slots.taken(name, arrival),
      });
      // A launch takes its slot now, before any await, so parallel reconciles see it; a node that
      // found none keeps its place in line; any other step leaves the line.
      if (action.kind === 'Launch') this.deps.slots.reserve(name);
      else if (action.kind === 'Wait' && action.reason === 'ConcurrencyLimit') this.deps.slots.wait(name, arrival);
      else if (this.deps.slots.waiting(name)) {
        this.deps.slots.leaveQueue(name);
        this.slotFreed(); // its place in line goes to the next
      }
      // A pod launched from a copy the write found stale runs on only if the fresh decision follows it.
      if (launched && !follows(action, launched.name, node)) {
        await this.discardLaunched(launched, log);
        launched = undefined;
      }
      if (action.kind === 'Launch' || (action.kind === 'Wait' && action.reason === 'ConcurrencyLimit')) {
        if (!this.launchableSince.has(name)) this.launchableSince.set(name, this.deps.clock.now());
      }
      // A reaction's clock runs only toward its own step: a node that must wait (for a slot, a
      // backoff, Karpenter's registration) is not the controller reacting.
      if (action.kind !== 'Launch') this.deps.reactions?.cancel('launch', name, startedAt);
      if (action.kind !== 'Complete') this.deps.reactions?.cancel('open', name, startedAt);
      const applied = await this.apply(node, pods, action, state, log);

      // 4. The node changed under us: read it again, live (the informer may still hold the copy
      //    the write was refused for; a conflict found by a live read brings that read), and
      //    decide again.
      if (applied.kind === 'conflict') {
        launched = applied.launched ?? launched;
        if (round >= MAX_CONFLICT_ROUNDS) throw new Error(`node ${name} kept changing during ${round} attempts to write it`);
        log.debug({ round }, 'node changed since it was read; reading it again');
        const fresh = applied.live ? applied.live.node : await kube.getNode(name);
        if (!fresh) {
          if (launched) await this.discardLaunched(launched, log);
          return this.forget(name, log);
        }
        node = this.slim(fresh);
        this.nodes.observe(node);
        continue;
      }
      if (applied.node !== node) this.nodes.observe(this.slim(applied.node));

      // 5. Bring the condition and the status metric in line with the stored progress, on a node
      //    that is ours. Never on one decide() leaves alone (not a candidate, going away): a
      //    condition of ours there would claim a node another installation, or nobody, verifies.
      if (!(action.kind === 'Ignore' && (action.reason === 'NotCandidate' || action.reason === 'NodeDeleting'))) {
        await this.syncReport(applied.node, applied.report ?? applied.state ?? stored(store, applied.node), log);
      }
      return applied.result;
    }
  }

  /**
   * A node the cache does not have, read live if it still has worker pods (the cache can be
   * behind: a new leader's node watch may lag its pod watch, and then the worker the previous
   * leader just started for a new node, or for a node re-created under the same name, looks
   * orphaned). Without worker pods there is nothing to lose by waiting for the watch.
   */
  private async uncachedNode(name: string, log: Logger): Promise<V1Node | undefined> {
    if (this.workersOf(name).length === 0) return undefined;
    const live = await this.deps.kube.findNode(name, this.deps.config.nodeManagement.nodeSelector);
    if (!live) return undefined;
    log.debug({ uid: nodeUid(live) }, 'node not in the cache yet but it exists; going on with a live copy');
    return this.slim(live);
  }

  /** A node from the API server cut to what the node cache keeps (slim-node.ts slimNode). */
  private slim(node: V1Node): V1Node {
    return slimNode(node, this.deps.config.nodeManagement.condition.type);
  }

  /** The cached worker pods for a node name that are not being deleted yet. */
  private workersOf(name: string): V1Pod[] {
    return this.deps.pods.byIndex(name).filter((p) => !p.metadata?.deletionTimestamp);
  }

  /** The node is gone (deleted, or no longer matching the node selector): delete its workers, drop its series and memory. */
  async forget(name: string, log: Logger = this.deps.log.child({ node: name })): Promise<ReconcileResult> {
    const orphans = this.workersOf(name);
    await this.deletePods(orphans.map(podRef), log);
    this.deps.metrics.forgetNode(name);
    this.deps.store.forget(name);
    this.nodes.forget(name);
    this.deps.slots.forget(name);
    this.reportedInvalid.delete(name);
    this.waitingReported.delete(name);
    this.refusedReported.delete(name);
    this.writtenCondition.delete(name);
    this.launchableSince.delete(name);
    this.deps.reactions?.forget(name);
    for (const [pod, entry] of this.recentlyCreated) if (workerNodeName(entry.pod) === name) this.recentlyCreated.delete(pod);
    if (orphans.length > 0) log.info({ pods: orphans.length }, 'node is gone; deleted its worker pods');
    return {};
  }

  // -------------------------------------------------------------------------------------------

  private readProgress(node: V1Node, log: Logger): VerificationState | undefined {
    const read = this.deps.store.read(node);
    if (read.kind === 'ok') return read.state;
    if (read.kind === 'invalid' && this.reportedInvalid.get(node.metadata?.name ?? '') !== read.problem) {
      this.reportedInvalid.set(node.metadata?.name ?? '', read.problem);
      log.warn({ problem: read.problem }, 'ignoring unusable verification state on the node');
    }
    return undefined;
  }

  /**
   * The node's worker pods from the cache. The pod of the attempt in flight is read live when
   * the cache lacks it: the cache may lag our own create, and decide() treats a missing pod as
   * deleted.
   */
  private async workerPods(node: V1Node, state: VerificationState | undefined): Promise<V1Pod[]> {
    const name = node.metadata?.name ?? '';
    const pods = [...this.deps.pods.byIndex(name)];
    if (state?.phase !== Phase.Verifying) return pods;
    const expected = workerPodName(name, nodeUid(node), state.attempt);
    const remembered = this.recentlyCreated.get(expected);
    if (pods.some((p) => p.metadata?.name === expected)) {
      this.recentlyCreated.delete(expected);
      return pods;
    }
    if (remembered && this.deps.clock.now() - remembered.at < RECENTLY_CREATED_TTL_MS) return [...pods, remembered.pod];
    this.recentlyCreated.delete(expected);
    const live = await this.deps.kube.getPod(this.deps.config.worker.namespace, expected);
    return live ? [...pods, stripObject(live)] : pods;
  }

  private async apply(node: V1Node, pods: readonly V1Pod[], action: Action, state: VerificationState | undefined, log: Logger): Promise<Applied> {
    const newer = await this.newerNodeThanCleanup(node, pods, action.cleanup);
    if (newer) return { kind: 'conflict', live: newer };
    await this.deletePods(action.cleanup, log);
    switch (action.kind) {
      case 'Ignore':
        return this.ignore(node, action, state, log);
      case 'Wait':
        return this.wait(node, action, state, log);
      case 'Launch':
        return this.launch(node, action, log);
      case 'Complete':
        return this.complete(node, pods, action, log);
    }
  }

  /**
   * The live node, when deleting `cleanup` could delete the worker of a newer node of the same name
   * (undefined when it cannot, or the live node is `node`). A pod for another node UID is normally
   * an older node's (deleted, then re-created under the same name), and goes. But when the node
   * cache is behind the pod cache, the copy of the node is the older one and the pod belongs to the
   * node that exists now. An older node's pod was created before that node was deleted, so before
   * this one was created; one created no earlier than this node is checked against the live node
   * first. Not ours any more (or gone): the caller decides again on that live copy, as after a
   * refused write.
   */
  private async newerNodeThanCleanup(node: V1Node, pods: readonly V1Pod[], cleanup: readonly PodRef[]): Promise<{ node: V1Node | undefined } | undefined> {
    const uid = nodeUid(node);
    const created = toMillis(node.metadata?.creationTimestamp);
    const doubtful = cleanup.some((ref) => {
      const pod = pods.find((p) => p.metadata?.name === ref.name);
      if (!pod || annotation(pod, PodAnnotation.NodeUid) === uid) return false;
      const podCreated = toMillis(pod.metadata?.creationTimestamp);
      return created === undefined || podCreated === undefined || podCreated >= created;
    });
    if (!doubtful) return undefined;
    const live = await this.deps.kube.getNode(nodeName(node));
    return !live || nodeUid(live) !== uid ? { node: live } : undefined;
  }

  private async ignore(node: V1Node, action: Extract<Action, { kind: 'Ignore' }>, state: VerificationState | undefined, log: Logger): Promise<Applied> {
    const name = node.metadata?.name ?? '';
    this.deps.slots.release(name);
    if (action.reason === 'NodeDeleting' || action.reason === 'NotCandidate') this.deps.metrics.forgetNode(name);
    // Opened, but the status that records it was not written (the Node is written first; the
    // reconcile ended between the two): complete it from the node, level-based, without a Node write.
    if (action.reason === 'Verified' && state?.phase === Phase.Verifying) {
      const completed: VerificationState = { ...state, phase: Phase.Passed, failures: 0, verifiedAt: state.verifiedAt ?? this.deps.clock.now() };
      delete completed.failing;
      const saved = await this.deps.store.save(node, completed, { open: false });
      if (saved === 'conflict') return CONFLICT;
      log.info({ attempt: state.attempt }, 'node found open with its attempt still recorded as running: recorded it as passed');
      return { kind: 'done', node: saved, state: completed, result: {} };
    }
    log.trace({ reason: action.reason }, 'nothing to do');
    return { kind: 'done', node, result: {} };
  }

  /**
   * A node to verify waits (it cannot run the worker yet, no slot is free, or it never can): its
   * NodeVerification exists from the first sight, and a wait longer than WAITING_REPORT_AFTER_MS
   * is recorded in it (phase Waiting, with what it waits for). A node with an attempt behind it keeps
   * that phase (its backoff has run out).
   */
  private async recordWaiting(node: V1Node, state: VerificationState | undefined, condition: ConditionInput | undefined): Promise<V1Node | 'conflict'> {
    if (state && state.phase !== Phase.Waiting) return node;
    const age = this.deps.clock.now() - (toMillis(node.metadata?.creationTimestamp) ?? 0);
    if (age < WAITING_REPORT_AFTER_MS) {
      if (!state) await this.deps.store.ensure(node);
      return node;
    }
    const waiting: VerificationState = { ...carried(state, nodeUid(node)), phase: Phase.Waiting };
    const launchable = this.launchableSince.get(nodeName(node));
    if (launchable !== undefined) waiting.launchableAt = launchable;
    return this.deps.store.save(node, waiting, { open: false, ...(condition ? { condition } : {}) });
  }

  private async wait(node: V1Node, action: Extract<Action, { kind: 'Wait' }>, state: VerificationState | undefined, log: Logger): Promise<Applied> {
    const name = node.metadata?.name ?? '';
    let written = node;
    if (action.persist) {
      // A pod newer than the stored progress (created just before a restart): record it first.
      const saved = await this.deps.store.save(node, action.persist, { open: false });
      if (saved === 'conflict') return CONFLICT;
      written = saved;
      log.info({ attempt: action.attempt }, 'resumed an attempt whose worker pod already existed');
    }
    if (action.reason === 'ConcurrencyLimit') {
      this.deps.metrics.setNodeStatus(name, 'waiting');
      if ((await this.recordWaiting(node, state, undefined)) === 'conflict') return CONFLICT;
    }
    if (action.reason === 'KarpenterRegistration') this.emit(name, awaitingRegistrationEvent());
    log.debug({ reason: action.reason, attempt: action.attempt, requeueAfterMs: action.requeueAfterMs, waitingFor: action.waitingFor }, 'waiting');
    if (action.reason === 'UnsupportedOS') {
      const os = unsupportedOS(node) ?? 'unknown';
      const key = `${nodeUid(node)}|os`;
      if (this.waitingReported.get(name) !== key) {
        this.waitingReported.set(name, key);
        this.emit(name, unsupportedOSEvent(os, this.deps.config));
        log.warn({ os }, 'the worker cannot run on this node (not Linux); it is not verified and keeps its taint');
      }
      const condition = unsupportedOSCondition(os, this.deps.config);
      if ((await this.recordWaiting(node, state, condition)) === 'conflict') return CONFLICT;
      return { kind: 'done', node: written, report: { status: 'waiting', condition }, result: {} };
    }
    if (action.reason === 'NodeNotLaunchable') {
      const waitingFor = action.waitingFor ?? [];
      const overdue = action.overdue ?? false;
      // A node that has just registered is usually Ready within seconds: say nothing (no Event, no
      // status write: only the NodeVerification is created) until it has waited
      // WAITING_REPORT_AFTER_MS. The status metric costs no request and says it at once.
      const age = this.deps.clock.now() - (toMillis(node.metadata?.creationTimestamp) ?? 0);
      const condition = waitingCondition(waitingFor, overdue, this.deps.config);
      if ((await this.recordWaiting(node, state, condition)) === 'conflict') return CONFLICT;
      if (age < WAITING_REPORT_AFTER_MS) {
        this.deps.metrics.setNodeStatus(name, 'waiting');
        const again = WAITING_REPORT_AFTER_MS - age;
        return { kind: 'done', node: written, result: requeue(Math.min(again, action.requeueAfterMs ?? again)) };
      }
      const key = `${nodeUid(node)}|${overdue}`;
      if (this.waitingReported.get(name) !== key) {
        this.waitingReported.set(name, key);
        this.emit(name, waitingForNodeEvent(waitingFor, overdue, this.deps.config));
        (overdue ? log.warn.bind(log) : log.info.bind(log))({ waitingFor }, overdue ? 'the node still cannot run the worker after nodeManagement.bringUpTimeout' : 'waiting until the node can run the worker');
      }
      const report = { status: 'waiting' as const, condition };
      return { kind: 'done', node: written, report, result: requeue(action.requeueAfterMs) };
    }
    return { kind: 'done', node: written, ...(action.persist ? { state: action.persist } : {}), result: requeue(action.requeueAfterMs) };
  }

  private async launch(node: V1Node, action: Extract<Action, { kind: 'Launch' }>, log: Logger): Promise<Applied> {
    const { config, kube, worker } = this.deps;
    const name = node.metadata?.name ?? '';

    // 1. The pod first: its deterministic name makes a repeat (after a crash or a conflict) a no-op.
    const pod = buildWorkerPod({
      node,
      attempt: action.attempt,
      podName: action.podName,
      config,
      image: worker.image,
      configHash: worker.configHash,
      apiEndpoints: worker.apiEndpoints?.() ?? [],
    });
    let created: V1Pod | undefined;
    try {
      created = await kube.createPod(pod);
    } catch (err) {
      if (!isRefusal(err)) throw err;
      this.deps.reactions?.cancel('launch', name);
      this.podRefused(node, action.podName, err, log);
      return { kind: 'done', node, result: requeue(POD_REFUSED_RETRY_MS) };
    }
    this.deps.reactions?.stop('launch', name);
    const now = this.deps.clock.now();
    for (const [podName, entry] of this.recentlyCreated) if (now - entry.at >= RECENTLY_CREATED_TTL_MS) this.recentlyCreated.delete(podName);
    if (created) this.recentlyCreated.set(action.podName, { pod: stripObject(created), at: now });

    // 2. Then the progress: the next reconcile follows this attempt. Refused, the decision was made
    //    on a stale copy: the caller decides again on a live one, and keeps the pod only if that
    //    decision follows it.
    const launchable = this.launchableSince.get(name);
    const state: VerificationState = launchable !== undefined && action.state.launchableAt !== undefined && launchable < action.state.launchableAt ? { ...action.state, launchableAt: launchable } : action.state;
    const saved = await this.deps.store.save(node, state, { open: false });
    if (saved === 'conflict') return created ? { kind: 'conflict', launched: podRef(created) } : CONFLICT;

    this.emit(name, startedEvent(action, config));
    if (action.state.failures > 0) this.deps.metrics.recordRetry(name);
    log.info({ attempt: action.attempt, pod: action.podName, existed: created === undefined }, 'started worker pod');
    return { kind: 'done', node: saved, state, result: requeue(action.requeueAfterMs) };
  }

  /**
   * The API server refused the worker pod (admission, quota, Pod Security): no pod, so the slot goes
   * back at once; the node's progress is untouched (not an attempt: the node is not at fault); it
   * tries again in POD_REFUSED_RETRY_MS. Said once per node and message; counted for the breaker.
   */
  private podRefused(node: V1Node, podName: string, err: unknown, log: Logger): void {
    const name = nodeName(node);
    const message = messageOf(err);
    this.deps.slots.release(name);
    this.slotFreed();
    this.deps.metrics.recordPodRefused(reasonOf(err) ?? 'Unknown');
    this.deps.podRefused?.(node);
    if (this.refusedReported.get(name) === message) return;
    this.refusedReported.set(name, message);
    this.emit(name, podRefusedEvent(podName, message));
    log.warn({ pod: podName, err: message, retryAfterMs: POD_REFUSED_RETRY_MS }, 'the API server refused the worker pod; not counted as an attempt, tried again later');
  }

  private async complete(
    node: V1Node,
    pods: readonly V1Pod[],
    decided: Extract<Action, { kind: 'Complete' }>,
    log: Logger,
  ): Promise<Applied> {
    const { config, clock, metrics } = this.deps;
    const name = node.metadata?.name ?? '';
    const judged = this.deps.clusterWide ? await this.judgeClusterWide(this.deps.clusterWide, node, decided, log) : decided;
    // A control run of the checks most nodes fail is under way: the attempt is judged when it ends
    // (nothing is written meanwhile; the finished worker pod keeps the attempt's result).
    if (judged === 'control') return { kind: 'done', node, result: requeue(CONTROL_POLL_MS) };
    const action = judged;
    const removedTaints = action.open ? taintsToRemove(node, config) : [];

    // 1. One guarded write: the outcome, and for a pass the taint removal and the label.
    const saved = await this.deps.store.save(node, action.state, { open: action.open });
    if (saved === 'conflict') return CONFLICT;
    const now = clock.now();
    if (action.open && !config.dryRun && removedTaints.length > 0) this.deps.reactions?.stop('open', name);
    else this.deps.reactions?.cancel('open', name);

    // 2. Explain: events, logs, metrics.
    for (const event of completedEvents(action, config, { dryRun: config.dryRun, removedTaints })) this.emit(name, event);
    const pod = pods.find((p) => p.metadata?.name === action.pod?.name);
    const podCreated = toMillis(pod?.metadata?.creationTimestamp);
    const finished = action.result.finishedAt ?? now;
    metrics.recordAttempt({
      outcome: action.result.outcome,
      ...(podCreated !== undefined ? { durationSeconds: (finished - podCreated) / 1000 } : {}),
      checks: action.result.checks,
      warnings: action.result.warnings,
    });
    const created = toMillis(node.metadata?.creationTimestamp);
    if (action.open && !config.dryRun && removedTaints.length > 0 && created !== undefined) metrics.recordOpened((now - created) / 1000);
    const warnings = action.result.warnings.map((w) => w.message);
    const fields = { attempt: action.attempt, outcome: action.result.outcome, failedChecks: action.result.failedChecks, phase: action.state.phase, ...(warnings.length > 0 ? { warnings } : {}) };
    if (action.open) log.info({ ...fields, removedTaints, dryRun: config.dryRun }, config.dryRun ? 'node passed (dry run: not opened)' : 'node passed and was opened');
    else log.warn({ ...fields, message: action.result.message, requeueAfterMs: action.requeueAfterMs }, 'verification attempt failed');

    // 3. The pod has served its purpose (failed ones are kept up to worker.keepFailedPods).
    if (action.deletePod && action.pod) await this.deletePods([action.pod], log);
    this.deps.slots.release(name);
    return { kind: 'done', node: saved, state: action.state, result: requeue(action.requeueAfterMs) };
  }

  /**
   * noteClusterWide with the cluster's own evidence (the DNS Service's endpoints, read only when a
   * dns check failed) and, where only the failures of other nodes make the failure look
   * cluster-wide, a control run's answer ('control': under way); the signal's changes logged.
   */
  private async judgeClusterWide(failures: ClusterWideFailures, node: V1Node, decided: Extract<Action, { kind: 'Complete' }>, log: Logger): Promise<Extract<Action, { kind: 'Complete' }> | 'control'> {
    const name = nodeName(node);
    const evidence: Evidence[] = [];
    const dns = this.deps.clusterDns;
    if (dns && decided.result.outcome === Outcome.ChecksFailed && decided.result.checks.some((c) => c.name === 'dns' && !c.ok) && (await dns.ready()) === 0) {
      evidence.push({ check: 'dns', services: [dns.service], why: `the cluster DNS Service ${dns.service} has no ready endpoint` });
    }
    let control: ControlAnswer | undefined;
    if (this.deps.controlRuns && decided.result.outcome === Outcome.ChecksFailed) {
      const { most } = judgeShared(failures, name, decided.result.checks, evidence);
      if (most.length > 0) {
        const verdict = await this.deps.controlRuns.verdict(most.map((s) => s.check), node);
        if (verdict.kind === 'pending') {
          log.debug({ checks: most.map((s) => s.check), controlNode: verdict.node }, 'most new nodes fail these checks alike: judging the attempt when the control run ends');
          return 'control';
        }
        control = verdict;
      }
    }
    const { action, signal } = noteClusterWide(failures, name, decided, this.deps.clock.now(), this.deps.config, evidence, control);
    for (const { check, why } of signal.raised) log.warn({ check, why }, 'cluster-wide fault: attempts failing this check are inconclusive until a node passes it');
    for (const check of signal.cleared) log.info({ check }, 'cluster-wide fault cleared: a node passed the check');
    return action;
  }

  /**
   * The condition and the status metric follow the stored progress, or what the reconcile reports
   * instead (a node waiting to become launchable): level-based, idempotent.
   */
  private async syncReport(node: V1Node, from: VerificationState | Report | undefined, log: Logger): Promise<void> {
    const { config, metrics } = this.deps;
    const name = node.metadata?.name ?? '';
    if (!from) return;
    const report = 'condition' in from ? from : from.uid === nodeUid(node) ? { status: statusOf(from), condition: desiredCondition(from, config) } : undefined;
    if (!report) return;
    metrics.setNodeStatus(name, report.status);
    // The Node carries verdicts; every step is in the NodeVerification (written with it).
    const wanted = report.condition;
    if (!config.nodeManagement.condition.enabled || config.dryRun) return;
    if (!writesToNode(wanted, node.status?.conditions?.find((c) => c.type === wanted.type))) return;
    const key = `${nodeUid(node)}|${JSON.stringify(wanted)}`;
    if (this.writtenCondition.get(name) === key) return;
    const patch = conditionPatch(node, wanted, this.deps.clock.now());
    if (patch) {
      await this.deps.kube.patchNodeStatus(name, patch);
      log.debug({ condition: patch.status.conditions[0] }, 'updated the node condition');
    }
    this.writtenCondition.set(name, key);
  }

  /** Deletes a worker pod launched on a decision the node write then showed to be based on a stale copy. */
  private async discardLaunched(pod: PodRef, log: Logger): Promise<void> {
    this.recentlyCreated.delete(pod.name);
    await this.deletePods([pod], log);
    log.info({ pod: pod.name }, 'deleted a worker pod started from an outdated copy of the node');
  }

  private async deletePods(pods: readonly PodRef[], log: Logger): Promise<void> {
    for (const pod of pods) {
      try {
        await this.deps.kube.deletePod(pod.namespace, pod.name);
        log.debug({ pod: pod.name }, 'deleted worker pod');
      } catch (err) {
        // Not fatal: the next reconcile sees the pod again and retries.
        log.warn({ pod: pod.name, err: messageOf(err) }, 'could not delete worker pod');
      }
    }
  }

  /** Events are best effort and off the critical path: recorded in the background, never awaited. */
  private emit(node: string, event: NodeEvent): void {
    this.deps.events.nodeEvent(node, event.type, event.reason, event.message).catch((err: unknown) => {
      this.deps.log.warn({ node, reason: event.reason, err: errorMessage(err) }, 'could not record event');
    });
  }

  /**
   * The pod watch reports a worker pod that no longer holds a verification slot (finished, being
   * deleted, or gone), or a node left the line: as many nodes as slots are free (at least the first
   * in line) may go now. Waking on the cache change (not when the controller decides to delete)
   * means the woken reconcile sees the slot free.
   */
  slotFreed(): void {
    const free = this.deps.config.reconciliation.maxConcurrentVerifications - this.deps.slots.activeCount();
    for (const node of this.deps.slots.first(Math.max(1, free))) this.deps.enqueue(node);
  }
}

function statusOf(state: VerificationState): NodeStatus {
  switch (state.phase) {
    case Phase.Waiting:
      return 'waiting';
    case Phase.Verifying:
      return 'verifying';
    case Phase.Backoff:
      return 'backoff';
    case Phase.Passed:
      return 'verified';
    case Phase.Failed:
      return 'failed';
  }
}

function requeue(ms: number | undefined): ReconcileResult {
  return ms === undefined ? {} : { requeueAfterMs: Math.max(0, ms) };
}

/** Whether `action` goes on with the worker pod named `podName` (launches it, waits on it, records it). */
function follows(action: Action, podName: string, node: V1Node): boolean {
  switch (action.kind) {
    case 'Launch':
      return action.podName === podName;
    case 'Wait':
      return action.attempt !== undefined && workerPodName(nodeName(node), nodeUid(node), action.attempt) === podName;
    case 'Complete':
      return action.pod?.name === podName;
    case 'Ignore':
      return false;
  }
}

/** Whether a node event can matter to verification (used to skip kubelet status churn). */
export function nodeFingerprint(node: V1Node, config: ControllerConfig): string {
  const labels = node.metadata?.labels ?? {};
  return JSON.stringify([
    node.metadata?.uid,
    node.metadata?.deletionTimestamp ?? null,
    hasVerificationTaint(node, config),
    (node.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`),
    labels[config.nodeManagement.verifiedLabel.key] ?? null,
    labels['karpenter.sh/nodepool'] ?? null,
    labels['karpenter.sh/registered'] ?? null,
    (node.status?.conditions ?? []).find((c) => c.type === config.nodeManagement.condition.type) ?? null,
    // Ready's status and reason (not its heartbeat): a node becoming Ready can take its worker now.
    (node.status?.conditions ?? []).filter((c) => c.type === 'Ready').map((c) => `${c.status}:${c.reason ?? ''}`),
  ]);
}

function stored(store: ProgressStore, node: V1Node): VerificationState | undefined {
  const read = store.read(node);
  return read.kind === 'ok' ? read.state : undefined;
}

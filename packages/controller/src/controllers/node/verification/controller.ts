import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import { PodAnnotation } from '../../../api/well-known.js';
import type { Clock } from '../../../clock.js';
import { Profiles, type Profile } from '../../../config/profiles.js';
import { DEFAULT_PROFILE, type ControllerConfig } from '../../../config/schema.js';
import type { EventRecorder } from '../../../events/recorder.js';
import type { KubeClient } from '../../../kube/client.js';
import { messageOf } from '../../../kube/errors.js';
import { MutationCache } from '../../../kube/mutation-cache.js';
import { stripObject } from '../../../kube/informer.js';
import { annotation, nodeName, nodeUid, toMillis } from '../../../kube/objects.js';
import type { ControllerMetrics } from '../../../metrics/metrics.js';
import type { NodeStatus } from '../../../metrics/names.js';
import { complete } from './actions/complete.js';
import { type ActionContext, type Applied, type ReconcileResult, type Report } from './actions/context.js';
import { ignore } from './actions/ignore.js';
import { launch } from './actions/launch.js';
import { wait } from './actions/wait.js';
import { judgeShared, type ClusterWideFailures, type Evidence, type Judgement } from './cluster-wide.js';
import type { ControlRuns } from './control.js';
import type { ClusterDnsEndpoints } from './dns-endpoints.js';
import { desiredCondition, writesToNode } from './condition.js';
import { attemptToJudge, decide, hasVerificationTaint, isVerified, podRef, type Action, type PodRef } from './decide.js';
import type { NodeEvent } from './events.js';
import { NodeMemory } from './memory.js';
import { workerPodName } from './naming.js';
import { conditionPatch } from './node-patch.js';
import type { ReactionClock } from './reaction.js';
import { gatedResources, hasGates } from './gates/config.js';
import { evaluateGates, gatedAllocatable, type GateInputs } from './gates/evaluate.js';
import { slimNode } from './slim-node.js';
import type { VerificationSlots } from './slots.js';
import type { ProgressStore } from './store.js';
import type { WorkerConfigMap } from './worker-config.js';
import { Phase, type VerificationState } from './types.js';

export type { ReconcileResult } from './actions/context.js';

/**
 * The verification controller. One reconcile per node at a time (the work queue guarantees it):
 * read (the node and its worker pods from the informer caches, the stored progress, and for an
 * attempt that failed checks what the cluster says about them), decide once (decide.ts: the only
 * place a verdict is made), apply the one action decide() returned (actions/: launch, complete,
 * wait, ignore), then bring the condition and the status metric in line. The node is read from the
 * informer, or from our own last write when the informer has not delivered it yet (kube/mutation-cache.ts). A
 * write refused because the node changed is a requeue, after a live read of the node (the informer's
 * copy may still be the stale one); other errors go back to the queue's backoff.
 */
export interface VerificationDeps {
  config: ControllerConfig;
  clock: Clock;
  log: Logger;
  kube: Pick<KubeClient, 'getNode' | 'findNode' | 'patchNode' | 'patchNodeStatus' | 'createPod' | 'getPod' | 'deletePod'>;
  /** Informer caches. */
  nodes: { get(name: string): V1Node | undefined };
  /** The worker pods of a node, by its name (the pod informer's index: workerNodeName). */
  pods: { byIndex(node: string): readonly V1Pod[] };
  store: ProgressStore;
  events: EventRecorder;
  metrics: ControllerMetrics;
  slots: VerificationSlots;
  /**
   * `configs`: each profile's key in the worker ConfigMap; `apiEndpoints`: the API server addresses
   * new worker pods get (`--api-endpoints`), as known now.
   */
  worker: { image: string; configs: Pick<WorkerConfigMap, 'of'>; apiEndpoints?: () => readonly string[] };
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
  /** What the readiness gates read (gates/sources.ts): present when any profile configures a gate. */
  gates?: GateInputs;
}


/** How long a worker pod this controller deleted is not deleted again (the pod watch shows a deletion well within it). */
const DELETED_PODS_MS = 30_000;

export class VerificationController {
  /** What this controller remembers of each node (memory.ts), forgotten with the node. */
  private readonly memory = new NodeMemory();
  /** The informer's nodes, or the newer copies our own writes and live reads returned. */
  private readonly nodes: MutationCache<V1Node>;
  /** Which profile's settings apply to a node (config/profiles.ts). */
  private readonly profiles: Profiles;
  /** What the actions use (actions/context.ts), one per profile: its `deps.config` is the profile's. */
  private readonly actions = new Map<string, ActionContext>();
  /** The resources a gate requires: what the node cache keeps of status.allocatable. */
  private readonly gatedResources: ReadonlySet<string>;
  /** Worker pods this controller deleted, by `namespace/name`, and when (deletePods()). */
  private readonly deletedPods = new Map<string, number>();

  constructor(private readonly deps: VerificationDeps) {
    this.nodes = new MutationCache(deps.nodes, 'gone');
    this.profiles = new Profiles(deps.config);
    this.gatedResources = gatedResources(this.profiles.all().map((p) => p.config));
    for (const profile of this.profiles.all()) {
      this.actions.set(profile.name, {
        deps: { ...deps, config: profile.config },
        profile: profile.name,
        memory: this.memory,
        emit: (node, event) => this.emit(node, event),
        deletePods: (pods, log) => this.deletePods(pods, log),
        slotFreed: () => this.slotFreed(),
      });
    }
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const { clock, kube, slots } = this.deps;
    const startedAt = clock.now();

    // 1. The node is gone: remove its workers and its memory.
    const node = this.nodes.get(name) ?? (await this.uncachedNode(name, this.deps.log.child({ node: name })));
    if (!node) return this.forget(name);
    // Everything below runs with the settings of the node's profile.
    const profile = this.profiles.of(node);
    const config = profile.config;
    const log = this.deps.log.child({ node: name, ...(profile.name !== DEFAULT_PROFILE ? { profile: profile.name } : {}) });

    // 2. Read: the stored progress, the node's worker pods, and for an attempt that failed checks,
    //    what the cluster says about them.
    const state = this.readProgress(node, log);
    const pods = await this.workerPods(node, state);
    const now = clock.now();
    const judgement = await this.judge(node, pods, state, now, config);
    const gates = this.gatesWaitingFor(node, config, log);

    // 3. Decide, once.
    const arrival = toMillis(node.metadata?.creationTimestamp) ?? 0;
    const launchableSince = this.memory.get(name)?.launchableSince;
    const action = decide(node, pods, now, config, {
      state,
      slotsTaken: slots.taken(name, arrival),
      ...(launchableSince !== undefined ? { launchableSince } : {}),
      ...(judgement ? { judgement } : {}),
      ...(gates ? { gates } : {}),
    });

    // 4. The line for slots and the controller's own memory follow the decision. A launch takes its
    //    slot now, before any await, so parallel reconciles see it; a node that found none keeps its
    //    place in line; any other step leaves the line.
    if (action.kind === 'Launch') slots.reserve(name);
    else if (action.kind === 'Wait' && action.reason === 'ConcurrencyLimit') slots.wait(name, arrival);
    else if (slots.waiting(name)) {
      slots.leaveQueue(name);
      this.slotFreed(); // its place in line goes to the next
    }
    if (action.kind === 'Launch' || (action.kind === 'Wait' && action.reason === 'ConcurrencyLimit')) this.memory.of(name).launchableSince ??= now;
    // A reaction's clock runs only toward its own step: a node that must wait (for a slot, a
    // backoff, Karpenter's registration) is not the controller reacting.
    if (action.kind !== 'Launch') this.deps.reactions?.cancel('launch', name, startedAt);
    if (action.kind !== 'Complete') this.deps.reactions?.cancel('open', name, startedAt);

    // 5. Apply it.
    const applied = await this.apply(this.actions.get(profile.name) as ActionContext, node, pods, action, state, log);

    // 6. A conflict is a requeue. A write was refused because the node or its NodeVerification
    //    changed since they were read: the node is read live (the informer may still hold the
    //    refused copy; a conflict found by a live read brings that read) so that the next reconcile
    //    decides on it, and the key goes back to the queue, backing off if it keeps conflicting.
    if (applied.kind === 'conflict') {
      const fresh = applied.live ? applied.live.node : await kube.getNode(name);
      if (!fresh) return this.forget(name, log);
      this.nodes.observe(this.slim(fresh));
      log.debug('node changed since it was read; reconciling it again');
      return { requeue: true };
    }
    if (applied.node !== node) this.nodes.observe(this.slim(applied.node));

    // 7. Bring the condition and the status metric in line with the stored progress, on a node that
    //    is ours. Never on one decide() leaves alone (not a candidate, going away): a condition of
    //    ours there would claim a node another installation, or nobody, verifies.
    if (!(action.kind === 'Ignore' && (action.reason === 'NotCandidate' || action.reason === 'NodeDeleting'))) {
      await this.syncReport(applied.node, applied.report ?? applied.state ?? this.readProgress(applied.node, log), config, log);
    }
    return applied.result;
  }

  /**
   * What the cluster says about the failed checks of an attempt that has just finished (none
   * other is judged): the failures other nodes share (recorded here, once per attempt and node),
   * the cluster's own evidence (the DNS Service's endpoints, read only when dns failed) and, where
   * only the failures of other nodes make the failure look cluster-wide, a control run's answer
   * ('pending' while it runs: decide() then waits for it).
   */
  private async judge(node: V1Node, pods: readonly V1Pod[], state: VerificationState | undefined, now: number, config: ControllerConfig): Promise<Judgement | undefined> {
    const failures = this.deps.clusterWide;
    if (!failures) return undefined;
    const checks = attemptToJudge(node, pods, now, config, state);
    if (!checks) return undefined;
    const evidence: Evidence[] = [];
    const dns = this.deps.clusterDns;
    if (dns && checks.some((c) => c.name === 'dns' && !c.ok) && (await dns.ready()) === 0) {
      evidence.push({ check: 'dns', services: [dns.service], why: `the cluster DNS Service ${dns.service} has no ready endpoint` });
    }
    const judgement: Judgement = { ...judgeShared(failures, nodeName(node), checks, evidence), windowMs: failures.windowMs };
    if (this.deps.controlRuns && judgement.most.length > 0) {
      const verdict = await this.deps.controlRuns.verdict(judgement.most.map((s) => s.check), node);
      if (verdict.kind === 'pending') this.deps.log.debug({ node: nodeName(node), checks: judgement.most.map((s) => s.check), controlNode: verdict.node }, 'most new nodes fail these checks alike: judging the attempt when the control run ends');
      judgement.control = verdict.kind === 'pending' ? 'pending' : verdict;
    }
    return judgement;
  }

  /**
   * What the node's readiness gates wait for (gates/evaluate.ts), from the gate caches: undefined
   * when its profile configures none. Required DaemonSets not waited for on this node (they do not
   * select it, or cannot run before it opens) are logged at debug level.
   */
  private gatesWaitingFor(node: V1Node, config: ControllerConfig, log: Logger): string[] | undefined {
    const inputs = this.deps.gates;
    // A verified node has nothing left to wait for (decide() leaves it alone before it reads gates).
    if (!inputs || !hasGates(config.gates) || isVerified(node, config)) return undefined;
    const verdict = evaluateGates(node, config.gates, inputs, config.nodeManagement.taints);
    if (verdict.notAwaited.length > 0) log.debug({ notAwaited: verdict.notAwaited }, 'required DaemonSets not waited for on this node');
    return verdict.waitingFor;
  }

  private async apply(ctx: ActionContext, node: V1Node, pods: readonly V1Pod[], action: Action, state: VerificationState | undefined, log: Logger): Promise<Applied> {
    const newer = await this.newerNodeThanCleanup(node, pods, action.cleanup);
    if (newer) return { kind: 'conflict', live: newer };
    await this.deletePods(action.cleanup, log);
    switch (action.kind) {
      case 'Ignore':
        return ignore(ctx, node, action, state, log);
      case 'Wait':
        return wait(ctx, node, action, state, log);
      case 'Launch':
        return launch(ctx, node, action, log);
      case 'Complete':
        return complete(ctx, node, pods, action, log);
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
    return slimNode(node, this.deps.config.nodeManagement.condition.type, this.gatedResources);
  }

  /** The cached worker pods for a node name that are not being deleted yet. */
  private workersOf(name: string): V1Pod[] {
    return this.deps.pods.byIndex(name).filter((p) => !p.metadata?.deletionTimestamp);
  }

  /** The node is gone (deleted, or no longer matching the node selector): delete its workers, drop its series and memory. */
  async forget(name: string, log: Logger = this.deps.log.child({ node: name })): Promise<ReconcileResult> {
    const orphans = this.workersOf(name).map(podRef);
    // The attempt in flight's pod may not be in the pod cache yet.
    const inFlight = this.deps.store.inFlight(name)?.pod?.split('/');
    if (inFlight?.length === 2 && !orphans.some((p) => p.name === inFlight[1])) orphans.push({ namespace: inFlight[0]!, name: inFlight[1]! });
    await this.deletePods(orphans, log);
    this.deps.metrics.forgetNode(name);
    this.deps.store.forget(name);
    this.nodes.forget(name);
    this.deps.slots.forget(name);
    this.memory.forget(name);
    this.deps.reactions?.forget(name);
    if (orphans.length > 0) log.info({ pods: orphans.length }, 'node is gone; deleted its worker pods');
    return {};
  }

  // -------------------------------------------------------------------------------------------

  /** The node's progress (the attempt in flight included: ProgressStore.read()). */
  private readProgress(node: V1Node, log: Logger): VerificationState | undefined {
    const name = nodeName(node);
    const read = this.deps.store.read(node);
    if (read.kind === 'ok') return read.state;
    if (read.kind === 'invalid' && this.memory.get(name)?.invalidReported !== read.problem) {
      this.memory.of(name).invalidReported = read.problem;
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
    const name = nodeName(node);
    const pods = [...this.deps.pods.byIndex(name)];
    if (state?.phase !== Phase.Verifying) return pods;
    const expected = workerPodName(name, nodeUid(node), state.attempt);
    if (pods.some((p) => p.metadata?.name === expected)) return pods;
    const live = await this.deps.kube.getPod(this.deps.config.worker.namespace, expected);
    return live ? [...pods, stripObject(live)] : pods;
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

  /**
   * The condition and the status metric follow the stored progress, or what the reconcile reports
   * instead (a node waiting to become launchable): level-based, idempotent.
   */
  private async syncReport(node: V1Node, from: VerificationState | Report | undefined, config: ControllerConfig, log: Logger): Promise<void> {
    const { metrics } = this.deps;
    const name = nodeName(node);
    if (!from) return;
    const report = 'condition' in from ? from : from.uid === nodeUid(node) ? { status: statusOf(from), condition: desiredCondition(from, config) } : undefined;
    if (!report) return;
    metrics.setNodeStatus(name, report.status);
    // The Node carries verdicts; every step is in the NodeVerification (written with it).
    const wanted = report.condition;
    if (!config.nodeManagement.condition.enabled || config.dryRun) return;
    if (!writesToNode(wanted, node.status?.conditions?.find((c) => c.type === wanted.type))) return;
    const key = `${nodeUid(node)}|${JSON.stringify(wanted)}`;
    if (this.memory.get(name)?.writtenCondition === key) return;
    const patch = conditionPatch(node, wanted, this.deps.clock.now());
    if (patch) {
      await this.deps.kube.patchNodeStatus(name, patch);
      log.debug({ condition: patch.status.conditions[0] }, 'updated the node condition');
    }
    this.memory.of(name).writtenCondition = key;
  }

  /**
   * Deletes worker pods. One this controller deleted less than DELETED_PODS_MS ago is not deleted
   * again: the pod cache may not show the deletion yet, and the reconcile right after an outcome
   * (woken by our own writes) would otherwise send a second delete for the pod it just deleted.
   */
  private async deletePods(pods: readonly PodRef[], log: Logger): Promise<void> {
    const now = this.deps.clock.now();
    for (const [key, at] of this.deletedPods) if (now - at >= DELETED_PODS_MS) this.deletedPods.delete(key);
    for (const pod of pods) {
      const key = `${pod.namespace}/${pod.name}`;
      if (this.deletedPods.has(key)) continue;
      try {
        await this.deps.kube.deletePod(pod.namespace, pod.name);
        this.deletedPods.set(key, now);
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

/** Whether a node event can matter to verification (used to skip kubelet status churn). `profile`: the profile that applies to it. */
export function nodeFingerprint(node: V1Node, profile: Profile): string {
  const { config } = profile;
  const labels = node.metadata?.labels ?? {};
  return JSON.stringify([
    node.metadata?.uid,
    profile.name,
    node.metadata?.deletionTimestamp ?? null,
    hasVerificationTaint(node, config),
    (node.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`),
    labels[config.nodeManagement.verifiedLabel.key] ?? null,
    labels['karpenter.sh/nodepool'] ?? null,
    labels['karpenter.sh/registered'] ?? null,
    (node.status?.conditions ?? []).find((c) => c.type === config.nodeManagement.condition.type) ?? null,
    // Ready's status and reason (not its heartbeat): a node becoming Ready can take its worker now.
    (node.status?.conditions ?? []).filter((c) => c.type === 'Ready').map((c) => `${c.status}:${c.reason ?? ''}`),
    // The resources a gate requires (a device plugin registering them opens the gate).
    gatedAllocatable(node, Object.keys(config.gates.requireResources)),
  ]);
}

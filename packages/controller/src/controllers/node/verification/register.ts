import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { PodLabel, PodLabelValue } from '../../../api/well-known.js';
import type { Clock } from '../../../clock.js';
import { Profiles } from '../../../config/profiles.js';
import type { ControllerConfig } from '../../../config/schema.js';
import type { EventRecorder } from '../../../events/recorder.js';
import type { KubeClient } from '../../../kube/client.js';
import type { SelfHealingInformer } from '../../../kube/informer.js';
import { isPodTerminal, nodeName, nodeUid, toMillis } from '../../../kube/objects.js';
import type { ControllerMetrics } from '../../../metrics/metrics.js';
import { WorkQueue, type QueuePriority } from '../../../queue/workqueue.js';
import type { NodeVerification } from '../../../api/nodeverification.js';
import type { Controller } from '../../manager.js';
import type { ApiEndpoints } from './api-endpoints.js';
import { nodeHistory, type ClusterWideFailures } from './cluster-wide.js';
import { ControlRuns } from './control.js';
import { nodeFingerprint, VerificationController } from './controller.js';
import { hasVerificationTaint, isVerified, launchBlockers } from './decide.js';
import { ClusterDnsEndpoints } from './dns-endpoints.js';
import { workerNodeName } from './pod-spec.js';
import { ReactionClock } from './reaction.js';
import type { VerificationSlots } from './slots.js';
import type { ProgressStore } from './store.js';
import { Phase } from './types.js';
import type { WorkerConfigMap } from './worker-config.js';
import type { GateSources } from './gates/sources.js';

export interface VerificationSetup {
  config: ControllerConfig;
  clock: Clock;
  log: Logger;
  kube: KubeClient;
  metrics: ControllerMetrics;
  nodes: SelfHealingInformer<V1Node>;
  /** Worker pods, indexed by the node they verify (workerNodeName). */
  pods: SelfHealingInformer<V1Pod>;
  slots: VerificationSlots;
  store: ProgressStore;
  /** The NodeVerification informer (none in dry run): a deleted one puts its node back on the queue. */
  verifications?: Pick<SelfHealingInformer<NodeVerification>, 'on'>;
  events: EventRecorder;
  clusterWide: ClusterWideFailures;
  /** `configs`: the worker ConfigMap the leader puts in worker.configMapName, one key per profile. */
  worker: { image: string; configs: WorkerConfigMap };
  apiEndpoints: ApiEndpoints;
  /** The API server refused a worker pod for this node (remediation's circuit breaker counts it). */
  podRefused?: (node: V1Node) => void;
  /** The readiness gates' caches, when any profile configures a gate: a change of what they read wakes the nodes it concerns. */
  gates?: GateSources;
}

/**
 * The verification controller's registration: its queue and reconciler, the watch events that
 * become its keys (node updates that change nothing it reads, kubelet heartbeats, are dropped here),
 * its safety-net resync, and what it takes over when this replica starts leading.
 */
export function verificationController(s: VerificationSetup): Controller {
  const { config, clock, log, kube, metrics, nodes, pods, slots } = s;
  const queue = new WorkQueue<string>({
    clock,
    observer: {
      depth: (n) => metrics.queueDepth.set(n),
      waited: (ms) => metrics.queueWait.observe(ms / 1000),
      added: () => metrics.queueAddsTotal.inc(),
      retried: () => metrics.queueRetriesTotal.inc(),
    },
  });
  const worker = { ...s.worker, apiEndpoints: () => s.apiEndpoints.current() };
  const reactions = new ReactionClock(clock, (step, seconds) => metrics.reaction.observe({ step }, seconds));
  const controlRuns = config.reconciliation.controlRuns
    ? new ControlRuns({ config, clock, log: log.child({ component: 'control-runs' }), kube, nodes, pods, progress: s.store, worker, observed: (result) => metrics.controlRunsTotal.inc({ result }) })
    : undefined;
  const verification = new VerificationController({
    config,
    clock,
    log: log.child({ controller: 'verification' }),
    kube,
    nodes,
    pods,
    store: s.store,
    events: s.events,
    metrics,
    slots,
    worker,
    enqueue: (name) => queue.add(name),
    clusterWide: s.clusterWide,
    ...(controlRuns ? { controlRuns } : {}),
    ...(config.reconciliation.clusterDnsService
      ? { clusterDns: new ClusterDnsEndpoints({ kube, clock, log: log.child({ component: 'cluster-dns' }), service: config.reconciliation.clusterDnsService }) }
      : {}),
    ...(s.podRefused ? { podRefused: s.podRefused } : {}),
    ...(s.gates ? { gates: s.gates } : {}),
    reactions,
  });
  // A gate's input changed: the node it concerns (a DaemonSet pod's, a CSINode's), or every node not
  // yet open (a required DaemonSet appeared, went, or changed where it runs).
  s.gates?.on({
    wake: (name) => {
      const node = nodes.get(name);
      if (node && !isVerified(node, config)) queue.add(name);
    },
    wakeAll: () => {
      for (const node of nodes.list()) if (hasVerificationTaint(node, config) && !isVerified(node, config)) queue.add(nodeName(node));
    },
  });

  /** A node that can take its worker now starts the launch reaction's clock (kube_node_ready_reaction_seconds). */
  const launchable = (node: V1Node): void => {
    if (hasVerificationTaint(node, config) && !isVerified(node, config) && launchBlockers(node, config).length === 0) reactions.start('launch', nodeName(node));
  };
  const fingerprints = new Map<string, string>();
  const profiles = new Profiles(config);
  nodes.on({
    add: (node) => {
      fingerprints.set(nodeName(node), nodeFingerprint(node, profiles.of(node)));
      launchable(node);
      queue.add(nodeName(node));
    },
    update: (node) => {
      const print = nodeFingerprint(node, profiles.of(node));
      if (fingerprints.get(nodeName(node)) === print) return;
      fingerprints.set(nodeName(node), print);
      launchable(node);
      queue.add(nodeName(node));
    },
    delete: (node) => {
      fingerprints.delete(nodeName(node));
      reactions.forget(nodeName(node));
      queue.add(nodeName(node));
    },
  });
  const podEvent = (pod: V1Pod, priority?: QueuePriority): void => {
    const node = workerNodeName(pod);
    if (node) queue.add(node, priority);
  };
  const podFreed = (pod: V1Pod, priority?: QueuePriority): void => {
    podEvent(pod, priority);
    verification.slotFreed();
  };
  // A worker that has finished goes to the front of the queue: in a burst its node opens (or its
  // failure is recorded) before the queue works through the launches and pod progress of the others.
  // It starts the open reaction's clock (observed if it passed and the node opens).
  const workerFinished = (pod: V1Pod): void => {
    const node = workerNodeName(pod);
    if (node) reactions.start('open', node);
    podFreed(pod, 'high');
  };
  // A NodeVerification deleted (`kube-node-ready verify`, or by hand): its node is decided again now,
  // not at the next resync. Its other changes are our own writes, or the agent's. One whose Node is
  // gone (or was re-created: another UID) is the garbage collector following the Node's deletion,
  // which the node watch has already reported: nothing to decide, so no reconcile for each of a
  // scale-down's NodeVerifications.
  s.verifications?.on({
    delete: (nv) => {
      const node = nodes.get(nv.spec?.nodeName ?? nv.metadata?.name ?? '');
      if (node && nodeUid(node) === nv.spec?.nodeUID) queue.add(nodeName(node));
    },
  });
  pods.on({
    add: (pod) => podEvent(pod),
    update: (pod) => (pod.metadata?.deletionTimestamp ? podFreed(pod) : isPodTerminal(pod) ? workerFinished(pod) : podEvent(pod)),
    delete: (pod) => podFreed(pod),
  });

  return {
    name: 'verification',
    queue,
    reconciler: verification,
    workers: config.reconciliation.workers,
    observer: { reconciled: (result, seconds) => metrics.reconcileDuration.observe({ result }, seconds), failed: () => metrics.reconcileErrorsTotal.inc() },
    resync: () => {
      for (const node of nodes.list()) if (hasWork(node, config, pods, s.store)) queue.add(nodeName(node));
    },
    startLeading: async () => {
      const namespace = config.worker.namespace;
      const [, written] = await Promise.all([
        // The previous leader's last records, which this replica's informer may not have yet.
        s.store.catchUp().then((read) => log.debug({ nodeVerifications: read }, 'read the NodeVerifications live before the first reconcile')),
        kube.applyConfigMap(namespace, config.worker.configMapName, s.worker.configs.data(), {
          [PodLabel.Name]: PodLabelValue.Name,
          [PodLabel.ManagedBy]: PodLabelValue.ManagedBy,
        }),
        s.apiEndpoints.start(),
      ]);
      log.info({ configMap: `${namespace}/${config.worker.configMapName}`, result: written }, 'worker configuration in place; starting to reconcile');
      // Control pods a previous leader left (it judged them, or never will).
      await controlRuns?.sweep();
      // What the last leader knew of which nodes pass and which fail what, from the NodeVerifications.
      const restored = s.clusterWide.restore(nodeHistory(nodes.list(), s.store));
      if (restored.passes + restored.failing > 0) log.info(restored, 'cluster-wide rule: recent passes and failing nodes taken over from the NodeVerifications');
      // Nodes already waiting for a verification line up in order of arrival before the first
      // reconcile: the cache lists them by name, and the first reconciles would otherwise take the
      // free slots in that order. Each leaves the line when its reconcile finds it needs no slot.
      const inFlight = slots.active();
      for (const node of nodes.list()) {
        const name = nodeName(node);
        if (hasVerificationTaint(node, config) && !isVerified(node, config) && !inFlight.has(name)) slots.wait(name, toMillis(node.metadata?.creationTimestamp) ?? 0);
      }
      for (const node of nodes.list()) queue.add(nodeName(node));
    },
    stopLeading: () => s.apiEndpoints.stop(),
  };
}

/**
 * Nodes the safety-net resync re-queues: those with verification work left (a worker pod still
 * around, a verification taint on a node that is not verified, an attempt in flight or a backoff).
 * A verified node's changes arrive as watch events; re-queuing every verified node each resync would
 * cost one reconcile per node per interval for nothing.
 */
function hasWork(node: V1Node, config: ControllerConfig, pods: Pick<SelfHealingInformer<V1Pod>, 'byIndex'>, progress: ProgressStore): boolean {
  if (pods.byIndex(nodeName(node)).length > 0) return true;
  if (isVerified(node, config)) return false;
  if (hasVerificationTaint(node, config)) return true;
  const read = progress.read(node);
  return read.kind === 'ok' && (read.state.phase === Phase.Verifying || read.state.phase === Phase.Backoff);
}

import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { Annotation, PodAnnotation, PodLabelValue, PodLabel } from './api/well-known.js';
import { withDeadline, type Clock, type Timer } from './clock.js';
import type { ControllerConfig } from './config/schema.js';
import { RemediationController } from './controllers/node/remediation/controller.js';
import { ApiEndpoints } from './controllers/node/verification/api-endpoints.js';
import { KubeRemediationEvents } from './controllers/node/remediation/events.js';
import { Remediator } from './controllers/node/remediation/remediator.js';
import { ClusterWideFailures, nodeHistory } from './controllers/node/verification/cluster-wide.js';
import { ClusterDnsEndpoints } from './controllers/node/verification/dns-endpoints.js';
import { ControlRuns } from './controllers/node/verification/control.js';
import { nodeFingerprint, VerificationController } from './controllers/node/verification/controller.js';
import { hasVerificationTaint, isVerified } from './controllers/node/verification/decide.js';
import { configHash, WORKER_POD_SELECTOR, workerConfigDocument, workerImage } from './controllers/node/verification/pod-spec.js';
import { VerificationSlots } from './controllers/node/verification/slots.js';
import { AnnotationProgressStore, MemoryProgressStore } from './controllers/node/verification/store.js';
import { Phase } from './controllers/node/verification/types.js';
import { runWorkers } from './controllers/runner.js';
import { KubeEventRecorder, type EventSink } from './events/recorder.js';
import { buildServer, parseBindAddress, type Probe } from './http/server.js';
import type { KubeClient } from './kube/client.js';
import { SelfHealingInformer, slimNode, stripObject } from './kube/informer.js';
import { annotation, isPodTerminal, toMillis } from './kube/objects.js';
import { LeaderElector, type RunResult } from './leader/elector.js';
import { KubeLeaseClient } from './leader/lease-client.js';
import { ControllerMetrics } from './metrics/metrics.js';
import type { WorkerPodStatus } from './metrics/names.js';
import { WorkQueue } from './queue/workqueue.js';

/**
 * The composition root: builds every part with constructor injection and switches the optional
 * ones (leader election, dry run) on or off here and nowhere else. main.ts only parses the
 * command line, makes the logger and the API client, and calls startController().
 */
export interface ControllerOptions {
  config: ControllerConfig;
  kube: KubeClient;
  clock: Clock;
  log: Logger;
  registry: Registry;
  /** hostname_uuid (client-go convention). */
  identity: string;
  /** This pod's namespace (POD_NAMESPACE), for the Lease when leaderElection.namespace is empty. */
  podNamespace?: string;
  version: string;
  commit: string;
}

export interface RunningController {
  /** Resolves when the controller ends: 'stopped' after stop(), 'lost' when leadership was lost. */
  readonly finished: Promise<RunResult>;
  /** Graceful stop: drain the queue, release the lease, stop watches and servers. */
  stop(): Promise<void>;
  /** Where the HTTP servers listen (resolved ports). */
  readonly addresses: string[];
  isLeader(): boolean;
  readonly metrics: ControllerMetrics;
}

/** Interval of the housekeeping tick (health gauge, active-verification gauge). */
const TICK_MS = 5_000;

export async function startController(opts: ControllerOptions): Promise<RunningController> {
  const { config, kube, clock, log, registry } = opts;
  const workerNamespace = config.worker.namespace;

  // 1. Caches: all nodes, and our worker pods.
  const clusterWide = new ClusterWideFailures(clock);
  const metrics = new ControllerMetrics(registry, {
    version: opts.version,
    commit: opts.commit,
    // Called at scrape time only, after `pods` below exists.
    workerPods: () => countWorkerPods(pods.list()),
    clusterWideFailures: () => clusterWide.maxNodesByCheck(),
    clusterWideFaults: () => clusterWide.activeFaults(),
  });
  kube.observe({
    request: (operation, ok) => metrics.apiRequestsTotal.inc({ operation, result: ok ? 'success' : 'error' }),
    throttled: (seconds) => metrics.apiThrottledSeconds.inc(seconds),
  });
  const nodeInformer = new SelfHealingInformer<V1Node>({
    resource: 'nodes',
    path: '/api/v1/nodes',
    list: () => kube.listNodePages(config.nodeManagement.nodeSelector),
    ...(config.nodeManagement.nodeSelector ? { labelSelector: config.nodeManagement.nodeSelector } : {}),
    kubeConfig: kube.kubeConfig,
    transform: (node) => slimNode(node, config.nodeManagement.condition.type),
    clock,
    log: log.child({ component: 'informer' }),
    onRestart: () => metrics.watchRestartsTotal.inc({ resource: 'nodes' }),
    onList: () => metrics.watchListsTotal.inc({ resource: 'nodes' }),
  });
  const pods = new SelfHealingInformer<V1Pod>({
    resource: 'pods',
    path: `/api/v1/namespaces/${workerNamespace}/pods`,
    list: () => kube.listPodPages(workerNamespace, WORKER_POD_SELECTOR),
    labelSelector: WORKER_POD_SELECTOR,
    kubeConfig: kube.kubeConfig,
    transform: stripObject,
    clock,
    log: log.child({ component: 'informer' }),
    onRestart: () => metrics.watchRestartsTotal.inc({ resource: 'pods' }),
    onList: () => metrics.watchListsTotal.inc({ resource: 'pods' }),
  });

  // 2. The queue and the verification controller.
  const queue = new WorkQueue<string>({
    clock,
    observer: {
      depth: (n) => metrics.queueDepth.set(n),
      added: () => metrics.queueAddsTotal.inc(),
      retried: () => metrics.queueRetriesTotal.inc(),
    },
  });
  const workerConfig = workerConfigDocument(config.worker);
  const slots = new VerificationSlots(() => pods.list(), clock);
  const eventSink: EventSink = { create: (ns, e) => kube.createEvent(ns, e), bump: (ns, name, count, at) => kube.bumpEvent(ns, name, count, at) };
  const events = new KubeEventRecorder({ sink: eventSink, clock, log, component: PodLabelValue.ManagedBy, instance: opts.identity });
  const store = config.dryRun ? new MemoryProgressStore() : new AnnotationProgressStore(kube, config);
  // The API server addresses for the worker pods, read by the leader (started in lead()).
  const apiEndpoints = new ApiEndpoints({ kube, clock, log: log.child({ component: 'api-endpoints' }) });
  const workerSpec = { image: workerImage(config.worker.image, opts.version), configHash: configHash(workerConfig), apiEndpoints: () => apiEndpoints.current() };
  const controlRuns = config.reconciliation.controlRuns
    ? new ControlRuns({
        config,
        clock,
        log: log.child({ component: 'control-runs' }),
        kube,
        nodes: nodeInformer,
        pods,
        worker: workerSpec,
        observed: (result) => metrics.controlRunsTotal.inc({ result }),
      })
    : undefined;
  const verification = new VerificationController({
    config,
    clock,
    log: log.child({ controller: 'verification' }),
    kube,
    nodes: nodeInformer,
    pods,
    store,
    events,
    metrics,
    slots,
    worker: workerSpec,
    enqueue: (name) => queue.add(name),
    clusterWide,
    ...(controlRuns ? { controlRuns } : {}),
    ...(config.reconciliation.clusterDnsService
      ? { clusterDns: new ClusterDnsEndpoints({ kube, clock, log: log.child({ component: 'cluster-dns' }), service: config.reconciliation.clusterDnsService }) }
      : {}),
    podRefused: (node) => remediator?.podRefused(node),
  });

  // 2b. Remediation of failed nodes (nodeManagement.deleteFailedNodes): a queue of its own, one worker.
  const remediator = config.nodeManagement.deleteFailedNodes
    ? new Remediator({
        kube,
        clock,
        log: log.child({ controller: 'remediation' }),
        events: new KubeRemediationEvents(events),
        metrics,
        config,
        remediation: config.nodeManagement.remediation,
        enabled: true,
        dryRun: config.dryRun,
        nodes: () => nodeInformer.list(),
        progress: store,
        slots,
      })
    : undefined;
  const remediationQueue = new WorkQueue<string>({ clock });
  /** Only the leader deletes; every replica observes, so a new leader starts with the breaker's history. */
  let leading = false;
  const remediate = (node: V1Node): void => {
    if (remediator?.observe(node)) remediationQueue.add(node.metadata?.name ?? '');
  };

  // 3. Watch events become queue keys. Node updates that change nothing we read (kubelet status
  //    heartbeats) are dropped here.
  const fingerprints = new Map<string, string>();
  nodeInformer.on({
    add: (node) => {
      const name = node.metadata?.name ?? '';
      fingerprints.set(name, nodeFingerprint(node, config));
      queue.add(name);
      remediate(node);
    },
    update: (node) => {
      const name = node.metadata?.name ?? '';
      remediate(node); // before the fingerprint: remediation also reads labels and annotations verification ignores
      const print = nodeFingerprint(node, config);
      if (fingerprints.get(name) === print) return;
      fingerprints.set(name, print);
      queue.add(name);
    },
    delete: (node) => {
      const name = node.metadata?.name ?? '';
      fingerprints.delete(name);
      queue.add(name);
      remediator?.forget(node);
    },
  });
  const podEvent = (pod: V1Pod): void => {
    const node = annotation(pod, PodAnnotation.NodeName);
    if (node) queue.add(node);
  };
  const podFreed = (pod: V1Pod): void => {
    podEvent(pod);
    verification.slotFreed();
  };
  pods.on({
    add: podEvent,
    update: (pod) => (isPodTerminal(pod) || pod.metadata?.deletionTimestamp ? podFreed(pod) : podEvent(pod)),
    delete: podFreed,
  });

  // 4. HTTP: metrics and probes. Ready once both caches synced (followers too).
  const readiness = (): Probe => firstFailing([nodeInformer.health(), pods.health()]);
  const liveness = (): Probe => (nodeInformer.hasSynced() && pods.hasSynced() ? readiness() : { ok: true });
  const servers: FastifyInstance[] = [];
  const addresses: string[] = [];
  const separateHealth = config.health.bindAddress !== '' && config.health.bindAddress !== config.metrics.bindAddress;
  servers.push(buildServer({ registry, liveness, readiness, serve: { metrics: true, health: !separateHealth } }));
  if (separateHealth) servers.push(buildServer({ registry, liveness, readiness, serve: { metrics: false, health: true } }));
  const binds = separateHealth ? [config.metrics.bindAddress, config.health.bindAddress] : [config.metrics.bindAddress];
  for (const [i, server] of servers.entries()) addresses.push(await server.listen(parseBindAddress(binds[i] as string)));
  log.info({ addresses }, 'serving /metrics, /healthz, /readyz');

  // 5. Fill the caches before anything acts on them.
  await Promise.all([nodeInformer.start(), pods.start()]);

  // 6. Housekeeping: gauges, and the safety-net resync of every node we care about.
  const timers: Timer[] = [];
  const tick = (): void => {
    metrics.controllerHealthy.set(readiness().ok ? 1 : 0);
    metrics.activeVerifications.set(slots.active().size);
    if (remediator && leading) void remediator.tick();
    timers[0] = clock.setTimer(TICK_MS, tick);
  };
  const resync = (): void => {
    const withWorkers = new Set(pods.list().map((p) => annotation(p, PodAnnotation.NodeName) ?? ''));
    for (const node of nodeInformer.list()) {
      if (hasWork(node, config, withWorkers)) queue.add(node.metadata?.name ?? '');
      remediate(node);
    }
    timers[1] = clock.setTimer(config.reconciliation.resyncInterval, resync);
  };
  tick();
  timers[1] = clock.setTimer(config.reconciliation.resyncInterval, resync);

  // 7. Lead (or, without leader election, just run): only the leader works the queue.
  let workers: Promise<void> | undefined;
  let remediationWorkers: Promise<void> | undefined;
  const lead = async (): Promise<void> => {
    metrics.leader.set(1);
    leading = true;
    remediator?.startedLeading();
    const [written] = await Promise.all([
      kube.applyConfigMap(workerNamespace, config.worker.configMapName, { 'worker.yaml': workerConfig }, {
        [PodLabel.Name]: PodLabelValue.Name,
        [PodLabel.ManagedBy]: PodLabelValue.ManagedBy,
      }),
      apiEndpoints.start(),
    ]);
    log.info({ configMap: `${workerNamespace}/${config.worker.configMapName}`, result: written }, 'worker configuration in place; starting to reconcile');
    // Control pods a previous leader left (it judged them, or never will).
    await controlRuns?.sweep();
    // What the last leader knew of which nodes pass and which fail what, from the Nodes' state.
    const restored = clusterWide.restore(nodeHistory(nodeInformer.list(), config));
    if (restored.passes + restored.failing > 0) log.info(restored, 'cluster-wide rule: recent passes and failing nodes taken over from the Nodes');
    // Nodes already waiting for a verification line up in order of arrival before the first
    // reconcile: the cache lists them by name, and the first reconciles would otherwise take the
    // free slots in that order. Each leaves the line when its reconcile finds it needs no slot.
    const inFlight = slots.active();
    for (const node of nodeInformer.list()) {
      const name = node.metadata?.name ?? '';
      if (hasVerificationTaint(node, config) && !isVerified(node, config) && !inFlight.has(name)) slots.wait(name, toMillis(node.metadata?.creationTimestamp) ?? 0);
    }
    for (const node of nodeInformer.list()) queue.add(node.metadata?.name ?? '');
    workers = runWorkers({
      queue,
      reconciler: verification,
      workers: config.reconciliation.workers,
      clock,
      log,
      observer: { reconciled: (result, seconds) => metrics.reconcileDuration.observe({ result }, seconds), failed: () => metrics.reconcileErrorsTotal.inc() },
    });
    if (remediator) {
      remediationWorkers = runWorkers({
        queue: remediationQueue,
        reconciler: new RemediationController(remediator, nodeInformer),
        workers: 1,
        clock,
        log: log.child({ controller: 'remediation' }),
      });
    }
  };

  const stopElection = new AbortController();
  let elector: LeaderElector | undefined;
  let finished: Promise<RunResult>;
  let leadFailure: ((err: unknown) => void) | undefined;
  const leadFailed = new Promise<RunResult>((_, reject) => (leadFailure = reject));
  const startLeading = (): void => {
    lead().catch((err: unknown) => {
      log.error({ err: errorMessage(err) }, 'could not start leading');
      leadFailure?.(err);
    });
  };

  /** Leadership was lost (not given up by stop()): nothing is drained, nothing more is written. */
  let lost = false;
  if (config.leaderElection.enabled) {
    // Only the leader writes: until this replica leads, and from the moment it stops leading, every
    // write the client would send is refused (KubeClient.fenceWrites).
    kube.fenceWrites(AbortSignal.abort());
    const leaseNamespace = config.leaderElection.namespace || opts.podNamespace || 'kube-system';
    elector = new LeaderElector({
      client: new KubeLeaseClient(kube.coordination, leaseNamespace, config.leaderElection.leaseName),
      identity: opts.identity,
      clock,
      log: log.child({ component: 'leader-election' }),
      leaseDurationMs: config.leaderElection.leaseDuration,
      renewDeadlineMs: config.leaderElection.renewDeadline,
      retryPeriodMs: config.leaderElection.retryPeriod,
      releaseOnCancel: true,
      onStartedLeading: (signal) => {
        kube.fenceWrites(signal);
        startLeading();
        // Leadership ended. Lost: the writes are fenced already; drop the queued work and let the
        // caller exit (client-go behaviour). Given up by stop(): the queues were drained before.
        signal.addEventListener(
          'abort',
          () => {
            lost = !stopElection.signal.aborted;
            leading = false;
            apiEndpoints.stop();
            queue.abandon();
            remediationQueue.abandon();
          },
          { once: true },
        );
      },
      onStoppedLeading: () => metrics.leader.set(0),
      onNewLeader: (leader) => log.info({ leader, self: leader === opts.identity }, 'leader observed'),
    });
    log.info({ identity: opts.identity, lease: `${leaseNamespace}/${config.leaderElection.leaseName}` }, 'waiting to lead');
    finished = Promise.race([elector.run(stopElection.signal), leadFailed]);
  } else {
    startLeading();
    finished = Promise.race([
      new Promise<RunResult>((resolve) => stopElection.signal.addEventListener('abort', () => resolve('stopped'), { once: true })),
      leadFailed,
    ]);
  }

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      log.info('stopping');
      if (lost) {
        // The reconciles still running can no longer write; give them a moment to notice, no more:
        // the process must be gone within renewDeadline of the loss.
        const ended = Promise.all([workers, remediationWorkers]).then(() => undefined);
        await withDeadline(clock, ended, config.leaderElection.renewDeadline, 'reconciles still running').catch((err: unknown) =>
          log.info({ err: errorMessage(err) }, 'stopping without waiting for the reconciles of the lost leadership'),
        );
      } else {
        // Finish the reconciles in progress before giving up the lease, so two leaders never act.
        const drained = Promise.all([queue.shutDownWithDrain(), remediationQueue.shutDownWithDrain()]).then(() => undefined);
        await withDeadline(clock, drained, 30_000, 'queue drain timed out').catch((err: unknown) =>
          log.warn({ err: errorMessage(err) }, 'stopping without waiting for the last reconciles'),
        );
        await workers;
        await remediationWorkers;
      }
      stopElection.abort();
      await finished.catch(() => undefined);
      for (const timer of timers) timer.cancel();
      apiEndpoints.stop();
      await Promise.all([nodeInformer.stop(), pods.stop()]);
      await Promise.all(servers.map((s) => s.close()));
      metrics.leader.set(0);
      log.info('stopped');
    })();
    return stopping;
  };

  return {
    finished,
    stop,
    addresses,
    isLeader: () => (elector ? elector.isLeader() : true),
    metrics,
  };
}

/**
 * Nodes the safety-net resync re-queues: those with verification work left (a worker pod still
 * around, a verification taint on a node that is not verified, an attempt in flight or a backoff).
 * A verified node's changes arrive as watch events; re-queuing every verified node each resync cost
 * one reconcile per node per interval for nothing (1000 per minute on a 1000-node cluster).
 */
function hasWork(node: V1Node, config: ControllerConfig, withWorkers: ReadonlySet<string>): boolean {
  if (withWorkers.has(node.metadata?.name ?? '')) return true;
  if (isVerified(node, config)) return false;
  if (hasVerificationTaint(node, config)) return true;
  const phase = annotation(node, Annotation.Phase);
  return phase === Phase.Verifying || phase === Phase.Backoff;
}

function countWorkerPods(pods: readonly V1Pod[]): Record<WorkerPodStatus, number> {
  const counts: Record<WorkerPodStatus, number> = { pending: 0, running: 0, succeeded: 0, failed: 0 };
  for (const pod of pods) {
    const phase = pod.status?.phase;
    if (phase === 'Running') counts.running++;
    else if (phase === 'Succeeded') counts.succeeded++;
    else if (phase === 'Failed') counts.failed++;
    else counts.pending++;
  }
  return counts;
}

function firstFailing(probes: Probe[]): Probe {
  return probes.find((p) => !p.ok) ?? { ok: true };
}


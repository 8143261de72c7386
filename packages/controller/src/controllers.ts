import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { NodeVerificationApi, type NodeVerification } from './api/nodeverification.js';
import { PodLabelValue } from './api/well-known.js';
import { withDeadline, type Clock, type Timer } from './clock.js';
import type { ControllerConfig } from './config/schema.js';
import { Manager } from './controllers/manager.js';
import { remediationController } from './controllers/node/remediation/controller.js';
import { KubeRemediationEvents } from './controllers/node/remediation/events.js';
import { RemediationExecutor } from './controllers/node/remediation/executor.js';
import { ConfigMapLedger, ledgerLocation } from './controllers/node/remediation/ledger.js';
import { Remediator } from './controllers/node/remediation/remediator.js';
import { ApiEndpoints } from './controllers/node/verification/api-endpoints.js';
import { ClusterWideFailures } from './controllers/node/verification/cluster-wide.js';
import { WORKER_POD_SELECTOR, workerImage, workerNodeName } from './controllers/node/verification/pod-spec.js';
import { WorkerConfigMap } from './controllers/node/verification/worker-config.js';
import { Profiles } from './config/profiles.js';
import { checkWorkerPrerequisites } from './controllers/node/verification/prerequisites.js';
import { verificationController } from './controllers/node/verification/register.js';
import { gatedResources, hasGates } from './controllers/node/verification/gates/config.js';
import { GateSources } from './controllers/node/verification/gates/sources.js';
import { slimNode } from './controllers/node/verification/slim-node.js';
import { VerificationSlots } from './controllers/node/verification/slots.js';
import { MemoryProgressStore, NodeVerificationStore } from './controllers/node/verification/store.js';
import { KubeEventRecorder, type EventSink } from './events/recorder.js';
import { buildServer, parseBindAddress, type Probe } from './http/server.js';
import type { KubeClient } from './kube/client.js';
import { WriteFencedError } from './kube/fence.js';
import { HeapCompactor } from './kube/heap.js';
import { SelfHealingInformer, stripObject } from './kube/informer.js';
import { LeaderElector, type RunResult } from './leader/elector.js';
import { KubeLeaseClient } from './leader/lease-client.js';
import { ControllerMetrics } from './metrics/metrics.js';
import type { WorkerPodStatus } from './metrics/names.js';

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

/** Interval of the housekeeping tick (health gauge, active-verification gauge, the controllers' ticks). */
const TICK_MS = 5_000;
/** How long stop() waits for the start of leadership and the reconciles in progress before it gives up the Lease. */
const STOP_DRAIN_MS = 25_000;

export async function startController(opts: ControllerOptions): Promise<RunningController> {
  const { config, kube, clock, log, registry } = opts;
  const workerNamespace = config.worker.namespace;

  // 1. Caches: all nodes, our worker pods, the NodeVerifications.
  const clusterWide = new ClusterWideFailures(clock);
  const profiles = new Profiles(config);
  const metrics = new ControllerMetrics(registry, {
    version: opts.version,
    commit: opts.commit,
    profiles: profiles.names(),
    // Called at scrape time only, after `pods` below exists.
    workerPods: () => countWorkerPods(pods.list()),
    clusterWideFailures: () => clusterWide.maxNodesByCheck(),
    clusterWideFaults: () => clusterWide.activeFaults(),
  });
  kube.observe({
    request: (operation, ok) => metrics.apiRequestsTotal.inc({ operation, result: ok ? 'success' : 'error' }),
    throttled: (seconds) => metrics.apiThrottledSeconds.inc(seconds),
  });
  // After the lists, the heap they grew is given back (with --expose-gc, as the chart runs it).
  const heap = new HeapCompactor({ clock, log: log.child({ component: 'heap' }), gc: globalThis.gc });
  const listHooks = (resource: string) => ({
    onList: () => {
      metrics.watchListsTotal.inc({ resource });
      heap.started(resource);
    },
    onListed: () => heap.listed(resource),
  });
  // The readiness gates' resources are all a cached node keeps of its allocatable.
  const resources = gatedResources(profiles.all().map((p) => p.config));
  const nodeInformer = new SelfHealingInformer<V1Node>({
    resource: 'nodes',
    path: '/api/v1/nodes',
    list: () => kube.listNodePages(config.nodeManagement.nodeSelector),
    ...(config.nodeManagement.nodeSelector ? { labelSelector: config.nodeManagement.nodeSelector } : {}),
    kubeConfig: kube.kubeConfig,
    transform: (node) => slimNode(node, config.nodeManagement.condition.type, resources),
    clock,
    log: log.child({ component: 'informer' }),
    onRestart: () => metrics.watchRestartsTotal.inc({ resource: 'nodes' }),
    ...listHooks('nodes'),
  });
  const pods = new SelfHealingInformer<V1Pod>({
    resource: 'pods',
    path: `/api/v1/namespaces/${workerNamespace}/pods`,
    list: () => kube.listPodPages(workerNamespace, WORKER_POD_SELECTOR),
    labelSelector: WORKER_POD_SELECTOR,
    kubeConfig: kube.kubeConfig,
    transform: stripObject,
    indexBy: workerNodeName,
    clock,
    log: log.child({ component: 'informer' }),
    onRestart: () => metrics.watchRestartsTotal.inc({ resource: 'pods' }),
    ...listHooks('pods'),
  });
  // What the worker pods need and the controller does not create, reported in one line before
  // anything stops on it (the CRD check below) and before the first pod is refused. Not required:
  // the objects may appear a moment later (prerequisites.ts).
  await checkWorkerPrerequisites(kube, config, log);
  // Verification progress (none in dry run, which writes nothing and keeps progress in memory).
  if (!config.dryRun) await kube.requireNodeVerifications();
  const verifications = config.dryRun
    ? undefined
    : new SelfHealingInformer<NodeVerification>({
        resource: 'nodeverifications',
        path: NodeVerificationApi.path,
        list: () => kube.listNodeVerificationPages(),
        kubeConfig: kube.kubeConfig,
        transform: stripObject,
        clock,
        log: log.child({ component: 'informer' }),
        onRestart: () => metrics.watchRestartsTotal.inc({ resource: 'nodeverifications' }),
        ...listHooks('nodeverifications'),
      });
  // The readiness gates' caches (config gates, top level or a profile's): only when one is configured.
  const gateConfigs = profiles.all().map((p) => p.config.gates);
  const gates = gateConfigs.some(hasGates)
    ? new GateSources({ kube, clock, log: log.child({ component: 'gates' }), gates: gateConfigs, hooks: (resource) => ({ onRestart: () => metrics.watchRestartsTotal.inc({ resource }), ...listHooks(resource) }) })
    : undefined;
  const informers = [nodeInformer, pods, ...(verifications ? [verifications] : []), ...(gates ? [gates] : [])];

  // 2. The controllers. Each registers its own watches, filters and queue; the manager runs their
  //    workers while this replica leads.
  const manager = new Manager({ clock, log, resyncIntervalMs: config.reconciliation.resyncInterval });
  const slots = new VerificationSlots(pods, clock);
  const eventSink: EventSink = { create: (ns, e) => kube.createEvent(ns, e), bump: (ns, name, count, at) => kube.bumpEvent(ns, name, count, at) };
  const events = new KubeEventRecorder({ sink: eventSink, clock, log, component: PodLabelValue.ManagedBy, instance: opts.identity });
  const store = verifications ? new NodeVerificationStore({ kube, config, clock, log, cache: verifications }) : new MemoryProgressStore();
  // The API server addresses for the worker pods, read by the leader (started when it leads).
  const apiEndpoints = new ApiEndpoints({ kube, clock, log: log.child({ component: 'api-endpoints' }) });
  // Remediation of failed nodes (nodeManagement.deleteFailedNodes, at the top level or in a profile): a queue of its own, one worker.
  const remediator = profiles.all().some((p) => p.config.nodeManagement.deleteFailedNodes)
    ? new Remediator({
        targets: new RemediationExecutor({ kube, clock }),
        ledger: new ConfigMapLedger({ kube, clock, ...ledgerLocation(config) }),
        clock,
        log: log.child({ controller: 'remediation' }),
        events: new KubeRemediationEvents(events),
        metrics,
        config,
        remediation: config.nodeManagement.remediation,
        dryRun: config.dryRun,
        nodes: () => nodeInformer.list(),
        progress: store,
        slots,
      })
    : undefined;
  manager.register(
    verificationController({
      config,
      clock,
      log,
      kube,
      metrics,
      nodes: nodeInformer,
      pods,
      slots,
      store,
      ...(verifications ? { verifications } : {}),
      events,
      clusterWide,
      ...(gates ? { gates } : {}),
      worker: { image: workerImage(config.worker.image, opts.version), configs: new WorkerConfigMap(profiles) },
      apiEndpoints,
      ...(remediator ? { podRefused: (node: V1Node) => remediator.podRefused(node) } : {}),
    }),
  );
  if (remediator) manager.register(remediationController(remediator, nodeInformer, clock));

  // 3. HTTP: metrics and probes. Ready once both caches synced (followers too).
  const readiness = (): Probe => firstFailing(informers.map((i) => i.health()));
  const liveness = (): Probe => (informers.every((i) => i.hasSynced()) ? readiness() : { ok: true });
  const servers: FastifyInstance[] = [];
  const addresses: string[] = [];
  const separateHealth = config.health.bindAddress !== '' && config.health.bindAddress !== config.metrics.bindAddress;
  servers.push(buildServer({ registry, liveness, readiness, serve: { metrics: true, health: !separateHealth } }));
  if (separateHealth) servers.push(buildServer({ registry, liveness, readiness, serve: { metrics: false, health: true } }));
  const binds = separateHealth ? [config.metrics.bindAddress, config.health.bindAddress] : [config.metrics.bindAddress];
  for (const [i, server] of servers.entries()) addresses.push(await server.listen(parseBindAddress(binds[i] as string)));
  log.info({ addresses }, 'serving /metrics, /healthz, /readyz');

  // 4. Fill the caches before anything acts on them.
  await Promise.all(informers.map((i) => i.start()));

  // 5. Housekeeping: gauges, the controllers' ticks, and the safety-net resync.
  let tickTimer: Timer | undefined;
  const tick = (): void => {
    metrics.controllerHealthy.set(readiness().ok ? 1 : 0);
    metrics.activeVerifications.set(slots.activeCount());
    manager.tick();
    tickTimer = clock.setTimer(TICK_MS, tick);
  };
  tick();
  manager.start();

  // 6. Lead (or, without leader election, just run): only the leader works the queues.
  const lead = async (): Promise<void> => {
    metrics.leader.set(1);
    await manager.lead();
  };

  const stopElection = new AbortController();
  let elector: LeaderElector | undefined;
  let finished: Promise<RunResult>;
  let leadFailure: ((err: unknown) => void) | undefined;
  const leadFailed = new Promise<RunResult>((_, reject) => (leadFailure = reject));
  /** The start of the current leadership (each controller's startLeading), until it has run. */
  let leading: Promise<void> = Promise.resolve();
  const startLeading = (leadership?: AbortSignal): void => {
    leading = lead().catch((err: unknown) => {
      // Leadership ended (lost, or given up by stop()) while it was starting: its writes were
      // refused, which is the fence doing its job, not a failure to start.
      if (err instanceof WriteFencedError && leadership?.aborted) {
        log.info({ err: errorMessage(err) }, 'leadership ended while starting to lead');
        return;
      }
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
        startLeading(signal);
        // Leadership ended. Lost: the writes are fenced already; drop the queued work and let the
        // caller exit (client-go behaviour). Given up by stop(): the queues were drained before.
        signal.addEventListener(
          'abort',
          () => {
            lost = !stopElection.signal.aborted;
            manager.abandon();
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
        await withDeadline(clock, manager.finished(), config.leaderElection.renewDeadline, 'reconciles still running').catch((err: unknown) =>
          log.info({ err: errorMessage(err) }, 'stopping without waiting for the reconciles of the lost leadership'),
        );
      } else {
        // Finish the start of leadership and the reconciles in progress before giving up the lease,
        // so two leaders never act.
        // One budget for both, within the Deployment's 30 s grace period.
        const deadline = clock.now() + STOP_DRAIN_MS;
        await withDeadline(clock, leading, STOP_DRAIN_MS, 'start of leadership still running').catch((err: unknown) =>
          log.warn({ err: errorMessage(err) }, 'stopping before the start of leadership finished'),
        );
        await manager.drain(Math.max(0, deadline - clock.now()));
      }
      stopElection.abort();
      await finished.catch(() => undefined);
      tickTimer?.cancel();
      manager.stop();
      manager.abandon();
      await Promise.all(informers.map((i) => i.stop()));
      heap.stop();
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


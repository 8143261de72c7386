// The fault scenarios. Each runs while the burst of nodes is being created and resolves when its
// fault is over (docs/reliability.md).
import { CNI_AGENT_TAINT, k8s, sandboxControl, statusCode } from '@kube-node-ready/sandbox';
import { NAMESPACE } from './cluster.js';
import { WORKER_SELECTOR } from '../../bench/src/observer.js';
import { isLive, workerNode } from './monitor.js';
import { allOf, FOREIGN, neverRemediatedWhileQueued, opensAtFirstAttempt, waitsAreExplained, waitUntil, type Ctx, type Scenario } from './run.js';

const livePods = async (ctx: Ctx): Promise<k8s.V1Pod[]> =>
  (await ctx.cluster.core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: WORKER_SELECTOR })).items.filter(isLive);

/** The sandbox's kube-dns EndpointSlice: not ready, the Service's ClusterIP answers nothing (a Service without endpoints). */
async function setDnsEndpointsReady(ctx: Ctx, ready: boolean): Promise<void> {
  const api = ctx.cluster.kc.makeApiClient(k8s.DiscoveryV1Api);
  const slice = await api.readNamespacedEndpointSlice({ namespace: 'kube-system', name: 'kube-dns-sandbox' });
  slice.endpoints = (slice.endpoints ?? []).map((e) => ({ ...e, conditions: { ...e.conditions, ready } }));
  await api.replaceNamespacedEndpointSlice({ namespace: 'kube-system', name: 'kube-dns-sandbox', body: slice });
}

/** kube_node_ready_cluster_wide_fault{check="dns"}, the most over the running replicas (only the leader sets it); undefined when none answers. */
async function dnsFault(ctx: Ctx): Promise<number | undefined> {
  let most: number | undefined;
  for (const proc of ctx.cluster.replicas) {
    if (!proc || proc.exited) continue;
    try {
      const text = await (await fetch(`http://127.0.0.1:${proc.metricsPort}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
      const value = /^kube_node_ready_cluster_wide_fault\{check="dns"\} (\d+)/m.exec(text)?.[1];
      if (value !== undefined) most = Math.max(most ?? 0, Number(value));
    } catch {
      // A replica restarting: the other one answers.
    }
  }
  return most;
}

/**
 * The queue scenario's line. stuckNodeTimeout is well above the time the sandbox's kubelet, on a
 * loaded machine, may leave a node unreported or Unknown (such a node is rightly taken for stuck,
 * which the suite would count as a wrong deletion of a healthy node), and well below the line's
 * least wait (queueWaitFloorMs()).
 */
export const QUEUE = { nodes: { full: 150, quick: 60 }, slots: { full: 3, quick: 2 }, holdMs: 6_000, perSecond: 3, stuckNodeTimeoutMs: 120_000 } as const;

/**
 * The least the last node served waits for its worker, whatever the machine's speed: `slots` slots,
 * each held at least `holdMs` by a worker, serve the `nodes`-th node no sooner than
 * (ceil(nodes / slots) - 1) * holdMs after the first, and the last node is created
 * (nodes - 1) / perSecond seconds after the first.
 */
export function queueWaitFloorMs(nodes: number, slots: number, holdMs: number, perSecond: number): number {
  return (Math.ceil(nodes / slots) - 1) * holdMs - ((nodes - 1) * 1000) / perSecond;
}

/** What the dns-outage scenario saw of the cluster-wide signal (reset by each run of it; scenarios run one at a time). */
let dnsSignal: { raised: boolean; cleared: boolean; down?: number; up?: number } = { raised: false, cleared: false };

export const SCENARIOS: Scenario[] = [
  {
    name: 'baseline',
    what: 'no fault (control run)',
    fault: async (ctx) => ctx.burstCreated,
  },
  {
    name: 'leader-kill',
    what: 'the leader SIGKILLed at random moments, 10 times (quick: 3), restarted at once',
    fault: async (ctx) => {
      const times = ctx.quick ? 3 : 10;
      for (let i = 0; i < times; i++) {
        await ctx.sleep(ctx.random.between(500, 4000));
        // A leader to kill: after the previous kill the survivor takes over within the lease duration.
        await waitUntil(async () => (await ctx.cluster.leader()) !== undefined, 30_000, 'a new leader');
        const leader = (await ctx.cluster.leader())!;
        ctx.log(`kill ${i + 1}/${times}: SIGKILL replica ${leader}`);
        await ctx.cluster.kill(leader);
        await ctx.cluster.startReplica(leader);
        await ctx.cluster.reviveExited();
      }
      await ctx.burstCreated;
    },
  },
  {
    name: 'lease-partition',
    what: 'every Lease request fails for 8 s, 3 times (quick: 1), every other call works: the leader loses its Lease, writes nothing more and exits (restarted); a replica leads again once the Lease answers',
    fault: async (ctx) => {
      const times = ctx.quick ? 1 : 3;
      for (let i = 0; i < times; i++) {
        await ctx.sleep(ctx.random.between(1000, 4000));
        await waitUntil(async () => (await ctx.cluster.leader()) !== undefined, 30_000, 'a leader');
        const leader = (await ctx.cluster.leader())!;
        ctx.log(`partition ${i + 1}/${times}: Lease requests fail for 8 s (leader: replica ${leader})`);
        const started = Date.now();
        ctx.cluster.proxy.set({ failResources: ['leases.coordination.k8s.io'] });
        // renewDeadline is 4 s: the leader gives up and exits (code 1) within the partition.
        await waitUntil(async () => ctx.cluster.replicas[leader]?.exited === true, 20_000, `replica ${leader} to exit after losing its Lease`);
        ctx.log(`replica ${leader} exited ${((Date.now() - started) / 1000).toFixed(1)} s after the partition began`);
        await ctx.sleep(Math.max(0, started + 8_000 - Date.now()));
        ctx.cluster.proxy.set({});
        await ctx.cluster.reviveExited();
      }
      await ctx.burstCreated;
    },
  },
  {
    name: 'both-restart',
    what: 'both replicas SIGKILLed at once, restarted 2 s later',
    fault: async (ctx) => {
      await ctx.sleep(3000);
      await Promise.all([ctx.cluster.kill(0), ctx.cluster.kill(1)]);
      await ctx.sleep(2000);
      await Promise.all([ctx.cluster.startReplica(0), ctx.cluster.startReplica(1)]);
      await ctx.burstCreated;
    },
  },
  {
    name: 'apiserver-restart',
    what: 'kube-apiserver restarted mid-burst',
    fault: async (ctx) => {
      await ctx.sleep(3000);
      await sandboxControl(ctx.cluster.env.dir, 'POST', '/restart/kube-apiserver');
      await ctx.burstCreated;
    },
  },
  {
    name: 'etcd-compaction',
    what: 'etcd compacted, then kube-apiserver restarted (its watch cache starts empty): watches resume from a compacted resourceVersion and get 410 Gone',
    fault: async (ctx) => {
      const lists = () => Object.entries(ctx.cluster.proxy.requestsByKind()).filter(([k]) => /^list (nodes|pods)$/.test(k)).reduce((a, [, n]) => a + n, 0);
      await ctx.sleep(3000);
      const before = lists();
      await sandboxControl(ctx.cluster.env.dir, 'POST', '/compact');
      await sandboxControl(ctx.cluster.env.dir, 'POST', '/restart/kube-apiserver');
      await ctx.burstCreated;
      await ctx.sleep(3000);
      const relists = lists() - before;
      // The restarted apiserver's watch cache starts at the current revision: a watch resumed from
      // any earlier resourceVersion of the burst gets 410 Gone.
      ctx.premise({ what: "the controllers' watches had to list again (410 Gone or a failed watch)", met: relists > 0, measured: `${relists} lists of nodes and pods` });
    },
  },
  {
    name: 'watch-stall',
    what: "the controller's open watch connections go silent (no data, no close); new connections work",
    fault: async (ctx) => {
      await ctx.sleep(2000);
      const before = ctx.cluster.proxy.stats().stalled;
      ctx.cluster.proxy.set({ stallWatches: true });
      ctx.cluster.proxy.set({});
      // Both replicas watch from their start, long before these 2 s are over.
      const stalled = ctx.cluster.proxy.stats().stalled - before;
      ctx.premise({ what: 'open watch connections went silent', met: stalled > 0, measured: `${stalled} watch streams stalled` });
      await ctx.burstCreated;
    },
  },
  {
    name: 'api-faults',
    what: 'API slow and failing for 30 s (quick: 15 s): +150 ms latency, 5 % resets, 5 % 429, 5 % 500',
    fault: async (ctx) => {
      const count = () => {
        const s = ctx.cluster.proxy.stats();
        return { requests: s.requests, disturbed: s.resets + s.throttled + s.errors };
      };
      const before = count();
      ctx.cluster.proxy.set({ latencyMs: 150, resetRate: 0.05, throttleRate: 0.05, errorRate: 0.05 });
      await ctx.sleep(ctx.quick ? 15_000 : 30_000);
      await ctx.burstCreated;
      ctx.cluster.proxy.set({});
      const after = count();
      const disturbed = after.disturbed - before.disturbed;
      ctx.premise({ what: "controller requests were reset or refused", met: disturbed > 0, measured: `${disturbed} of ${after.requests - before.requests} requests` });
    },
  },
  {
    name: 'concurrent-writer',
    what: 'another writer keeps changing labels, annotations and taints of the same nodes for 30 s (quick: 15 s)',
    fault: async (ctx) => {
      const until = Date.now() + (ctx.quick ? 15_000 : 30_000);
      let gen = 0;
      let written = 0;
      const writer = async () => {
        while (Date.now() < until) {
          const nodes = [...ctx.monitor.nodes.values()].filter((n) => n.deleted === undefined);
          if (nodes.length === 0) {
            await ctx.sleep(200);
            continue;
          }
          const name = ctx.random.pick(nodes).name;
          const value = `gen-${++gen}`;
          await writeForeign(ctx, name, value).then((ok) => (written += ok ? 1 : 0)).catch((err: unknown) => {
            if (statusCode(err) !== 404) ctx.log(`writer: ${String(err)}`);
          });
        }
      };
      await Promise.all([writer(), writer(), writer()]);
      ctx.premise({ what: "another writer changed the run's nodes", met: written > 0, measured: `${written} foreign writes (read, change, update with resourceVersion)` });
      await ctx.burstCreated;
    },
  },
  {
    name: 'node-recreate',
    what: 'nodes deleted and created again under the same name while their worker is live (the new ones alternately with dead DNS and healthy)',
    startDelay: '3s',
    fault: async (ctx) => {
      const count = ctx.quick ? 2 : 6;
      const done = new Set<string>();
      const deadline = Date.now() + 60_000;
      while (done.size < count && Date.now() < deadline) {
        // A healthy node whose worker pod is live right now (containers start 3 s after scheduling).
        const candidates = (await livePods(ctx))
          .map(workerNode)
          .filter((n): n is string => !!n && !done.has(n) && ctx.monitor.nodeByName(n)?.faults.length === 0);
        if (candidates.length === 0) {
          await ctx.sleep(200);
          continue;
        }
        const name = ctx.random.pick(candidates);
        done.add(name);
        // Half come back broken: the old node's passing worker must not open them.
        const faults = done.size % 2 === 1 ? (['dns'] as const) : ([] as const);
        ctx.log(`recreate ${name} (${faults.length ? 'broken DNS' : 'healthy'})`);
        await ctx.deleteNode(name);
        await ctx.createNode({ name, faults: [...faults] });
      }
      // Every worker is live at least startDelay (3 s) and the burst's 36 nodes (12 quick) come within 6 s.
      ctx.premise({ what: `${count} nodes re-created while their worker was live`, met: done.size >= count, measured: `${done.size} of ${count}` });
      await ctx.burstCreated;
    },
  },
  {
    name: 'worker-pods',
    what: 'worker pods deleted, evicted through the API, or marked Evicted by "the kubelet" (at most once per node)',
    startDelay: '2s',
    fault: async (ctx) => {
      const until = Date.now() + (ctx.quick ? 15_000 : 30_000);
      const hit = new Set<string>();
      const done: Record<string, number> = { delete: 0, evict: 0, 'kubelet-evict': 0 };
      let i = 0;
      while (Date.now() < until) {
        await ctx.sleep(ctx.random.between(300, 1200));
        const pods = (await livePods(ctx)).filter((p) => !hit.has(workerNode(p) ?? ''));
        if (pods.length === 0) continue;
        const pod = ctx.random.pick(pods);
        const name = pod.metadata!.name!;
        hit.add(workerNode(pod) ?? '');
        const how = ['delete', 'evict', 'kubelet-evict'][i++ % 3]!;
        ctx.log(`${how} ${name}`);
        try {
          if (how === 'delete') await ctx.cluster.core.deleteNamespacedPod({ name, namespace: NAMESPACE });
          else if (how === 'evict') await ctx.cluster.core.createNamespacedPodEviction({ name, namespace: NAMESPACE, body: { metadata: { name, namespace: NAMESPACE } } });
          else {
            await ctx.cluster.core.patchNamespacedPodStatus({
              name,
              namespace: NAMESPACE,
              body: [
                { op: 'replace', path: '/status/phase', value: 'Failed' },
                { op: 'add', path: '/status/reason', value: 'Evicted' },
                { op: 'add', path: '/status/message', value: 'The node was low on resource: memory (chaos).' },
              ],
            });
          }
          done[how]!++;
        } catch (err) {
          if (statusCode(err) !== 404 && statusCode(err) !== 422) ctx.log(`${how} ${name}: ${String(err)}`);
        }
      }
      // Every worker is live at least startDelay (2 s); a pod is picked every 0.3-1.2 s.
      ctx.premise({
        what: 'live worker pods were deleted, evicted and marked Evicted',
        met: Object.values(done).every((n) => n > 0),
        measured: Object.entries(done).map(([how, n]) => `${n} ${how}`).join(', '),
      });
      await ctx.burstCreated;
    },
  },
  {
    name: 'dns-outage',
    what: 'the cluster DNS Service has no ready endpoint for 2 min (quick: 40 s) while the burst joins (CoreDNS down, or pending at a cold start): attempts are inconclusive, no healthy node counts a failure or is deleted, the cluster-wide signal is raised and cleared, every healthy node opens after, remediation on',
    // Workers run their whole timeout while DNS does not answer, 20 at a time: on 2 cores a new
    // worker then takes more than the suite's 8 s to start, which would be a NotStarted failure of
    // its own (the product's default is 3m).
    config: () => ({ worker: { startTimeout: '60s', scheduleTimeout: '60s' } }),
    fault: async (ctx) => {
      dnsSignal = { raised: false, cleared: false };
      const signal = dnsSignal;
      await setDnsEndpointsReady(ctx, false);
      signal.down = Date.now();
      const until = Date.now() + (ctx.quick ? 40_000 : 120_000);
      while (Date.now() < until) {
        if ((await dnsFault(ctx)) === 1) signal.raised = true;
        await ctx.sleep(2_000);
      }
      await ctx.burstCreated;
      signal.up = Date.now();
      await setDnsEndpointsReady(ctx, true);
      // Cleared once a node passes dns again (within the settle bound); watched while the run settles.
      void (async () => {
        const deadline = Date.now() + 120_000;
        while (Date.now() < deadline && !signal.cleared) {
          if ((await dnsFault(ctx)) === 0) signal.cleared = true;
          else await ctx.sleep(2_000);
        }
      })();
    },
    judge: (j) => {
      const violations: string[] = [];
      const signal = dnsSignal;
      // The burst is created in its first 6 s and the outage lasts 2 min (40 s quick): workers run during it.
      const healthy = new Set([...j.monitor.nodes.values()].filter((n) => n.faults.length === 0).map((n) => n.uid));
      const during = [...j.monitor.pods.values()].filter((p) => healthy.has(p.nodeUid) && p.created >= (signal.down ?? Infinity) && p.created < (signal.up ?? -Infinity)).length;
      // Without workers running while the DNS is down there is nothing to raise the signal or an Event for (the premise).
      if (!signal.raised && during > 0) violations.push('kube_node_ready_cluster_wide_fault{check="dns"} was never 1 on the leader during the outage');
      if (!signal.cleared) violations.push('kube_node_ready_cluster_wide_fault{check="dns"} was not back to 0 within 120 s after the outage');
      let counted = 0;
      for (const n of j.monitor.nodes.values()) {
        if (n.faults.length > 0 || j.scenarioDeleted.has(n.uid)) continue;
        const failed = n.progress.filter((p) => (p.failures ?? 0) !== 0 || p.phase === 'Failed');
        if (failed.length > 0) {
          counted++;
          violations.push(`${n.name} (healthy) counted a failed attempt: ${n.progress.map((p) => `${p.phase}/${p.attempt}/${p.failures}`).join(' -> ')} (phase/attempt/failures)`);
        }
      }
      const inconclusive = j.events.filter((e) => e.reason === 'VerificationInconclusive').length;
      if (inconclusive === 0 && during > 0) violations.push('no VerificationInconclusive Event: the outage was never seen');
      return {
        violations,
        premises: [{ what: "healthy nodes' workers ran while the cluster DNS had no ready endpoint", met: during > 0, measured: `${during} worker pods` }],
        summary: [`signal raised ${signal.raised}, cleared ${signal.cleared}; ${counted} healthy nodes counted a failed attempt; ${inconclusive} VerificationInconclusive Events`],
        observed: { signal, healthyWithCountedFailure: counted, inconclusiveEvents: inconclusive, healthyWorkersDuringOutage: during },
      };
    },
  },
  {
    name: 'realistic-burst',
    what: 'no fault: 50 healthy nodes (quick: 17) come up as cloud nodes do: NotReady 10-30 s, the CNI 5-20 s after Ready, first image pull 5-15 s, a CNI agent taint removed after 10-40 s',
    nodes: 50,
    allHealthy: true,
    progressEveryMs: 15_000,
    keepReplicasUp: true,
    // Drawn per node from the run's seed. The sandbox's `realistic` preset puts the CNI 0-10 s after
    // Ready, the issue 5-20 s: explicit knobs.
    node: (_name, random) => ({
      bringUp: {
        notReadyFor: `${random.between(10_000, 30_000)}ms`,
        cniDelay: `${random.between(5_000, 20_000)}ms`,
        imagePullDelay: `${random.between(5_000, 15_000)}ms`,
        removeTaintsAfter: `${CNI_AGENT_TAINT}=${random.between(10_000, 40_000)}ms`,
      },
      taints: [{ key: CNI_AGENT_TAINT, value: 'true', effect: 'NoSchedule' }],
    }),
    // The suite's startTimeout (8 s) is shorter than a first image pull here (up to 15 s): the
    // product's default, as users run it. 10 workers at a time, not 20: every worker's Service
    // traffic goes through the sandbox's one-process service proxy, which on 2 busy cores stops
    // accepting for seconds when about 20 workers start at once, beside the bring-up's own work
    // (the workers' 5 s API checks then fail, and the product rightly calls that cluster-wide).
    // Leader election as the product's defaults: the suite's 6 s / 4 s lease is for the failover
    // scenarios; under this load leaders miss a 4 s renew deadline, exit and are replaced.
    config: () => ({
      worker: { startTimeout: '3m' },
      reconciliation: { maxConcurrentVerifications: 10 },
      leaderElection: { leaseDuration: '15s', renewDeadline: '10s', retryPeriod: '2s' },
    }),
    fault: async (ctx) => ctx.burstCreated,
    // A wait is reported once the node is 10 s old; 5 s more for the reconcile to happen on a busy machine.
    judge: (j) => allOf(opensAtFirstAttempt(j), waitsAreExplained(j, 5_000)),
  },
  {
    name: 'queue',
    what: `${QUEUE.nodes.full} healthy nodes (quick: ${QUEUE.nodes.quick}) join at ${QUEUE.perSecond} a second behind ${QUEUE.slots.full} verification slots (quick: ${QUEUE.slots.quick}), each worker holding its slot at least ${QUEUE.holdMs / 1000} s, remediation on with stuckNodeTimeout ${QUEUE.stuckNodeTimeoutMs / 60_000} min: the later ones wait for their turn far longer than that`,
    // The line is long by construction, not by the machine's speed: every worker pod holds its slot
    // at least holdMs (its containers start that late), so the slots serve at most slots / holdMs
    // nodes a second however fast the machine; a slower machine only lengthens the line.
    // queueWaitFloorMs() is the least the last node served waits. Few nodes keep the sandbox's
    // one-process kubelet from falling behind: the nodes of a large burst it leaves unreported for
    // minutes are rightly taken for stuck (docs/reliability.md, the run with --nodes 1000).
    nodes: QUEUE.nodes.full,
    quickNodes: QUEUE.nodes.quick,
    allHealthy: true,
    createPerSecond: QUEUE.perSecond,
    startDelay: `${QUEUE.holdMs}ms`,
    progressEveryMs: 15_000,
    keepReplicasUp: true,
    config: (quick) => ({
      // What is judged is the controller's queue, not the checks: the instant worker (a pod whose
      // process writes a passing summary and exits), as the bench's side-by-side bursts run it
      // (bench/src/neighbour.ts). Otherwise the bench's settings (bench/src/controller.ts): the
      // product's worker deadlines, 20 reconcile workers, a client limit that is not what the burst
      // measures.
      worker: { image: { repository: 'ghcr.io/kube-node-ready/kube-node-ready-instant' }, timeout: '60s', scheduleTimeout: '2m', startTimeout: '3m' },
      reconciliation: { maxConcurrentVerifications: quick ? QUEUE.slots.quick : QUEUE.slots.full, workers: 20 },
      kubernetes: { qps: 200, burst: 400 },
      // The product's defaults: under a big burst the leaders would miss the suite's 6 s / 4 s lease's
      // renew deadline again and again, and each new leader restarts the stuck clock.
      leaderElection: { leaseDuration: '15s', renewDeadline: '10s', retryPeriod: '2s' },
      nodeManagement: { remediation: { stuckNodeTimeout: `${QUEUE.stuckNodeTimeoutMs / 1000}s` } },
    }),
    fault: async (ctx) => {
      // The fault is the queue itself: it lasts until every node of the burst has had its turn (a
      // worker pod) or is gone; the nodes then have SETTLE_BOUND_MS to open. The bound only ends a
      // run whose controller stopped serving the line: twice the slots' fastest pace, and 2 min.
      const burst = ctx.plans.map((p) => p.name);
      const slots = ctx.quick ? QUEUE.slots.quick : QUEUE.slots.full;
      const floorMs = queueWaitFloorMs(burst.length, slots, QUEUE.holdMs, QUEUE.perSecond);
      ctx.log(
        `by construction the last node served waits at least ${(floorMs / 1000).toFixed(0)} s (${burst.length} nodes, ${slots} slots held at least ${QUEUE.holdMs / 1000} s each, ${QUEUE.perSecond} created a second); stuckNodeTimeout ${QUEUE.stuckNodeTimeoutMs / 1000} s`,
      );
      if (floorMs <= QUEUE.stuckNodeTimeoutMs) ctx.log(`with ${burst.length} nodes the line need not outlast stuckNodeTimeout: the premise may not be met`);
      await ctx.burstCreated;
      const boundMs = 120_000 + 2 * Math.ceil(burst.length / slots) * QUEUE.holdMs;
      const deadline = Date.now() + boundMs;
      for (;;) {
        const served = new Set([...ctx.monitor.pods.values()].map((p) => p.node));
        for (const n of ctx.monitor.nodes.values()) if (n.deleted !== undefined) served.add(n.name);
        const left = burst.filter((n) => !served.has(n)).length;
        if (left === 0) return;
        if (Date.now() > deadline) {
          ctx.log(`${left} nodes of the burst still wait for a worker ${boundMs / 1000} s after the burst was created; ending the fault anyway`);
          return;
        }
        await ctx.sleep(1000);
      }
    },
    judge: (j) => neverRemediatedWhileQueued(j),
  },
];

/** The foreign writer's update: read, change its own label, annotation and taint, write back with the resourceVersion (409: try again). */
async function writeForeign(ctx: Ctx, name: string, value: string): Promise<boolean> {
  for (let i = 0; i < 10; i++) {
    const node = await ctx.cluster.core.readNode({ name });
    node.metadata!.labels = { ...node.metadata?.labels, [FOREIGN.label]: value };
    node.metadata!.annotations = { ...node.metadata?.annotations, [FOREIGN.annotation]: value };
    node.spec!.taints = [...(node.spec?.taints ?? []).filter((t) => t.key !== FOREIGN.taint.key), { ...FOREIGN.taint, value }];
    try {
      const written = await ctx.cluster.core.replaceNode({ name, body: node });
      // Responses of concurrent writers can arrive out of order: the write with the newest resourceVersion is what must remain.
      ctx.expectForeign(name, { labels: { [FOREIGN.label]: value }, annotations: { [FOREIGN.annotation]: value }, taints: [{ ...FOREIGN.taint, value }] }, Number(written.metadata?.resourceVersion));
      return true;
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
    }
  }
  return false;
}

// The fault scenarios. Each runs while the burst of nodes is being created and resolves when its
// fault is over (docs/reliability.md).
import { DNS_CONFIGMAP, sandboxControl, statusCode, type k8s } from '@kube-node-ready/sandbox';
import { NAMESPACE } from './cluster.js';
import { WORKER_SELECTOR } from '../../bench/src/observer.js';
import { isLive, workerNode } from './monitor.js';
import { FOREIGN, waitUntil, type Ctx, type Scenario } from './run.js';

const livePods = async (ctx: Ctx): Promise<k8s.V1Pod[]> =>
  (await ctx.cluster.core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: WORKER_SELECTOR })).items.filter(isLive);

const setDnsMode = (ctx: Ctx, mode: string) =>
  ctx.cluster.core.patchNamespacedConfigMap({ name: DNS_CONFIGMAP, namespace: 'kube-system', body: [{ op: 'replace', path: '/data/mode', value: mode }] });

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
      ctx.log(`the controllers listed nodes and pods again ${lists() - before} times (410 Gone or a failed watch)`);
    },
  },
  {
    name: 'watch-stall',
    what: "the controller's open watch connections go silent (no data, no close); new connections work",
    fault: async (ctx) => {
      await ctx.sleep(2000);
      ctx.cluster.proxy.set({ stallWatches: true });
      ctx.cluster.proxy.set({});
      await ctx.burstCreated;
    },
  },
  {
    name: 'api-faults',
    what: 'API slow and failing for 30 s (quick: 15 s): +150 ms latency, 5 % resets, 5 % 429, 5 % 500',
    fault: async (ctx) => {
      ctx.cluster.proxy.set({ latencyMs: 150, resetRate: 0.05, throttleRate: 0.05, errorRate: 0.05 });
      await ctx.sleep(ctx.quick ? 15_000 : 30_000);
      await ctx.burstCreated;
      ctx.cluster.proxy.set({});
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
      ctx.log(`${written} foreign writes (read, change, update with resourceVersion) on the run's nodes`);
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
      if (done.size < count) ctx.log(`recreated ${done.size} of ${count} nodes (few workers were live)`);
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
        } catch (err) {
          if (statusCode(err) !== 404 && statusCode(err) !== 422) ctx.log(`${how} ${name}: ${String(err)}`);
        }
      }
      await ctx.burstCreated;
    },
  },
  {
    name: 'dns-outage',
    what: 'cluster DNS answers SERVFAIL for 45 s (quick: 30 s): every new node fails, remediation on',
    failsAll: true,
    fault: async (ctx) => {
      await setDnsMode(ctx, 'servfail');
      await ctx.sleep(ctx.quick ? 30_000 : 45_000);
      await ctx.burstCreated;
      await setDnsMode(ctx, 'ok');
    },
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

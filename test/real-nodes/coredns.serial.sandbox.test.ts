// Real CoreDNS, the real nodes' cluster DNS, broken the two ways a cluster's DNS goes down for every
// node at once, while new tainted real nodes are verified (the controller in this process, its
// worker from the image, reconciliation.clusterDnsService pointing at CoreDNS's Service):
//   - CoreDNS scaled to 0 (a bad rollout, the cold start): its Service has no ready endpoint, which
//     the controller reads (direct evidence), so a node's failed dns check is the cluster's from
//     the first node on: inconclusive, never counted. Scaled back, the node opens.
//   - CoreDNS hung while its endpoint stays ready (the process stopped): nothing but the failures of
//     other nodes says it is not the node's fault. A burst of three nodes fails dns against the same
//     address, the controller's shared-failure rule (three nodes, more failing than passing since)
//     and a control run on a node it verified before make the attempts inconclusive; at the
//     default retries no node ends Failed. Resumed, every node opens.
// Serial: the real nodes' cluster DNS is shared by every real node of the sandbox.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { k8s, repoRoot, sandboxControl } from '@kube-node-ready/sandbox';
import { harness, nodeEvents, progressOf, readNode, verificationCondition, type Harness } from '../../packages/controller/test/harness.js';
import { CLUSTER_DNS, CLUSTER_DNS_SERVICE, COREDNS_APP, coreDnsObjects, SYSTEM_NODE } from '../../packages/sandbox/src/coredns.js';
import { realNodeProductImage } from '../../packages/sandbox/src/real-node.js';
import { cgroupHierarchyRoots } from '../../packages/sandbox/src/runtime/cgroups.js';
import { core, deleteNode, readVerification, sandbox, uniqueName, verificationInPhase, waitFor } from '../sandbox.js';
import { holdRealNodeLock } from './machine-lock.js';

holdRealNodeLock();
const exec = promisify(execFile);
let h: Harness;
const added: string[] = [];
/** A real node this file's controllers verified, kept for the control runs of later tests. */
let verified: string | undefined;

const kubectl = (args: string[]) => exec(join(sandbox().state.binDir, 'kubectl'), ['--kubeconfig', sandbox().state.kubeconfig, '-n', CLUSTER_DNS.namespace, ...args], { timeout: 180_000 }).then((r) => r.stdout);
const discovery = () => sandbox().kc.makeApiClient(k8s.DiscoveryV1Api);

beforeAll(async () => {
  h = await harness('rdns');
}, 120_000);

afterAll(async () => {
  await h?.stopAll();
  // Whatever a test left broken is repaired for the files after this one.
  await signalCoreDns('SIGCONT').catch(() => undefined);
  await kubectl(['scale', 'deployment', CLUSTER_DNS.name, '--replicas=1']).catch(() => undefined);
  for (const n of added.splice(0)) {
    await sandboxControl(sandbox().state.dir, 'POST', `/remove-real-node/${n}`, 120_000).catch(() => undefined);
    await deleteNode(n);
  }
  await h?.cleanup();
}, 300_000);

/**
 * A controller whose workers run the image from the registry, with a real cluster's start-up
 * timeouts (a node's first pod waits for its image pull) and CoreDNS's Service as the cluster DNS.
 */
async function startController(reconciliation: Record<string, unknown>): Promise<void> {
  const image = realNodeProductImage(repoRoot());
  await h.start({
    worker: { image: { repository: image.repository, digest: image.digest }, scheduleTimeout: '60s', startTimeout: '120s' },
    reconciliation: { clusterDnsService: CLUSTER_DNS_SERVICE, ...reconciliation },
  });
}

/** A real node with this file's taint and selector label; the first one also starts the system node and CoreDNS. */
async function addRealNode(prefix: string): Promise<string> {
  const name = uniqueName(prefix);
  const t = h.taint;
  const query = new URLSearchParams([
    ['taint', `${t.key}=${t.value}:${t.effect}`],
    ['label', `${h.selector.key}=${h.selector.value}`],
  ]);
  added.push(name);
  await sandboxControl(sandbox().state.dir, 'POST', `/add-real-node/${name}?${query.toString()}`, 600_000);
  return name;
}

async function nodeReady(name: string): Promise<boolean> {
  return (await readNode(name))?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/** CoreDNS's pods and its Service's endpoints, one line, for messages. */
async function coreDnsState(): Promise<string> {
  const pods = await coreDnsPods();
  const endpointText = (await endpoints()).map((e) => `${e.addresses.join(',')} ready=${String(e.conditions?.ready)} terminating=${String(e.conditions?.terminating ?? false)}`);
  const podText = pods.map((p) => `${p.metadata?.name} ${p.status?.phase} ready=${String(p.status?.containerStatuses?.[0]?.ready)} restarts=${p.status?.containerStatuses?.[0]?.restartCount ?? 0}`);
  return `pods [${podText.join('; ')}], endpoints [${endpointText.join('; ')}]`;
}

async function endpoints(): Promise<k8s.V1Endpoint[]> {
  const slices = await discovery().listNamespacedEndpointSlice({ namespace: CLUSTER_DNS.namespace, labelSelector: `kubernetes.io/service-name=${CLUSTER_DNS.name}` });
  return slices.items.flatMap((s) => s.endpoints ?? []).filter((e) => e.addresses.length > 0);
}

async function readyEndpoints(): Promise<number> {
  return (await endpoints()).filter((e) => e.conditions?.ready !== false).length;
}

async function endpointCount(): Promise<number> {
  return (await endpoints()).length;
}

async function coreDnsPods(): Promise<k8s.V1Pod[]> {
  return (await core().listNamespacedPod({ namespace: CLUSTER_DNS.namespace, labelSelector: `k8s-app=${COREDNS_APP}` })).items;
}

/**
 * The processes of the CoreDNS container on the system node: those in its container's cgroup (the
 * kubelet, with cgroupfs, makes one per container, named by its containerd ID, under the node's
 * cgroup root), so a CoreDNS of another sandbox on the machine is never touched.
 */
async function coreDnsPids(): Promise<number[]> {
  const id = (await coreDnsPods()).filter((p) => !p.metadata?.deletionTimestamp).map((p) => p.status?.containerStatuses?.[0]?.containerID ?? '').find((c) => c.startsWith('containerd://'))?.slice('containerd://'.length);
  if (!id) throw new Error(`no running CoreDNS container: ${await coreDnsState()}`);
  const nodeRoot = `knr${sandbox().layout.slot}-${SYSTEM_NODE}`;
  const find = (dir: string, depth: number): string | undefined => {
    if (depth > 6 || !existsSync(dir)) return undefined;
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (!statSync(path).isDirectory()) continue;
      if (entry === id) return path;
      const found = find(path, depth + 1);
      if (found) return found;
    }
    return undefined;
  };
  for (const hierarchy of cgroupHierarchyRoots()) {
    const dir = find(join(hierarchy, nodeRoot), 0);
    if (!dir) continue;
    const pids = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    if (pids.length > 0) return pids;
  }
  throw new Error(`the cgroup of CoreDNS's container ${id} was not found under ${nodeRoot} in ${cgroupHierarchyRoots().join(', ')}`);
}

/** kill -STOP / -CONT of CoreDNS's process, as on its node. */
async function signalCoreDns(signal: 'SIGSTOP' | 'SIGCONT'): Promise<number[]> {
  const pids = await coreDnsPids();
  for (const pid of pids) process.kill(pid, signal);
  return pids;
}

function processState(pid: number): string {
  return /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '?';
}

/** Sets CoreDNS's probes (a rollout) and waits for it to finish. */
async function setProbes(readinessFailures: number, livenessFailures: number): Promise<void> {
  const patch = [
    { op: 'replace', path: '/spec/template/spec/containers/0/readinessProbe/failureThreshold', value: readinessFailures },
    { op: 'replace', path: '/spec/template/spec/containers/0/livenessProbe/failureThreshold', value: livenessFailures },
  ];
  await kubectl(['patch', 'deployment', CLUSTER_DNS.name, '--type=json', `-p=${JSON.stringify(patch)}`]);
  await kubectl(['rollout', 'status', `deployment/${CLUSTER_DNS.name}`, '--timeout=180s']);
  // The old pod's endpoint goes once it is deleted; the new one's is ready.
  await waitFor(async () => (await coreDnsPods()).length === 1 && (await endpointCount()) === 1 && (await readyEndpoints()) === 1, 'CoreDNS to serve from one ready pod after the rollout', 120_000).catch(async (err: unknown) => {
    throw new Error(`${String(err)}; CoreDNS: ${await coreDnsState()}`);
  });
}

/** A real node opened by this file's controller while CoreDNS works: the control runs' verified node. */
async function verifiedNode(): Promise<string> {
  if (verified) return verified;
  await startController({});
  const name = await addRealNode('rdns-ok');
  await h.waitForOpen([name], `the real node ${name} to open while CoreDNS serves`, 300_000);
  await h.stopAll();
  verified = name;
  return name;
}

describe('real CoreDNS, the cluster DNS of the real nodes', () => {
  it('scaled to 0 replicas: a new real node\'s attempts are inconclusive from the first, naming the Service, never counted; scaled back, it opens', { timeout: 900_000 }, async () => {
    // Added while CoreDNS serves (the first real node starts the system node and CoreDNS before it returns).
    const name = await addRealNode('rdns-scaled');
    await waitFor(() => nodeReady(name), `the real node ${name} to be Ready`, 120_000);

    // As a user would: kubectl scale. Until its pod is gone, kube-proxy still sends queries to the
    // terminating CoreDNS, which serves through its lameduck period: waited for.
    await kubectl(['scale', 'deployment', CLUSTER_DNS.name, '--replicas=0']);
    await waitFor(async () => ((await coreDnsPods()).length === 0 && (await endpointCount()) === 0) || undefined, `CoreDNS's pod and ${CLUSTER_DNS_SERVICE}'s endpoints to be gone`, 120_000).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; CoreDNS: ${await coreDnsState()}`);
    });

    // The harness's maxRetries 1: two counted failures would fail the node.
    await startController({ maxRetries: 1, initialBackoff: '2s', maxBackoff: '5s' });
    let seen = '';
    const inconclusive = await waitFor(
      async () => {
        const condition = await verificationCondition(name);
        const progress = await progressOf(name);
        const events = (await nodeEvents(name)).map((e) => e.reason);
        seen = JSON.stringify({ condition: `${condition?.status}/${condition?.reason}: ${condition?.message ?? ''}`, progress, events });
        // A Failed node ends the wait at once (the expectations below say why).
        if (progress['phase'] === 'Failed') return { condition, progress };
        return condition?.status === 'Unknown' && condition.reason === 'ClusterWide' && events.includes('VerificationInconclusive') && Number(progress['attempt']) >= 2 ? { condition, progress } : undefined;
      },
      `two inconclusive attempts on ${name} (condition Unknown/ClusterWide, a VerificationInconclusive Event)`,
      300_000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; saw ${seen}; CoreDNS: ${await coreDnsState()}`);
    });
    console.log(`CoreDNS scaled to 0: ${name}: ${inconclusive.condition?.message}`);
    expect(inconclusive.condition?.message, JSON.stringify(inconclusive.progress)).toMatch(/^attempt inconclusive, not counted against the node: cluster-wide: the cluster DNS Service kube-system\/coredns has no ready endpoint; not this node's fault: /);
    // The node asked CoreDNS's Service, through its own kube-proxy, and only dns failed.
    const status = (await readVerification(name))?.status;
    expect(status?.failing?.checks, JSON.stringify(status)).toEqual({ dns: `${CLUSTER_DNS.ip}:53` });
    // Two attempts, none counted, not Failed.
    expect(inconclusive.progress['failures'] ?? '0', JSON.stringify(inconclusive.progress)).toBe('0');
    expect(inconclusive.progress['phase']).toMatch(/^(Backoff|Verifying)$/);
    const reasons = (await nodeEvents(name)).map((e) => e.reason);
    expect(reasons.filter((r) => /^(VerificationChecksFailed|VerificationFailed)/.test(r ?? ''))).toEqual([]);

    // Scaled back: CoreDNS serves again and the node opens, with no failure counted.
    await kubectl(['scale', 'deployment', CLUSTER_DNS.name, '--replicas=1']);
    await h.waitForOpen([name], `${name} to open once CoreDNS is back`, 300_000);
    const nv = await verificationInPhase(name, 'Passed');
    expect(nv.status?.failures ?? 0, JSON.stringify(nv.status)).toBe(0);
    await h.stopAll();
    verified ??= name;
  });

  it('hung while its endpoint stays ready: a burst of three real nodes fails dns alike, the attempts are inconclusive (shared failure, control run), no node Failed at the default retries; resumed, all open', { timeout: 1_200_000 }, async () => {
    const control = await verifiedNode();
    await waitFor(async () => (await readyEndpoints()) === 1 || undefined, 'CoreDNS to have its ready endpoint', 180_000);
    // The kubelet's probes would see the hang (kubeadm's readiness: 3 failures 10 s apart) and take
    // the endpoint away, which is the scaled-to-0 case above, or restart CoreDNS (liveness: 5
    // failures), which ends the hang; a burst of real nodes on two busy cores takes longer than
    // that. The probes are lengthened so the endpoint stays ready throughout: a CoreDNS whose
    // probes pass while it answers nothing (its DNS port unreachable, a stuck plugin chain).
    await setProbes(1000, 1000);
    try {
      const nodes: string[] = [];
      for (let i = 0; i < 3; i++) nodes.push(await addRealNode(`rdns-hung${i}`));
      await waitFor(async () => (await Promise.all(nodes.map(nodeReady))).every(Boolean) || undefined, `the three real nodes ${nodes.join(', ')} to be Ready`, 180_000);

      const pids = await signalCoreDns('SIGSTOP');
      // A signal is delivered asynchronously: a process still running its time slice reads R for a moment.
      await waitFor(async () => pids.every((pid) => processState(pid) === 'T') || undefined, `CoreDNS processes ${pids.join(', ')} to stop (states ${pids.map(processState).join(', ')})`, 10_000).catch(() => undefined);
      expect(pids.map(processState), `CoreDNS processes ${pids.join(', ')} stopped`).toEqual(pids.map(() => 'T'));

      // The product's defaults: maxRetries 5, 10 s initial backoff.
      await startController({ maxRetries: 5, initialBackoff: '10s', maxBackoff: '5m' });
      let seen = '';
      let endpointLost: string | undefined;
      // When every node of the burst had finished a failed attempt (so three nodes had failed dns
      // alike), and each node's counted failures a little after that (its NodeVerification written).
      let allFailedAt: number | undefined;
      let countedOnceAllFailed: Record<string, number> | undefined;
      const judged = await waitFor(
        async () => {
          const state = await Promise.all(
            nodes.map(async (node) => {
              const condition = await verificationCondition(node);
              const progress = await progressOf(node);
              return { node, condition: `${condition?.status}/${condition?.reason}`, message: condition?.message ?? '', progress };
            }),
          );
          const endpoints = await readyEndpoints();
          seen = JSON.stringify({ endpoints, state });
          // The endpoint never leaves: what the controller decides is not the no-endpoint evidence.
          if (endpoints !== 1) endpointLost ??= `CoreDNS's endpoint was not ready while it was hung: ${await coreDnsState()}`;
          if (allFailedAt === undefined && state.every((s) => s.progress['last-outcome'] !== undefined)) allFailedAt = Date.now();
          // 5 s later every judgement made before then is written, and no later attempt has finished
          // (each waits a 10 s backoff, then a 10 s dns timeout).
          if (allFailedAt !== undefined && countedOnceAllFailed === undefined && Date.now() >= allFailedAt + 5000) {
            countedOnceAllFailed = Object.fromEntries(state.map((s) => [s.node, Number(s.progress['failures'] ?? '0')]));
          }
          // A Failed node ends the wait at once (the expectations below say why).
          const done = state.every((s) => s.condition === 'Unknown/ClusterWide' && Number(s.progress['attempt']) >= 2) || state.some((s) => s.progress['phase'] === 'Failed');
          return done ? state : undefined;
        },
        'every node of the burst inconclusive at its second attempt or later (Unknown/ClusterWide)',
        420_000,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}; saw ${seen}; CoreDNS: ${await coreDnsState()}`);
      });
      expect(endpointLost).toBeUndefined();
      for (const { node, message, progress } of judged) {
        console.log(`CoreDNS hung: ${node} (attempt ${progress['attempt']}, failures ${progress['failures'] ?? 0}): ${message}`);
        // Judged by the failures of the other nodes against CoreDNS's Service, confirmed by a control
        // run on the verified node, not by the Service's endpoints (it has one, ready).
        expect(message, node).toMatch(new RegExp(`cluster-wide: dns against ${CLUSTER_DNS.ip.replace(/\./g, '\\.')}:53 failed on [3-9] nodes in the last 10m, and 0 passed since it began; control run: dns fails on verified node ${control} too; not this node's fault: `));
        expect(message, node).not.toMatch(/has no ready endpoint/);
        // dns alone failed, against CoreDNS's Service.
        expect((await readVerification(node))?.status?.failing?.checks, node).toEqual({ dns: `${CLUSTER_DNS.ip}:53` });
        // Only attempts that failed before three nodes had failed alike counted: once every node of
        // the burst had failed once, no further failure counts. (Usually one per node; a node whose
        // worker started well before the others', each new node pulling the image at its own pace on
        // a busy machine, can fail twice before the third node fails once.) Never Failed.
        expect(countedOnceAllFailed, `the counted failures once every node had failed: ${seen}`).toBeDefined();
        expect(Number(progress['failures'] ?? '0'), `${node}: ${JSON.stringify(progress)}; counted once every node had failed: ${JSON.stringify(countedOnceAllFailed)}`).toBe(countedOnceAllFailed?.[node]);
        expect(progress['phase'], node).toMatch(/^(Backoff|Verifying)$/);
      }

      await signalCoreDns('SIGCONT');
      await h.waitForOpen(nodes, 'every node of the burst to open once CoreDNS runs again', 420_000);
      for (const node of nodes) expect((await verificationInPhase(node, 'Passed')).status?.phase).toBe('Passed');
    } finally {
      await signalCoreDns('SIGCONT').catch(() => undefined);
      // kubeadm's probes back.
      const probes = (coreDnsObjects({ image: '', clusterDomain: '' }).find((o) => o.kind === 'Deployment') as k8s.V1Deployment).spec!.template.spec!.containers[0]!;
      await setProbes(probes.readinessProbe!.failureThreshold!, probes.livenessProbe!.failureThreshold!);
    }
  });
});

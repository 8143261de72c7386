// Runs one scenario: a fresh cluster with two controller replicas, the monitor, a burst of simulated
// nodes (a mix of healthy and faulty ones, created in waves while the fault runs), the fault, a
// small wave of healthy nodes when the fault ends, then waits for the cluster to settle and judges
// the six invariants (docs/reliability.md).
import { simulatedNode, statusCode, type k8s } from '@kube-node-ready/sandbox';
import { Cluster, GUARDS, NAMESPACE, TAINT, VERIFIED_LABEL, type ChaosEnv } from './cluster.js';
import { Monitor, type Fault, type NodeRecord } from './monitor.js';
import type { Rng } from '../../packages/core/src/testing/random.js';

export const RUN_LABEL = 'chaos.kube-node-ready.io/run';
/** Marks written by "others": they must survive everything the controller does. */
export const FOREIGN = {
  label: 'chaos.example.com/team',
  annotation: 'chaos.example.com/note',
  taint: { key: 'chaos.example.com/dedicated', value: 'blue', effect: 'PreferNoSchedule' },
} as const;

/** Every healthy node must be open this long after the fault ended; the controller must act again within RECOVERY_BOUND_MS. */
export const SETTLE_BOUND_MS = 150_000;
export const RECOVERY_BOUND_MS = 60_000;

export interface NodePlan {
  name: string;
  faults: Fault[];
}

export interface Ctx {
  cluster: Cluster;
  monitor: Monitor;
  random: Rng;
  quick: boolean;
  log: (line: string) => void;
  /** Resolves once every node of the burst has been created. */
  burstCreated: Promise<void>;
  /** Creates a node of the run (foreign marks included) and registers the expectations. */
  createNode: (plan: NodePlan) => Promise<void>;
  /** Deletes a node as "someone else" (not a controller deletion). */
  deleteNode: (name: string) => Promise<void>;
  /** What the foreign writer wrote to a node at resourceVersion rv: the end state must match the newest. */
  expectForeign: (node: string, change: Partial<ForeignState>, rv: number) => void;
  sleep: (ms: number) => Promise<void>;
}

export interface ForeignState {
  /** resourceVersion of the write that set these (0: at creation). */
  rv?: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  taints: k8s.V1Taint[];
}

export interface Scenario {
  name: string;
  what: string;
  /** Every node created while the fault lasts is expected to fail (a cluster-wide fault). */
  failsAll?: boolean;
  /** Nodes in the burst (full run); the quick run uses a third, at least 9. */
  nodes?: number;
  /** Containers on the run's nodes start this late (sandbox start-delay), so workers stay live long enough to be disturbed. */
  startDelay?: string;
  /** Runs the fault; resolves when it is over. */
  fault: (ctx: Ctx) => Promise<void>;
}

export interface Violation {
  invariant: Invariant;
  detail: string;
}

export type Invariant = 'wrongOpen' | 'lost' | 'duplicates' | 'wrongDelete' | 'foreignDamage' | 'recovery';
export const INVARIANTS: Invariant[] = ['wrongOpen', 'lost', 'duplicates', 'wrongDelete', 'foreignDamage', 'recovery'];

export interface ScenarioResult {
  scenario: string;
  what: string;
  nodes: number;
  healthy: number;
  opened: number;
  workerPods: number;
  controllerDeletions: number;
  violations: Record<Invariant, number>;
  details: Violation[];
  /** Fault end -> first controller action (worker pod created or node opened). */
  recoveryMs?: number;
  /** Fault end -> every healthy node open. */
  settleMs?: number;
  faultMs: number;
  durationMs: number;
  seed: number;
  /** Opened nodes whose passing worker pod could not be seen because the monitor's pod watch was down. */
  unconfirmedOpenings: number;
  monitorErrors: number;
}

const FAULT_OF: Record<Fault, Parameters<typeof simulatedNode>[0]['faults']> = {
  dns: { dns: 'dead' },
  garbage: { terminationMessage: 'garbage' },
  'never-start': { neverStart: true },
};

export async function runScenario(env: ChaosEnv, s: Scenario, opts: { quick: boolean; random: Rng; seed: number }): Promise<ScenarioResult> {
  const started = Date.now();
  const log = (line: string) => env.out(`[${s.name}] ${line}`);
  const runId = `${s.name}-${started}`;
  log('starting the sandbox and two controller replicas');
  const cluster = await Cluster.start(env, s.name);
  const monitor = new Monitor(cluster.kc, { nodeSelector: `${RUN_LABEL}=${runId}`, namespace: NAMESPACE, taintKey: TAINT.key, verifiedLabel: VERIFIED_LABEL });
  const foreign = new Map<string, ForeignState>();
  const scenarioDeleted = new Set<string>();
  try {
    await Promise.all([cluster.startReplica(0), cluster.startReplica(1)]);
    await waitUntil(async () => (await cluster.leader()) !== undefined, 60_000, 'a leader to be elected');
    await monitor.start();

    const createNode = async (plan: NodePlan) => {
      const faults = Object.assign(s.startDelay ? { startDelay: s.startDelay } : {}, ...plan.faults.map((f) => FAULT_OF[f])) as Parameters<typeof simulatedNode>[0]['faults'];
      const state: ForeignState = {
        labels: { [FOREIGN.label]: 'blue' },
        annotations: { [FOREIGN.annotation]: 'keep me' },
        taints: [{ ...FOREIGN.taint }],
      };
      foreign.set(plan.name, state);
      const body = simulatedNode({ name: plan.name, labels: { [RUN_LABEL]: runId, ...state.labels }, annotations: state.annotations, taints: [TAINT, ...state.taints], faults });
      for (let i = 0; ; i++) {
        try {
          await cluster.core.createNode({ body });
          return;
        } catch (err) {
          // The apiserver may be restarting (a scenario's fault): try again.
          if (statusCode(err) === 409 || i >= 60) throw err;
          await sleep(1000);
        }
      }
    };
    const deleteNode = async (name: string) => {
      const rec = monitor.nodeByName(name);
      if (rec) scenarioDeleted.add(rec.uid);
      const live = await cluster.core.readNode({ name }).catch(() => undefined);
      if (live?.metadata?.uid) scenarioDeleted.add(live.metadata.uid);
      await cluster.core.deleteNode({ name }).catch((err) => {
        if (statusCode(err) !== 404) throw err;
      });
      foreign.delete(name);
    };

    // The burst: a mix of healthy and faulty nodes, created in waves while the fault runs.
    const size = opts.quick ? Math.max(9, Math.round((s.nodes ?? 36) / 3)) : (s.nodes ?? 36);
    const plans = burstPlan(runId, size, opts.random);
    let markCreated: () => void = () => {};
    const burstCreated = new Promise<void>((r) => (markCreated = r));
    const ctx: Ctx = {
      cluster,
      monitor,
      random: opts.random,
      quick: opts.quick,
      log,
      burstCreated,
      createNode,
      deleteNode,
      expectForeign: (node, change, rv) => {
        const cur = foreign.get(node);
        if (cur && rv > (cur.rv ?? 0)) foreign.set(node, { ...cur, ...change, rv });
      },
      sleep,
    };
    const waves = 4;
    const creating = (async () => {
      for (let w = 0; w < waves; w++) {
        await Promise.all(plans.filter((_, i) => i % waves === w).map(createNode));
        if (w < waves - 1) await sleep(2000);
      }
      markCreated();
    })();
    log(`burst of ${size} nodes (${plans.filter((p) => p.faults.length > 0).length} faulty) in ${waves} waves, fault: ${s.what}`);
    const faultStart = Date.now();
    await Promise.all([s.fault(ctx), creating]);
    const faultEnd = Date.now();
    log(`fault over after ${((faultEnd - faultStart) / 1000).toFixed(1)}s; two healthy nodes join now`);
    await cluster.reviveExited();
    const after = [0, 1].map((i) => ({ name: `${runId}-after-${i}`, faults: [] as Fault[] }));
    await Promise.all(after.map(createNode));

    // Settle: every node of the run settled (see settled()), no live worker pod.
    const failsAllBefore = s.failsAll ? faultEnd : undefined;
    const nodes = () => [...monitor.nodes.values()];
    const healthyOpen = () => nodes().every((n) => n.opened !== undefined || n.deleted !== undefined || mayFail(n, failsAllBefore));
    const allSettled = () => nodes().every((n) => settled(n, failsAllBefore));
    const noLivePods = () => [...monitor.pods.values()].every((p) => p.deleted !== undefined || p.terminal !== undefined);
    let settleMs: number | undefined;
    const deadline = faultEnd + SETTLE_BOUND_MS;
    while (Date.now() < deadline) {
      if (settleMs === undefined && healthyOpen()) settleMs = Date.now() - faultEnd;
      if (settleMs !== undefined && allSettled() && noLivePods()) break;
      await sleep(500);
    }
    if (Date.now() >= deadline) {
      const pending = nodes()
        .filter((n) => !settled(n, failsAllBefore))
        .map((n) => `${n.name}(${n.faults.join(',') || 'healthy'}: ${phaseOf(n) ?? 'no phase'})`);
      const live = [...monitor.pods.values()].filter((p) => p.deleted === undefined && p.terminal === undefined).map((p) => p.name);
      log(`not settled ${SETTLE_BOUND_MS / 1000}s after the fault: nodes ${pending.join(' ') || 'none'}; live worker pods ${live.join(' ') || 'none'}`);
    }
    // Remediation runs behind verification: give it a moment, so a late wrong deletion is still seen.
    await sleep(3000);
    monitor.stop();
    return judge({ s, monitor, foreign, scenarioDeleted, faultStart, faultEnd, started, settleMs, seed: opts.seed, failsAllBefore });
  } finally {
    monitor.stop();
    await cluster.stop().catch((err: unknown) => log(`stopping the cluster: ${String(err)}`));
  }
}

/**
 * The burst: about three quarters healthy, the rest split between DNS down, garbage results and pods
 * that never start. Below the circuit breaker's 30 %, so in most scenarios the hourly limit is the
 * guard that holds remediation back (the dns-outage scenario is the breaker's).
 */
export function burstPlan(runId: string, size: number, random: Rng): NodePlan[] {
  const faulty: Fault[] = [];
  const each = Math.max(1, Math.round(size * 0.07));
  for (let i = 0; i < each; i++) faulty.push('dns', 'garbage', 'never-start');
  const plans: NodePlan[] = Array.from({ length: size }, (_, i) => ({ name: `${runId}-${String(i).padStart(3, '0')}`, faults: i < faulty.length ? [faulty[i]!] : [] }));
  return random.shuffle(plans);
}

const phaseOf = (n: NodeRecord): string | undefined => n.last.metadata?.annotations?.['kube-node-ready.io/phase'];

/** The node may end failed: it has a fault, or it joined during a cluster-wide one (before failsAllBefore). */
function mayFail(n: NodeRecord, failsAllBefore: number | undefined): boolean {
  return n.faults.length > 0 || (failsAllBefore !== undefined && n.firstSeen < failsAllBefore);
}

/** The node reached an end: opened, deleted, or failed where it may fail. */
function settled(n: NodeRecord, failsAllBefore: number | undefined): boolean {
  return n.opened !== undefined || n.deleted !== undefined || (mayFail(n, failsAllBefore) && phaseOf(n) === 'Failed');
}

interface JudgeInput {
  s: Scenario;
  monitor: Monitor;
  foreign: Map<string, ForeignState>;
  scenarioDeleted: Set<string>;
  faultStart: number;
  faultEnd: number;
  started: number;
  settleMs: number | undefined;
  seed: number;
  /** failsAll scenarios: nodes first seen before this may fail without being "lost". */
  failsAllBefore: number | undefined;
}

export function judge(j: JudgeInput): ScenarioResult {
  const { monitor } = j;
  const details: Violation[] = [];
  const v = (invariant: Invariant, detail: string) => details.push({ invariant, detail });
  const nodes = [...monitor.nodes.values()];
  const passedUids = new Set([...monitor.pods.values()].filter((p) => p.exitedZero).map((p) => p.nodeUid));
  let unconfirmed = 0;

  // 1. No wrong opening.
  for (const n of nodes) {
    if (n.opened === undefined) continue;
    if (n.faults.length > 0) v('wrongOpen', `${n.name} (${n.faults.join(',')}) was opened although its worker can never pass`);
    else if (!passedUids.has(n.uid)) {
      if (monitor.podWatchGapWithin(n.firstSeen, n.opened)) unconfirmed++;
      else v('wrongOpen', `${n.name} (uid ${n.uid}) was opened without a passing worker pod for this UID`);
    }
  }

  // 2. Nothing lost: every healthy node that is still there was opened within the bound; every
  //    faulty one got its verdict (failed, or deleted by remediation).
  for (const n of nodes) {
    if (settled(n, j.failsAllBefore)) continue;
    const what = n.faults.length > 0 ? `(${n.faults.join(',')}) has no verdict` : 'is healthy but still not open';
    v('lost', `${n.name} ${what} ${Math.round(SETTLE_BOUND_MS / 1000)}s after the fault ended (phase ${phaseOf(n) ?? 'none'})`);
  }

  // 3. No duplicates.
  const dupNodes = new Map<string, string[]>();
  for (const d of monitor.duplicates) if (!dupNodes.has(d.node)) dupNodes.set(d.node, d.pods);
  for (const [node, pods] of dupNodes) v('duplicates', `${node}: live worker pods ${pods.join(', ')} at once`);

  // 4. No wrong deletion, guards held.
  const controllerDeleted = nodes.filter((n) => n.deleted !== undefined && !j.scenarioDeleted.has(n.uid));
  for (const n of controllerDeleted) {
    const failed = phaseOf(n) === 'Failed';
    if (n.faults.length === 0 && !j.s.failsAll) v('wrongDelete', `${n.name} was deleted but is healthy (phase ${phaseOf(n) ?? 'none'})`);
    else if (!failed) v('wrongDelete', `${n.name} was deleted before it failed (phase ${phaseOf(n) ?? 'none'})`);
  }
  if (controllerDeleted.length > GUARDS.maxPerHour) v('wrongDelete', `${controllerDeleted.length} deletions in one run exceed maxPerHour ${GUARDS.maxPerHour}`);
  if (j.s.failsAll && controllerDeleted.length > GUARDS.minSamples - 1) {
    v('wrongDelete', `${controllerDeleted.length} deletions during a cluster-wide failure: the circuit breaker should hold after ${GUARDS.minSamples - 1}`);
  }

  // 5. No foreign damage on the nodes that are still there.
  for (const n of nodes) {
    if (n.deleted !== undefined) continue;
    const want = j.foreign.get(n.name);
    if (!want) continue;
    const md = n.last.metadata ?? {};
    for (const [k, val] of Object.entries(want.labels)) if (md.labels?.[k] !== val) v('foreignDamage', `${n.name}: label ${k} is ${md.labels?.[k] ?? 'gone'}, want ${val}`);
    for (const [k, val] of Object.entries(want.annotations)) if (md.annotations?.[k] !== val) v('foreignDamage', `${n.name}: annotation ${k} is ${md.annotations?.[k] ?? 'gone'}, want ${val}`);
    for (const t of want.taints) {
      const have = (n.last.spec?.taints ?? []).find((x) => x.key === t.key && x.effect === t.effect);
      if (have?.value !== t.value) v('foreignDamage', `${n.name}: taint ${t.key}:${t.effect} is ${have ? `=${have.value}` : 'gone'}, want =${t.value}`);
    }
  }

  // 6. Bounded recovery: the first controller action after the fault ended.
  const actions = [
    ...[...monitor.pods.values()].map((p) => p.created),
    ...nodes.map((n) => n.opened ?? Infinity),
  ].filter((t) => t > j.faultEnd);
  const recoveryMs = actions.length > 0 ? Math.min(...actions) - j.faultEnd : undefined;
  if (recoveryMs === undefined) v('recovery', 'the controller did nothing after the fault ended');
  else if (recoveryMs > RECOVERY_BOUND_MS) v('recovery', `the controller acted again only ${Math.round(recoveryMs / 1000)}s after the fault ended (bound ${RECOVERY_BOUND_MS / 1000}s)`);

  const violations = Object.fromEntries(INVARIANTS.map((i) => [i, details.filter((d) => d.invariant === i).length])) as Record<Invariant, number>;
  return {
    scenario: j.s.name,
    what: j.s.what,
    nodes: nodes.length,
    healthy: nodes.filter((n) => n.faults.length === 0).length,
    opened: nodes.filter((n) => n.opened !== undefined).length,
    workerPods: monitor.pods.size,
    controllerDeletions: controllerDeleted.length,
    violations,
    details,
    ...(recoveryMs !== undefined ? { recoveryMs } : {}),
    ...(j.settleMs !== undefined ? { settleMs: j.settleMs } : {}),
    faultMs: j.faultEnd - j.faultStart,
    durationMs: Date.now() - j.started,
    seed: j.seed,
    unconfirmedOpenings: unconfirmed,
    monitorErrors: monitor.errors.length,
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function waitUntil(fn: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await Promise.resolve().then(fn).catch(() => false)) return;
    await sleep(250);
  }
  throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
}


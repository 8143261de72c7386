// Runs one scenario: a fresh cluster with two controller replicas, the monitor, a burst of simulated
// nodes (a mix of healthy and faulty ones, or all healthy, created in waves while the fault runs), the fault, a
// small wave of healthy nodes when the fault ends, then waits for the cluster to settle and judges
// the six invariants, and the scenario's own promise where it has one (docs/reliability.md).
import { simulatedNode, statusCode, type k8s, type NodeSpecOptions } from '@kube-node-ready/sandbox';
import { parseDuration } from '@kube-node-ready/core';
import { pool } from '../../bench/src/util.js';
import { ConditionReason } from '../../packages/controller/src/controllers/node/verification/condition.js';
import { Reason } from '../../packages/controller/src/events/reasons.js';
import { chaosConfig, Cluster, CONDITION_TYPE, GUARDS, LEASE, mergeConfig, NAMESPACE, TAINT, VERIFIED_LABEL, type ChaosEnv } from './cluster.js';
import { Monitor, type Fault, type NodeRecord } from './monitor.js';
import type { Rng } from '../../packages/core/src/testing/random.js';
import { verdictOf, type Premise, type Verdict } from './verdict.js';

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
  /** Bring-up knobs (sandbox annotations): how slowly the node comes up. */
  bringUp?: NodeSpecOptions['bringUp'];
  /** Taints the node registers with besides the verification taint and the foreign one (a CNI agent's startup taint). */
  taints?: k8s.V1Taint[];
}

export interface Ctx {
  cluster: Cluster;
  monitor: Monitor;
  random: Rng;
  quick: boolean;
  log: (line: string) => void;
  /** Resolves once every node of the burst has been created. */
  burstCreated: Promise<void>;
  /** The nodes of the burst. */
  plans: readonly NodePlan[];
  /** Creates a node of the run (foreign marks included) and registers the expectations. */
  createNode: (plan: NodePlan) => Promise<void>;
  /** Deletes a node as "someone else" (not a controller deletion). */
  deleteNode: (name: string) => Promise<void>;
  /** What the foreign writer wrote to a node at resourceVersion rv: the end state must match the newest. */
  expectForeign: (node: string, change: Partial<ForeignState>, rv: number) => void;
  /** Records whether the fault did what the scenario is about (a premise: not met makes the run inconclusive, not violated). */
  premise: (p: Premise) => void;
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
  /** Nodes in the burst with --quick (default: a third of `nodes`, at least 9). */
  quickNodes?: number;
  /** Every node of the burst is healthy (no faulty share). */
  allHealthy?: boolean;
  /** Create the burst at this many nodes a second, in order, instead of in four waves 2 s apart. */
  createPerSecond?: number;
  /** Containers on the run's nodes start this late (sandbox start-delay), so workers stay live long enough to be disturbed. */
  startDelay?: string;
  /** Per node of the run (the burst and the two that join afterwards), in order, from the run's seed: bring-up knobs and extra taints. */
  node?: (name: string, random: Rng) => Pick<NodePlan, 'bringUp' | 'taints'>;
  /** Changes to the suite's controller configuration (chaosConfig()), merged into it. */
  config?: (quick: boolean) => Record<string, unknown>;
  /** Print a progress line this often (long scenarios). */
  progressEveryMs?: number;
  /**
   * Restart a replica that exits on its own within a second for the whole run, as its Deployment
   * would (Cluster.keepUp()); other scenarios restart exited replicas once, when the fault ends.
   */
  keepReplicasUp?: boolean;
  /** Runs the fault; resolves when it is over. */
  fault: (ctx: Ctx) => Promise<void>;
  /**
   * The scenario's own promise, judged after the run (invariant `promise`), beyond the six that
   * hold everywhere; also returns what it observed, for the results JSON.
   */
  judge?: (j: PromiseInput) => PromiseVerdict;
}

/** What a scenario's judge() gets. */
export interface PromiseInput {
  monitor: Monitor;
  /** Core/v1 Events about the run's nodes, listed after the run. */
  events: k8s.CoreV1Event[];
  quick: boolean;
  /** Node UIDs the scenario deleted itself. */
  scenarioDeleted: Set<string>;
  /** The controller configuration the replicas ran with (chaosConfig() and the scenario's changes). */
  config: Record<string, unknown>;
}

export interface PromiseVerdict {
  /** One line per broken promise. */
  violations: string[];
  /** What had to happen for the promise to be tested (a premise not met is no violation: the run is inconclusive). */
  premises?: Premise[];
  /** A few lines for the console: what was seen. */
  summary: string[];
  /** Details for the results JSON. */
  observed: Record<string, unknown>;
}

export interface Violation {
  invariant: Invariant;
  detail: string;
}

/** The six invariants every scenario is judged by, and `promise`: what the scenario itself promises (its judge()). */
export type Invariant = 'wrongOpen' | 'lost' | 'duplicates' | 'wrongDelete' | 'foreignDamage' | 'recovery' | 'promise';
export const INVARIANTS: Invariant[] = ['wrongOpen', 'lost', 'duplicates', 'wrongDelete', 'foreignDamage', 'recovery', 'promise'];

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
  /** What the scenario needed to happen (its fault's and its promise's premises), as measured. */
  premises: Premise[];
  /** violated (a broken promise), inconclusive (nothing broken, a premise not met) or pass. */
  verdict: Verdict;
  /** 1, or 2 and up for a run again after an inconclusive one. */
  run: number;
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
  /** The scenario's changes to the suite's controller configuration. */
  configOverride?: Record<string, unknown>;
  /** keepReplicasUp scenarios: replicas that exited on their own (lost their Lease) and were started again. */
  replicaRestarts?: number;
  /** Scenarios with a judge(): what it saw (violations are in `details`, invariant `promise`). */
  promise?: { summary: string[]; observed: Record<string, unknown> };
}

const FAULT_OF: Record<Fault, Parameters<typeof simulatedNode>[0]['faults']> = {
  dns: { dns: 'dead' },
  garbage: { terminationMessage: 'garbage' },
  'never-start': { neverStart: true },
};

export async function runScenario(env: ChaosEnv, s: Scenario, opts: { quick: boolean; random: Rng; seed: number; nodes?: number; run?: number }): Promise<ScenarioResult> {
  const started = Date.now();
  const log = (line: string) => env.out(`[${s.name}] ${line}`);
  const runId = `${s.name}-${started}`;
  const configOverride = s.config?.(opts.quick);
  log(`starting the sandbox and two controller replicas${configOverride ? `, configuration changes ${JSON.stringify(configOverride)}` : ''}`);
  const cluster = await Cluster.start(env, s.name, configOverride);
  const monitor = new Monitor(cluster.kc, { nodeSelector: `${RUN_LABEL}=${runId}`, namespace: NAMESPACE, taintKey: TAINT.key, verifiedLabel: VERIFIED_LABEL, conditionType: CONDITION_TYPE, lease: LEASE });
  const foreign = new Map<string, ForeignState>();
  const scenarioDeleted = new Set<string>();
  const faultPremises: Premise[] = [];
  let progress: NodeJS.Timeout | undefined;
  try {
    await Promise.all([cluster.startReplica(0), cluster.startReplica(1)]);
    await waitUntil(async () => (await cluster.leader()) !== undefined, 60_000, 'a leader to be elected');
    await monitor.start();
    if (s.keepReplicasUp) cluster.keepUp(log);

    let created = 0;
    const createNode = async (plan: NodePlan) => {
      const faults = Object.assign(s.startDelay ? { startDelay: s.startDelay } : {}, ...plan.faults.map((f) => FAULT_OF[f])) as Parameters<typeof simulatedNode>[0]['faults'];
      const state: ForeignState = {
        labels: { [FOREIGN.label]: 'blue' },
        annotations: { [FOREIGN.annotation]: 'keep me' },
        taints: [{ ...FOREIGN.taint }],
      };
      foreign.set(plan.name, state);
      const body = simulatedNode({
        name: plan.name,
        labels: { [RUN_LABEL]: runId, ...state.labels },
        annotations: state.annotations,
        taints: [TAINT, ...state.taints, ...(plan.taints ?? [])],
        faults,
        ...(plan.bringUp ? { bringUp: plan.bringUp } : {}),
      });
      for (let i = 0; ; i++) {
        try {
          await cluster.core.createNode({ body });
          created++;
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

    // The burst: a mix of healthy and faulty nodes (or all healthy), created in waves while the fault runs.
    const size = opts.nodes ?? (opts.quick ? (s.quickNodes ?? Math.max(9, Math.round((s.nodes ?? 36) / 3))) : (s.nodes ?? 36));
    const plans = burstPlan(runId, size, opts.random, { faulty: !s.allHealthy });
    const after: NodePlan[] = [0, 1].map((i) => ({ name: `${runId}-after-${i}`, faults: [] }));
    if (s.node) for (const p of [...plans, ...after]) Object.assign(p, s.node(p.name, opts.random));
    let markCreated: () => void = () => {};
    const burstCreated = new Promise<void>((r) => (markCreated = r));
    const ctx: Ctx = {
      cluster,
      monitor,
      random: opts.random,
      quick: opts.quick,
      log,
      burstCreated,
      plans,
      createNode,
      deleteNode,
      expectForeign: (node, change, rv) => {
        const cur = foreign.get(node);
        if (cur && rv > (cur.rv ?? 0)) foreign.set(node, { ...cur, ...change, rv });
      },
      premise: (p) => {
        faultPremises.push(p);
        log(`premise ${p.met ? 'met' : 'NOT MET'}: ${p.what}: ${p.measured}`);
      },
      sleep,
    };
    const waves = 4;
    const rate = s.createPerSecond;
    const creating = (async () => {
      if (rate) {
        const t0 = Date.now();
        await pool(plans, 50, async (plan, i) => {
          await sleep(t0 + (i * 1000) / rate - Date.now());
          await createNode(plan);
        });
      } else {
        for (let w = 0; w < waves; w++) {
          // At most 50 creations in flight, as the bench's 1000-node bursts do: more only queue in the apiserver.
          await pool(plans.filter((_, i) => i % waves === w), 50, createNode);
          if (w < waves - 1) await sleep(2000);
        }
      }
      markCreated();
    })();
    log(`burst of ${size} nodes (${plans.filter((p) => p.faults.length > 0).length} faulty) ${rate ? `at ${rate} a second` : `in ${waves} waves`}, fault: ${s.what}`);
    if (s.progressEveryMs) progress = setInterval(() => log(progressLine(monitor, created, plans.length + after.length)), s.progressEveryMs);
    const faultStart = Date.now();
    await Promise.all([s.fault(ctx), creating]);
    const faultEnd = Date.now();
    log(`fault over after ${((faultEnd - faultStart) / 1000).toFixed(1)}s; two healthy nodes join now`);
    await cluster.reviveExited();
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
    clearInterval(progress);
    monitor.stop();
    const config = mergeConfig(chaosConfig(0), configOverride ?? {});
    const promise = s.judge?.({ monitor, events: await monitor.nodeEvents(), quick: opts.quick, scenarioDeleted, config });
    const result = judge({ s, monitor, foreign, scenarioDeleted, faultStart, faultEnd, started, settleMs, seed: opts.seed, failsAllBefore, promise });
    const premises = [...faultPremises, ...(promise?.premises ?? [])];
    return {
      ...result,
      premises,
      verdict: verdictOf({ violations: result.violations, premises }),
      run: opts.run ?? 1,
      ...(configOverride ? { configOverride } : {}),
      ...(s.keepReplicasUp ? { replicaRestarts: cluster.restarts } : {}),
      ...(promise ? { promise: { summary: promise.summary, observed: promise.observed } } : {}),
    };
  } finally {
    clearInterval(progress);
    monitor.stop();
    await cluster.stop().catch((err: unknown) => log(`stopping the cluster: ${String(err)}`));
  }
}

/**
 * The burst: about three quarters healthy, the rest split between DNS down, garbage results and pods
 * that never start. Below the circuit breaker's 30 %, so in most scenarios the hourly limit is the
 * guard that holds remediation back (the dns-outage scenario is the breaker's).
 */
export function burstPlan(runId: string, size: number, random: Rng, opts: { faulty: boolean } = { faulty: true }): NodePlan[] {
  const faulty: Fault[] = [];
  const each = opts.faulty ? Math.max(1, Math.round(size * 0.07)) : 0;
  for (let i = 0; i < each; i++) faulty.push('dns', 'garbage', 'never-start');
  const plans: NodePlan[] = Array.from({ length: size }, (_, i) => ({ name: `${runId}-${String(i).padStart(3, '0')}`, faults: i < faulty.length ? [faulty[i]!] : [] }));
  return random.shuffle(plans);
}

/** The phase in the node's NodeVerification, as last seen. */
const phaseOf = (n: NodeRecord): string | undefined => n.verification?.phase;

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
  /** The scenario's own verdict (its judge()), if it has one. */
  promise?: PromiseVerdict;
}

export function judge(j: JudgeInput): Omit<ScenarioResult, 'premises' | 'verdict' | 'run'> {
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
  //    Nor an attempt number used twice for one node UID: the attempt in its NodeVerification never goes back.
  for (const n of nodes) {
    const back = n.progress.find((p, i) => p.attempt !== undefined && n.progress.slice(0, i).some((q) => (q.attempt ?? 0) > p.attempt!));
    if (back) v('duplicates', `${n.name} (uid ${n.uid}): the attempt in its NodeVerification went back: ${n.progress.map((p) => `${p.phase}/${p.attempt}/${p.failures}`).join(' -> ')} (phase/attempt/failures)`);
  }

  // 4. No wrong deletion, guards held.
  const controllerDeleted = nodes.filter((n) => n.deleted !== undefined && !j.scenarioDeleted.has(n.uid));
  for (const n of controllerDeleted) {
    const failed = phaseOf(n) === 'Failed';
    const ready = n.last.status?.conditions?.find((c) => c.type === 'Ready');
    const blocked =
      `could not run a worker for ${Math.round(Monitor.cannotRunMs(n, n.deleted!) / 1000)}s of its ${Math.round((n.deleted! - n.firstSeen) / 1000)}s; ` +
      `last seen Ready ${ready ? `${ready.status} (${ready.reason ?? ''})` : 'never reported by its kubelet'}`;
    if (n.faults.length === 0 && !j.s.failsAll) v('wrongDelete', `${n.name} was deleted but is healthy (phase ${phaseOf(n) ?? 'none'}; ${blocked})`);
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

  // 7. The scenario's own promise.
  for (const detail of j.promise?.violations ?? []) v('promise', detail);

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


/** One line on where the run stands, for long scenarios. */
function progressLine(monitor: Monitor, created: number, planned: number): string {
  const nodes = [...monitor.nodes.values()];
  const present = nodes.filter((n) => n.deleted === undefined);
  const pods = [...monitor.pods.values()];
  const hadWorker = new Set(pods.map((p) => p.nodeUid));
  const liveWorker = new Set(pods.filter((p) => p.deleted === undefined && p.terminal === undefined).map((p) => p.nodeUid));
  const closed = present.filter((n) => n.opened === undefined);
  const noWorkerYet = closed.filter((n) => !hadWorker.has(n.uid));
  const queued = noWorkerYet.filter((n) => monitor.canRunWorker(n.last)).length;
  const failed = present.filter((n) => phaseOf(n) === 'Failed').length;
  return (
    `progress: ${created}/${planned} nodes created, ${nodes.filter((n) => n.opened !== undefined).length} opened, ` +
    `${closed.filter((n) => liveWorker.has(n.uid)).length} verifying, ${queued} queued (can run a worker, none yet), ` +
    `${noWorkerYet.length - queued} cannot run one (not Ready, a taint), ${failed} failed, ${nodes.length - present.length} deleted, ${liveWorker.size} live workers`
  );
}

// ---------------------------------------------------------------------------------------------
// Promises a scenario can judge (its judge()): building blocks, combined with allOf().

/**
 * The controller says a node waits (condition WaitingForNode, Event VerificationWaitingForNode)
 * once the node is this old: nodes usually turn Ready within seconds, and a burst is spared two
 * writes per node (WAITING_REPORT_AFTER_MS in verification/controller.ts).
 */
export const WAIT_REPORTED_AFTER_MS = 10_000;

/** Event reasons that record a failed or inconclusive attempt, a failed verification, or a node that never became launchable. */
const FAILURE_REASONS = new Set<string>([
  Reason.VerificationChecksFailed,
  Reason.VerificationWorkerError,
  Reason.VerificationWorkerNotScheduled,
  Reason.VerificationWorkerNotStarted,
  Reason.VerificationDeadlineExceeded,
  Reason.VerificationWorkerPodDeleted,
  Reason.VerificationInconclusive,
  Reason.VerificationFailed,
  Reason.NodeNotLaunchable,
  Reason.WorkerPodRefused,
]);

/** Nodes of the run created healthy, and not deleted by the scenario itself. */
const healthyNodes = (j: PromiseInput): NodeRecord[] => [...j.monitor.nodes.values()].filter((n) => n.faults.length === 0 && !j.scenarioDeleted.has(n.uid));
const eventsOf = (j: PromiseInput, node: string): k8s.CoreV1Event[] => j.events.filter((e) => e.involvedObject?.name === node);
const secs = (ms: number): number => Math.round(ms / 100) / 10;
const range = (xs: number[]): string => (xs.length === 0 ? '-' : `${secs(Math.min(...xs))}-${secs(Math.max(...xs))} s`);

export function allOf(...verdicts: PromiseVerdict[]): PromiseVerdict {
  return {
    violations: verdicts.flatMap((v) => v.violations),
    premises: verdicts.flatMap((v) => v.premises ?? []),
    summary: verdicts.flatMap((v) => v.summary),
    observed: Object.assign({}, ...verdicts.map((v) => v.observed)) as Record<string, unknown>,
  };
}

/**
 * Every healthy node opened at its first attempt, and none recorded a failed one: an open node's
 * NodeVerification ends at attempt 1, failures 0, phase Passed; no node's progress went through
 * Backoff or Failed; one worker pod per node, none that ended without exit 0; no Event of a failed
 * attempt. (That a node opened at all is the `lost` invariant's.)
 */
export function opensAtFirstAttempt(j: PromiseInput): PromiseVerdict {
  const violations: string[] = [];
  const attempts: Record<string, number> = {};
  let failureEvents = 0;
  const nodes = healthyNodes(j).filter((n) => n.deleted === undefined);
  for (const n of nodes) {
    const s = n.verification;
    const attempt = s?.attempt === undefined ? 'none' : String(s.attempt);
    const problems: string[] = [];
    if (n.opened !== undefined) {
      attempts[attempt] = (attempts[attempt] ?? 0) + 1;
      if (attempt !== '1' || s?.failures !== 0 || s.phase !== 'Passed') {
        problems.push(`opened with attempt ${attempt}, failures ${s?.failures ?? 'none'}, phase ${s?.phase ?? 'none'}`);
      }
    }
    const detour = n.progress.filter((p) => p.phase === 'Backoff' || p.phase === 'Failed' || (p.failures ?? 0) !== 0);
    if (detour.length > 0) problems.push(`progress went ${n.progress.map((p) => `${p.phase}/${p.attempt}/${p.failures}`).join(' -> ')} (phase/attempt/failures)`);
    const pods = [...j.monitor.pods.values()].filter((p) => p.nodeUid === n.uid);
    const unseen = n.opened !== undefined && j.monitor.podWatchGapWithin(n.firstSeen, n.opened);
    if (pods.length > 1 || (pods.length === 0 && n.opened !== undefined && !unseen)) problems.push(`${pods.length} worker pods (${pods.map((p) => p.name).join(', ')}), want 1`);
    const failedPods = pods.filter((p) => p.terminal !== undefined && !p.exitedZero);
    if (failedPods.length > 0) problems.push(`worker pods that did not exit 0: ${failedPods.map((p) => p.name).join(', ')}`);
    const failed = eventsOf(j, n.name).filter((e) => FAILURE_REASONS.has(e.reason ?? ''));
    failureEvents += failed.length;
    for (const e of failed) problems.push(`Event ${e.reason}: ${e.message ?? ''}`);
    if (problems.length > 0) violations.push(`${n.name} ${n.opened !== undefined ? 'did not open at its first attempt' : 'recorded a failed attempt'}: ${problems.join('; ')}`);
  }
  const first = attempts['1'] ?? 0;
  const open = nodes.filter((n) => n.opened !== undefined).length;
  return {
    violations,
    summary: [`${first} of ${nodes.length} healthy nodes opened at attempt 1 (${open} opened in all); ${violations.length} with a failed attempt; ${failureEvents} Events of failed attempts`],
    observed: { openedAtAttempt: attempts, failedAttemptEvents: failureEvents },
  };
}

/**
 * Every healthy node that could not run a worker for at least WAIT_REPORTED_AFTER_MS + slackMs after
 * it appeared (NotReady, a CNI agent's startup taint) was seen with the condition reason
 * WaitingForNode and a non-empty "waiting for: ..." in its message. Nodes that could run one sooner
 * may have opened before the controller says anything (by design), and are only recorded. The
 * premise is checked too: at least one node must have had to wait that long.
 */
export function waitsAreExplained(j: PromiseInput, slackMs: number): PromiseVerdict {
  const violations: string[] = [];
  const threshold = WAIT_REPORTED_AFTER_MS + slackMs;
  const rows: Array<Record<string, unknown>> = [];
  const texts = new Map<string, number>();
  const required: number[] = [];
  const sooner: number[] = [];
  let seenRequired = 0;
  let seenSooner = 0;
  for (const n of healthyNodes(j)) {
    const blockedMs = (n.launchable ?? n.deleted ?? Date.now()) - n.firstSeen;
    const mustReport = n.launchable === undefined || blockedMs >= threshold;
    const waiting = n.conditions.find((c) => c.reason === ConditionReason.WaitingForNode);
    const waitingFor = waiting ? (/waiting for: (.*)$/s.exec(waiting.message)?.[1]?.trim() ?? '') : undefined;
    const said = waitingFor !== undefined && waitingFor !== '';
    const waitEvents = eventsOf(j, n.name).filter((e) => e.reason === Reason.VerificationWaitingForNode);
    (mustReport ? required : sooner).push(blockedMs);
    if (said && mustReport) seenRequired++;
    if (said && !mustReport) seenSooner++;
    if (said) for (const part of waitingFor.split('; ')) texts.set(part, (texts.get(part) ?? 0) + 1);
    rows.push({
      node: n.name,
      cannotRunWorkerS: secs(blockedMs),
      ...(waiting ? { waitingSeenAfterS: secs(waiting.t - n.firstSeen), waitingFor } : {}),
      waitingEvents: waitEvents.length,
      conditions: n.conditions.map((c) => `${secs(c.t - n.firstSeen)}s ${c.status} ${c.reason}`),
    });
    if (mustReport && !said) {
      const seen = n.conditions.map((c) => `${c.status} ${c.reason} at ${secs(c.t - n.firstSeen)}s: ${c.message}`).join(' | ') || 'none';
      violations.push(
        `${n.name} could not run a worker for ${secs(blockedMs)} s${n.launchable === undefined ? ' (never, while watched)' : ''} but was never seen waiting with a reason (conditions seen: ${seen}; ${waitEvents.length} ${Reason.VerificationWaitingForNode} Events)`,
      );
    }
  }
  const top = [...texts].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([t, c]) => `${c}x "${t}"`);
  const longest = required.length > 0 ? Math.max(...required) : sooner.length > 0 ? Math.max(...sooner) : 0;
  return {
    violations,
    premises: [{ what: `a node was kept from running a worker for ${threshold / 1000} s or more`, met: required.length > 0, measured: `${required.length} nodes, longest ${secs(longest)} s` }],
    summary: [
      `${seenRequired} of ${required.length} nodes kept from running a worker for ${threshold / 1000} s or more (${range(required)}) were seen waiting with a reason; ` +
        `${sooner.length} could run one sooner (${range(sooner)}; a wait is reported after ${WAIT_REPORTED_AFTER_MS / 1000} s), ${seenSooner} of them seen waiting`,
      `waiting for: ${top.join(', ') || 'nothing seen'}`,
    ],
    observed: { waitReportedAfterMs: WAIT_REPORTED_AFTER_MS, judgedFromMs: threshold, waiting: rows },
  };
}

/**
 * No node was taken for stuck for waiting its turn: every Remediation* Event (deleted, blocked,
 * skipped, dry run: each means the remediator took the node for failed or stuck) on a node that,
 * until then, could not run a worker (not Ready, a startup taint) for less than stuckNodeTimeout is a
 * violation: the rest of its stuck time was its wait for a slot. A node that could not run one for
 * stuckNodeTimeout is stuck by the rule's own terms (recorded, not a violation here; a deletion of
 * it is still `wrongDelete`'s). Premise: some node waited longer than stuckNodeTimeout for its
 * worker under one leader (the stuck clock starts again with every new leader, so only time waited
 * under the leader that launched the worker counts).
 */
export function neverRemediatedWhileQueued(j: PromiseInput): PromiseVerdict {
  const violations: string[] = [];
  const remediation = (j.config.nodeManagement as { remediation?: { stuckNodeTimeout?: string } } | undefined)?.remediation;
  // The product's default when the scenario sets none.
  const stuckNodeTimeoutMs = parseDuration(remediation?.stuckNodeTimeout ?? '1h');
  const nodes = healthyNodes(j);
  const names = new Set(nodes.map((n) => n.name));
  const remediated = j.events.filter((e) => (e.reason ?? '').startsWith('Remediation') && names.has(e.involvedObject?.name ?? ''));
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const notLaunchable: Array<Record<string, unknown>> = [];
  const slack = 5_000;
  for (const e of remediated) {
    const n = byName.get(e.involvedObject?.name ?? '')!;
    const at = new Date(e.firstTimestamp ?? e.eventTime ?? e.lastTimestamp ?? Date.now()).getTime();
    const blockedMs = Monitor.cannotRunMs(n, at);
    const what = `Event ${e.reason} (${e.count ?? 1}x) ${secs(at - n.firstSeen)} s after the node appeared, which could not run a worker for ${secs(blockedMs)} s of them`;
    if (blockedMs + slack >= stuckNodeTimeoutMs) notLaunchable.push({ node: n.name, reason: e.reason, afterS: secs(at - n.firstSeen), cannotRunS: secs(blockedMs), message: e.message });
    else violations.push(`${n.name}: ${what}: ${e.message ?? ''}`);
  }
  const firstPod = new Map<string, number>();
  for (const p of j.monitor.pods.values()) firstPod.set(p.nodeUid, Math.min(firstPod.get(p.nodeUid) ?? Infinity, p.created));
  // How long nodes took to become able to run a worker: the sandbox's kubelet registers them late under load.
  const comingUp = nodes.map((n) => (n.launchable ?? n.deleted ?? Date.now()) - n.firstSeen).sort((a, b) => a - b);
  const waits: number[] = [];
  const underOneLeader: number[] = [];
  for (const n of nodes) {
    const launched = firstPod.get(n.uid);
    if (launched === undefined) continue;
    waits.push(launched - n.firstSeen);
    underOneLeader.push(launched - Math.max(n.firstSeen, j.monitor.leaderSince(launched) ?? launched));
  }
  waits.sort((a, b) => a - b);
  underOneLeader.sort((a, b) => a - b);
  const longest = waits.at(-1) ?? 0;
  const longestUnderOne = underOneLeader.at(-1) ?? 0;
  const longer = underOneLeader.filter((w) => w > stuckNodeTimeoutMs).length;
  const median = waits[Math.floor(waits.length / 2)] ?? 0;
  const first = j.monitor.leaderTerms[0]?.t ?? 0;
  return {
    violations,
    premises: [
      {
        what: `a node waited longer than stuckNodeTimeout (${stuckNodeTimeoutMs / 1000} s) for its worker under one leader`,
        met: longer > 0,
        measured: `${longer} nodes; longest ${secs(longestUnderOne)} s under one leader, ${secs(longest)} s across ${j.monitor.leaderTerms.length} leader terms`,
      },
    ],
    summary: [
      `${longer} of ${waits.length} nodes waited longer than stuckNodeTimeout (${stuckNodeTimeoutMs / 1000} s) for their worker under one leader (longest ${secs(longestUnderOne)} s; ` +
        `across leaders median ${secs(median)} s, longest ${secs(longest)} s; ${j.monitor.leaderTerms.length} leader terms); ${remediated.length} Remediation Events, ` +
        `${notLaunchable.length} of them on nodes that could not run a worker for stuckNodeTimeout (stuck by the rule's terms)`,
    ],
    observed: {
      stuckNodeTimeoutMs,
      waitForWorkerMs: { p50: median, p90: waits[Math.floor(waits.length * 0.9)] ?? 0, max: longest, nodes: waits.length },
      waitUnderOneLeaderMs: { max: longestUnderOne, longerThanStuckTimeout: longer },
      cannotRunWorkerAtFirstMs: { p50: comingUp[Math.floor(comingUp.length / 2)] ?? 0, p99: comingUp[Math.floor(comingUp.length * 0.99)] ?? 0, max: comingUp.at(-1) ?? 0 },
      leaderTerms: j.monitor.leaderTerms.map((t) => ({ afterS: secs(t.t - first), holder: t.holder })),
      remediationEvents: remediated.map((e) => ({ node: e.involvedObject?.name, reason: e.reason, message: e.message, count: e.count })),
      remediatedWhileNotLaunchable: notLaunchable,
    },
  };
}

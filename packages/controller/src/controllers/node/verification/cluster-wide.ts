import { formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import type { V1Node } from '@kubernetes/client-node';
import type { ControlVerdict } from './control.js';
import { bounded } from './pod-result.js';
import type { StateRead } from './store.js';
import type { CheckSummary } from './summary.js';
import { Outcome, type Failing } from './types.js';

/** How far back failures of other nodes count. */
export const CLUSTER_WIDE_WINDOW_MS = 10 * 60_000;
/** Other nodes that must fail the same check against the same target for a fault to look cluster-wide. */
export const CLUSTER_WIDE_MIN_OTHER_NODES = 2;
/** Most failures remembered; the oldest go first (bounds memory on a cluster full of failing nodes). */
export const CLUSTER_WIDE_MAX_ENTRIES = 2000;

/**
 * Direct evidence that a failed check's dependency is down for every node, not just this one: read
 * from the cluster (the cluster DNS Service has no ready endpoint) or from the worker's answer (the
 * API server answered 429 or 5xx: the node reached it, the API refused).
 */
export interface Evidence {
  /** The failed check it explains. */
  check: string;
  /** One clause: `the cluster DNS Service kube-system/kube-dns has no ready endpoint`. */
  why: string;
  /** The Services (`namespace/name`) without a ready endpoint it is about: one clause per Service in the message. */
  services?: readonly string[];
}

/** The API server's answer about itself: overloaded (429) or failing (5xx). Other statuses (401, 403, 404) are this node's or our configuration's. */
export function apiRefused(status: number | undefined): boolean {
  return status === 429 || (status !== undefined && status >= 500 && status <= 599);
}

/**
 * Evidence in the summary itself: the checks that failed on the API answering 429 or 5xx, and those
 * that failed only because a Service has no ready endpoint (the worker read it from the API: which
 * endpoints are ready is the cluster's state, the same from every node).
 */
export function evidenceInSummary(checks: readonly CheckSummary[]): Evidence[] {
  return checks.flatMap((c): Evidence[] => {
    if (c.ok) return [];
    if (apiRefused(c.httpStatus)) return [{ check: c.name, why: `the API server answered HTTP ${c.httpStatus} to the ${c.name} check` }];
    const services = c.noReadyEndpoints ?? [];
    if (services.length > 0) return [{ check: c.name, services, why: `${services.length === 1 ? 'the Service' : 'the Services'} ${services.join(', ')} ${services.length === 1 ? 'has' : 'have'} no ready endpoint (read from the API by the ${c.name} check)` }];
    return [];
  });
}

/** What a Node's state says of its recent past (ClusterWideFailures.restore). */
export interface NodeHistory {
  node: string;
  /** When it passed (its state's verifiedAt). */
  passedAt?: number;
  /** Its failing streak, while it fails. */
  failing?: Failing;
}

/** Each node's recent past as its NodeVerification records it (ClusterWideFailures.restore). */
export function nodeHistory(nodes: readonly V1Node[], progress: { read(node: V1Node): StateRead }): NodeHistory[] {
  return nodes.flatMap((node) => {
    const read = progress.read(node);
    if (read.kind !== 'ok') return [];
    const h: NodeHistory = { node: node.metadata?.name ?? '' };
    if (read.state.verifiedAt !== undefined) h.passedAt = read.state.verifiedAt;
    if (read.state.failing !== undefined) h.failing = read.state.failing;
    return [h];
  });
}

/** One check of one node failing against one target: several nodes sharing it point at the target, not the nodes. */
export interface SharedFailure {
  check: string;
  target: string;
  /** Distinct nodes that failed it in the window, this one included. */
  nodes: number;
  /** Nodes that passed since this fault was first seen in the window (and did not fail it since). */
  passedSince: number;
  /** More nodes failed it than passed since it began: the fault is outside the nodes (attempt inconclusive). */
  most: boolean;
}

/**
 * Recent failed checks as (check, target, node) with the time last seen, in a sliding window.
 * Pure apart from the injected clock. Recording the same node again (a retried write of the same
 * attempt, or its next attempt) only moves its time: a node counts once per check and target.
 */
export class ClusterWideFailures {
  /** Key `check \n target \n node`, in insertion order (oldest first), re-inserted when seen again. */
  private readonly seen = new Map<string, { check: string; target: string; node: string; at: number }>();
  /** Nodes whose latest attempt passed, with its time, in insertion order (oldest first). */
  private readonly passed = new Map<string, number>();
  /** Key `check \n target`: when it was first seen failing (while any node's failure of it is in the window). */
  private readonly since = new Map<string, number>();
  /** Checks an attempt was inconclusive on (the cluster-wide signal), until a node passes them or the window passes. */
  private readonly faults = new Map<string, { since: number; last: number; why: string }>();

  constructor(
    private readonly clock: Pick<Clock, 'now'>,
    private readonly opts: { windowMs: number; minOtherNodes: number; maxEntries: number } = {
      windowMs: CLUSTER_WIDE_WINDOW_MS,
      minOtherNodes: CLUSTER_WIDE_MIN_OTHER_NODES,
      maxEntries: CLUSTER_WIDE_MAX_ENTRIES,
    },
  ) {}

  get windowMs(): number {
    return this.opts.windowMs;
  }

  /**
   * Records the failed checks of `node` that name a target, and returns those that at least
   * minOtherNodes other nodes failed against the same target in the window.
   */
  record(node: string, checks: readonly CheckSummary[]): SharedFailure[] {
    const now = this.clock.now();
    this.prune(now);
    const shared: SharedFailure[] = [];
    for (const { name: check, target } of checks.filter((c) => !c.ok && c.target !== undefined && c.target !== '')) {
      if (target === undefined) continue;
      const key = `${check}\n${target}\n${node}`;
      this.seen.delete(key);
      while (this.seen.size >= this.opts.maxEntries) this.seen.delete(this.seen.keys().next().value as string);
      this.seen.set(key, { check, target, node, at: now });
      if (!this.since.has(`${check}\n${target}`)) this.since.set(`${check}\n${target}`, now);
      this.passed.delete(node);
      const nodes = this.nodesFailing(check, target);
      if (nodes - 1 < this.opts.minOtherNodes) continue;
      const began = this.since.get(`${check}\n${target}`) ?? now;
      let passedSince = 0;
      for (const at of this.passed.values()) if (at >= began) passedSince++;
      shared.push({ check, target, nodes, passedSince, most: nodes > passedSince });
    }
    return shared;
  }

  /**
   * A new leader takes over the recent past its predecessor wrote on the Nodes: when each node
   * passed, and since when each failing node fails which checks against which target. Without it
   * a new leader knows only the failures it sees itself, and a few nodes still failing at the end
   * of a burst (every healthy one opened under the old leader) look like a fault of most nodes.
   * What is older than the window is left out; what this memory already holds is kept.
   */
  restore(history: readonly NodeHistory[]): { passes: number; failing: number } {
    const now = this.clock.now();
    const recent = (at: number) => now - at < this.opts.windowMs;
    const passes = [...this.passed].map(([node, at]) => ({ node, at }));
    const seen = [...this.seen.values()];
    let failing = 0;
    for (const { node, passedAt, failing: f } of history) {
      if (f !== undefined) {
        if (!recent(f.at)) continue;
        failing++;
        for (const [check, target] of Object.entries(f.checks)) {
          if (this.seen.has(`${check}\n${target}\n${node}`)) continue;
          seen.push({ check, target, node, at: f.at });
          const key = `${check}\n${target}`;
          this.since.set(key, Math.min(this.since.get(key) ?? f.since, f.since));
        }
      } else if (passedAt !== undefined && recent(passedAt) && !this.passed.has(node)) {
        passes.push({ node, at: passedAt });
      }
    }
    // Both maps stay in time order (prune relies on it), the newest kept within the bound.
    this.passed.clear();
    for (const p of passes.sort((a, b) => a.at - b.at).slice(-this.opts.maxEntries)) this.passed.set(p.node, p.at);
    this.seen.clear();
    for (const e of seen.sort((a, b) => a.at - b.at).slice(-this.opts.maxEntries)) this.seen.set(`${e.check}\n${e.target}\n${e.node}`, e);
    this.prune(now);
    return { passes: this.passed.size, failing };
  }

  /** `node` passed: it counts against a fault looking cluster-wide while that fault's failures are in the window. */
  recordPass(node: string): void {
    const now = this.clock.now();
    this.prune(now);
    this.passed.delete(node);
    while (this.passed.size >= this.opts.maxEntries) this.passed.delete(this.passed.keys().next().value as string);
    this.passed.set(node, now);
  }

  /**
   * An attempt was inconclusive because of `check` (the dependency behind it is down): raises the
   * cluster-wide signal for it. Returns true when it was not raised before.
   */
  raise(check: string, why: string): boolean {
    const now = this.clock.now();
    this.prune(now);
    const fault = this.faults.get(check);
    this.faults.set(check, { since: fault?.since ?? now, last: now, why });
    return fault === undefined;
  }

  /** A node passed these checks: their dependency works again. Returns the checks whose signal this cleared. */
  working(checks: readonly string[]): string[] {
    this.prune(this.clock.now());
    return checks.filter((check) => this.faults.delete(check));
  }

  /** The raised signals: check -> since when, and the latest reason. Cleared by a pass, or after the window without an inconclusive attempt. */
  activeFaults(): ReadonlyMap<string, { since: number; why: string }> {
    this.prune(this.clock.now());
    return this.faults;
  }

  /** Per check: the most distinct nodes failing it against one target in the window (for the gauge). */
  maxNodesByCheck(): Map<string, number> {
    this.prune(this.clock.now());
    const perTarget = new Map<string, { check: string; nodes: number }>();
    for (const { check, target } of this.seen.values()) {
      const key = `${check}\n${target}`;
      const entry = perTarget.get(key) ?? { check, nodes: 0 };
      entry.nodes++;
      perTarget.set(key, entry);
    }
    const max = new Map<string, number>();
    for (const { check, nodes } of perTarget.values()) max.set(check, Math.max(max.get(check) ?? 0, nodes));
    return max;
  }

  private nodesFailing(check: string, target: string): number {
    let n = 0;
    for (const e of this.seen.values()) if (e.check === check && e.target === target) n++;
    return n;
  }

  /** Entries are in time order (re-inserted when seen), so the expired ones are at the front. */
  private prune(now: number): void {
    for (const [key, e] of this.seen) {
      if (now - e.at < this.opts.windowMs) break;
      this.seen.delete(key);
    }
    for (const [node, at] of this.passed) {
      if (now - at < this.opts.windowMs) break;
      this.passed.delete(node);
    }
    for (const [check, fault] of this.faults) if (now - fault.last >= this.opts.windowMs) this.faults.delete(check);
    for (const key of this.since.keys()) {
      const [check, target] = key.split('\n') as [string, string];
      if (this.nodesFailing(check, target) === 0) this.since.delete(key);
    }
  }
}

/**
 * The line put first in a failed attempt's message (so it survives truncation):
 * `cluster-wide? dns against 10.96.0.10:53 is failing on 5 nodes in the last 10m (this one and 4 others): `.
 */
export function clusterWidePrefix(shared: readonly SharedFailure[], windowMs: number): string {
  if (shared.length === 0) return '';
  const window = formatDuration(windowMs);
  const parts = shared.map((s) => `${s.check} against ${s.target} is failing on ${s.nodes} nodes in the last ${window} (this one and ${s.nodes - 1} others)`);
  return `cluster-wide? ${parts.join('; ')}: `;
}

/** What a control run answered (control.ts) about the checks only their count made look cluster-wide. */
export type ControlAnswer = Exclude<ControlVerdict, { kind: 'pending' }>;

/** What recordVerdict did to the cluster-wide signal, for the log. */
export interface ClusterWideChange {
  /** Checks whose signal this attempt raised (it was not raised before). */
  raised: Blame[];
  /** Checks whose signal this attempt cleared (it passed them). */
  cleared: string[];
}

/** A failed check an inconclusive attempt blames on the cluster, and why. */
export interface Blame {
  check: string;
  why: string;
}

/**
 * What the cluster says about a finished attempt's failed checks, gathered before decide() (the
 * controller's judgement step): the failures other nodes share (judgeShared), the direct evidence,
 * and a control run's answer about the checks only their count makes look cluster-wide ('pending'
 * while it runs).
 */
export interface Judgement {
  shared: SharedFailure[];
  direct: Evidence[];
  most: SharedFailure[];
  windowMs: number;
  control?: ControlAnswer | 'pending';
}

/**
 * The verdict on a failed attempt, from its judgement (pure; decide() applies it). Inconclusive
 * (the attempt is not counted against the node) when the cause is outside the node: direct
 * evidence explains one of its failed checks (the cluster DNS Service has no ready endpoint, the
 * API answered 429/5xx), or more nodes failed that check against the same target since the fault
 * began than passed, unless a control run of that check on a verified node passed (control.ts:
 * then the failure is the node's own, and counts). A failure only some other nodes share is the
 * node's, and its message names them first, where truncation cannot cut it off. Undefined: the
 * judgement has nothing to say (the failure is the node's, its message unchanged).
 */
export function clusterWideVerdict(j: Judgement, message: string): { inconclusive: boolean; message: string; blamed: Blame[] } | undefined {
  const control = j.control === 'pending' ? undefined : j.control;
  // What only most nodes failing alike suggests, a control run that passed refutes.
  const refuted = control?.kind === 'passed' ? j.most.filter((s) => control.checks.includes(s.check)) : [];
  const most = j.most.filter((s) => !refuted.includes(s));
  if (j.direct.length === 0 && most.length === 0) {
    if (j.shared.length === 0) return undefined;
    const own = refuted.length > 0 && control?.kind === 'passed' ? `${controlPassedClause(refuted, control.node)}; this node's own failure: ` : '';
    return { inconclusive: false, message: bounded(own + clusterWidePrefix(j.shared, j.windowMs) + message), blamed: [] };
  }
  const blamed = [...j.direct.map((e) => ({ check: e.check, why: e.why })), ...most.map((m) => ({ check: m.check, why: sharedWhy(m, j.windowMs) }))];
  return { inconclusive: true, message: bounded(clusterWideInconclusive(j.direct, most, j.windowMs, control) + message), blamed };
}

/**
 * A completed attempt, recorded in the window once its outcome is stored: a pass (of the node, and
 * of the control node whose run passed) counts against a fault looking cluster-wide and clears the
 * signal of the checks it passed; an inconclusive attempt raises the signal (the
 * kube_node_ready_cluster_wide_fault gauge) for the checks it blamed, until a node passes them.
 */
export function recordVerdict(
  failures: ClusterWideFailures,
  node: string,
  attempt: { result: { outcome: Outcome; checks: readonly CheckSummary[] }; clusterWide?: { blamed: readonly Blame[]; control?: ControlAnswer } },
): ClusterWideChange {
  const control = attempt.clusterWide?.control;
  if (attempt.result.outcome === Outcome.Passed) failures.recordPass(node);
  // A control run that passed is a pass of those checks now, on a node that had passed them before.
  if (control?.kind === 'passed') failures.recordPass(control.node);
  const cleared = failures.working([...attempt.result.checks.filter((c) => c.ok).map((c) => c.name), ...(control?.kind === 'passed' ? control.checks : [])]);
  const raised: Blame[] = [];
  for (const blamed of attempt.clusterWide?.blamed ?? []) {
    if (failures.raise(blamed.check, blamed.why) && !raised.some((r) => r.check === blamed.check)) raised.push(blamed);
  }
  return { raised, cleared };
}

/**
 * A failed attempt's checks against the failures of other nodes: `shared` (failed against the same
 * target by at least minOtherNodes others), `direct` evidence for a failed check, and `most`: the
 * shared failures that only their count makes look cluster-wide (no direct evidence), which a
 * control run (control.ts) can confirm or refute. Records the node's failures (idempotent per node).
 */
export function judgeShared(
  failures: ClusterWideFailures,
  node: string,
  checks: readonly CheckSummary[],
  evidence: readonly Evidence[] = [],
): { shared: SharedFailure[]; direct: Evidence[]; most: SharedFailure[] } {
  const shared = failures.record(node, checks);
  const failed = new Set(checks.filter((c) => !c.ok).map((c) => c.name));
  const direct = [...evidence, ...evidenceInSummary(checks)].filter((e) => failed.has(e.check));
  // Direct evidence says it plainly; the failures of other nodes only where it says nothing.
  const most = shared.filter((s) => s.most && !direct.some((e) => e.check === s.check));
  return { shared, direct, most };
}

/** `control run: dns against 10.96.0.10:53 passed on verified node ip-10-0-1-7` */
function controlPassedClause(refuted: readonly SharedFailure[], node: string): string {
  return `control run: ${refuted.map((s) => `${s.check} against ${s.target}`).join(', ')} passed on verified node ${node}`;
}

const sharedWhy = (s: SharedFailure, windowMs: number) =>
  `${s.check} against ${s.target} failed on ${s.nodes} nodes in the last ${formatDuration(windowMs)}, and ${s.passedSince} passed since it began`;

/**
 * `cluster-wide: the cluster DNS Service kube-system/kube-dns has no ready endpoint; not this node's
 * fault: ` or `cluster-wide: dns against 10.96.0.10:53 failed on 5 nodes in the last 10m, and 0
 * passed since it began; not this node's fault: `.
 */
function clusterWideInconclusive(direct: readonly Evidence[], most: readonly SharedFailure[], windowMs: number, control?: ControlAnswer): string {
  // A Service already named (the cluster DNS Service read by the controller, then by the worker's checks) is named once.
  const named = new Set<string>();
  const clauses = direct.filter((e) => {
    const fresh = !e.services?.length || e.services.some((s) => !named.has(s));
    for (const s of e.services ?? []) named.add(s);
    return fresh;
  });
  const parts = [...new Set([...clauses.map((e) => e.why), ...most.map((s) => sharedWhy(s, windowMs))])];
  if (most.length > 0 && control?.kind === 'failed') parts.push(`control run: ${control.checks.join(', ')} ${control.checks.length === 1 ? 'fails' : 'fail'} on verified node ${control.node} too`);
  if (most.length > 0 && control?.kind === 'unavailable') parts.push(`no control run (${control.why})`);
  return `cluster-wide: ${parts.join('; ')}; not this node's fault: `;
}

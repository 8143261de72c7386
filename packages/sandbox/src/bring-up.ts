import { createHash } from 'node:crypto';
import { parseDuration } from '@kube-node-ready/core';
import type { k8s } from './kube.js';

/**
 * Node bring-up knobs: node annotations (on a Karpenter NodePool, template annotations) that make a
 * simulated node come up the way a real cloud node does, slowly. Explicit knobs override what a
 * preset picks. Times count from the node's creationTimestamp.
 *   bring-up: realistic       per node, picked from a hash of its name: NotReady 10-30 s, the CNI
 *                             0-10 s after that, first image pull 5-15 s, the CNI agent's startup taint
 *                             (node.cilium.io/agent-not-ready, if the node has it) removed after 10-40 s
 *   not-ready-for: "20s"      the kubelet reports Ready=False ("cni plugin not initialized") until then
 *   cni-delay: "15s"          pods bound to the node get no sandbox (ContainerCreating,
 *                             FailedCreatePodSandBox Events) until this long after the node turned Ready
 *   image-pull-delay: "10s"   the first pull of each image on the node takes that long
 *   remove-taints-after: "node.cilium.io/agent-not-ready=30s,other=5s"
 *                             another agent removes those taints then (if present)
 */
export const BRING_UP = {
  preset: 'sandbox.kube-node-ready.io/bring-up',
  notReadyFor: 'sandbox.kube-node-ready.io/not-ready-for',
  cniDelay: 'sandbox.kube-node-ready.io/cni-delay',
  imagePullDelay: 'sandbox.kube-node-ready.io/image-pull-delay',
  removeTaintsAfter: 'sandbox.kube-node-ready.io/remove-taints-after',
} as const;

/** A CNI agent's startup taint that the realistic preset removes 10-40 s after registration. */
export const CNI_AGENT_TAINT = 'node.cilium.io/agent-not-ready';

export const BRING_UP_PRESETS = ['realistic'] as const;
export type BringUpPreset = (typeof BRING_UP_PRESETS)[number];

/** The ranges the `realistic` preset picks from, per node, in milliseconds. */
export const REALISTIC_RANGES = {
  notReadyMs: [10_000, 30_000],
  cniDelayMs: [0, 10_000],
  imagePullMs: [5_000, 15_000],
  agentTaintMs: [10_000, 40_000],
} as const satisfies Record<string, readonly [number, number]>;

/** How a node comes up. Every field is optional: absent means "at once". */
export interface BringUpPlan {
  /** The kubelet reports Ready=False before this time, epoch ms. */
  readyAt?: number;
  /** Pods bound to the node get no pod sandbox (the CNI is not ready) before this time, epoch ms. */
  cniReadyAt?: number;
  /** Taints another agent removes, with the time it does (epoch ms). */
  taintRemovals?: Array<{ key: string; at: number }>;
  /** The first pull of each image on the node takes this long, ms. */
  imagePullMs?: number;
  /** Knobs that could not be read, with why; they are ignored. */
  invalid?: string[];
}

/**
 * The bring-up plan of a node, from its annotations. Deterministic: the same node (name,
 * creationTimestamp, annotations) always gets the same plan, so a preset gives every node its own
 * delays and a test or benchmark run can be repeated. A node without a creationTimestamp (not yet
 * stored by the API server) counts from `now`.
 */
export function bringUpPlan(node: k8s.V1Node, now = Date.now()): BringUpPlan {
  const ann = node.metadata?.annotations ?? {};
  const name = node.metadata?.name ?? '';
  const plan: BringUpPlan = {};
  const invalid: string[] = [];
  const duration = (key: string): number | undefined => {
    const v = ann[key];
    if (v === undefined) return undefined;
    try {
      return parseDuration(v);
    } catch (err) {
      invalid.push(`${key}: ${(err as Error).message}`);
      return undefined;
    }
  };
  const preset = ann[BRING_UP.preset];
  const realistic = preset === 'realistic';
  if (preset !== undefined && !realistic) invalid.push(`${BRING_UP.preset}: unknown preset "${preset}" (known: ${BRING_UP_PRESETS.join(', ')})`);

  const created = createdAt(node, now);
  const notReadyMs = duration(BRING_UP.notReadyFor) ?? (realistic ? hashedBetween(name, 'not-ready', ...REALISTIC_RANGES.notReadyMs) : undefined);
  if (notReadyMs) plan.readyAt = created + notReadyMs;
  // A node that is not Ready has no CNI config, so no pod gets a sandbox before it turns Ready.
  const cniDelayMs = duration(BRING_UP.cniDelay) ?? (realistic ? hashedBetween(name, 'cni-delay', ...REALISTIC_RANGES.cniDelayMs) : undefined);
  if (cniDelayMs || notReadyMs) plan.cniReadyAt = created + (notReadyMs ?? 0) + (cniDelayMs ?? 0);
  const removals = new Map<string, number>();
  if (realistic) removals.set(CNI_AGENT_TAINT, created + hashedBetween(name, 'agent-taint', ...REALISTIC_RANGES.agentTaintMs));
  for (const entry of (ann[BRING_UP.removeTaintsAfter] ?? '').split(',').map((x) => x.trim()).filter(Boolean)) {
    const m = /^([^=]+)=(.+)$/.exec(entry);
    const ms = m ? safeDuration(m[2]!) : undefined;
    if (m && ms !== undefined) removals.set(m[1]!, created + ms);
    else invalid.push(`${BRING_UP.removeTaintsAfter}: "${entry}" is not KEY=DURATION`);
  }
  if (removals.size) plan.taintRemovals = [...removals].map(([key, at]) => ({ key, at }));
  const imagePullMs = duration(BRING_UP.imagePullDelay) ?? (realistic ? hashedBetween(name, 'image-pull', ...REALISTIC_RANGES.imagePullMs) : undefined);
  if (imagePullMs) plan.imagePullMs = imagePullMs;
  if (invalid.length) plan.invalid = invalid;
  return plan;
}

function safeDuration(text: string): number | undefined {
  try {
    return parseDuration(text);
  } catch {
    return undefined;
  }
}

/**
 * A value in [minMs, maxMs] picked from a hash of the node name and the knob, so different knobs of
 * one node are independent and every run (and a restarted sandbox) picks the same.
 */
export function hashedBetween(nodeName: string, knob: string, minMs: number, maxMs: number): number {
  const h = createHash('sha256').update(`${nodeName}/${knob}`).digest().readUInt32BE(0);
  return minMs + (h % (maxMs - minMs + 1));
}

/** The node's creationTimestamp in epoch ms (a Date from the typed client, a string from a raw watch event). */
export function createdAt(node: k8s.V1Node, fallback: number): number {
  const ts = node.metadata?.creationTimestamp as Date | string | undefined;
  const ms = ts === undefined ? NaN : new Date(ts).getTime();
  return Number.isFinite(ms) ? ms : fallback;
}

import { createHash } from 'node:crypto';
import type { V1Node, V1ObjectMeta } from '@kubernetes/client-node';
import { toMillis } from '../kube/objects.js';
import { GROUP } from './well-known.js';
import { Outcome, OUTCOMES, Phase, type CheckResult, type Failing, type VerificationState } from '../controllers/node/verification/types.js';

/**
 * The NodeVerification resource (ADR 0005): one per node being or having been verified, named after
 * the Node and owned by it, so kube-controller-manager's garbage collector removes it with the Node.
 * Its status is the verification's progress; only the controller (or, in DaemonSet mode, the
 * node's own agent) writes it. The CRD is deploy/helm/kube-node-ready/crds/; this file is its
 * TypeScript face and the one place status and VerificationState are translated.
 */
export const NodeVerificationApi = {
  group: GROUP,
  version: 'v1alpha1',
  plural: 'nodeverifications',
  kind: 'NodeVerification',
  apiVersion: `${GROUP}/v1alpha1`,
  /** The collection's API path (informer, watch). */
  path: `/apis/${GROUP}/v1alpha1/nodeverifications`,
} as const;

export interface NodeVerification {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
  spec?: NodeVerificationSpec;
  status?: NodeVerificationStatus;
}

export interface NodeVerificationSpec {
  /** The Node verified (the same as metadata.name). */
  nodeName: string;
  /** The UID of that Node: a Node re-created under the same name is another node and gets a fresh NodeVerification. */
  nodeUID: string;
}

/** The phases of NodeVerification status: the stored Phase plus Waiting (not launchable yet, or no slot free). */
export type NodeVerificationPhase = Phase;

export interface CheckStatus {
  name: string;
  ok: boolean;
  durationMs: number;
  error?: string;
  target?: string;
}

export interface LastAttempt {
  attempt: number;
  /** The outcome (Passed, ChecksFailed, WorkerError, NotScheduled, ..., ClusterWide). */
  reason: Outcome;
  message: string;
  finishedAt?: string;
  checks?: CheckStatus[];
}

export interface StatusCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
}

export interface NodeVerificationStatus {
  phase?: NodeVerificationPhase;
  /** The profile whose settings verify the node (config profiles; "default": the top-level settings). */
  profile?: string;
  /** Latest attempt started (0 before the first). */
  attempt?: number;
  /** Consecutive failed attempts of the current verification. */
  failures?: number;
  /** Phase Backoff: no new attempt before this time. */
  nextAttemptAt?: string;
  /** The worker pod of the current (or last) attempt, `namespace/name`. */
  workerPod?: string;
  lastAttempt?: LastAttempt;
  /** While attempts fail: since when, and the checks the latest failed against a target (the cluster-wide rule's memory). */
  failing?: { since: string; at: string; checks: Record<string, string> };
  /** The Node's creation. */
  nodeCreatedAt?: string;
  /** When the node could first run the worker (Ready, no untolerated startup taint). */
  launchableAt?: string;
  /** When the first worker pod of this verification was started. */
  firstLaunchAt?: string;
  /** When the node passed (kept across later re-verifications). */
  verifiedAt?: string;
  /** When the node ran out of attempts. */
  failedAt?: string;
  /** One condition, `Verified`: the same verdict as the Node condition, with the live progress too. */
  conditions?: StatusCondition[];
}

/** The type of the one condition in NodeVerification status. */
export const VERIFIED_CONDITION = 'Verified';

export type StateRead =
  | { kind: 'none' }
  | { kind: 'ok'; state: VerificationState }
  /** A NodeVerification whose status cannot be used: treated as no state, reported once in the log. */
  | { kind: 'invalid'; problem: string };

const PHASES = new Set<string>(Object.values(Phase));

/**
 * The label naming the installation that writes a NodeVerification: a hash of its condition type
 * (nodeManagement.condition.type), which two installations in one cluster must set apart. One
 * installation leaves another's NodeVerifications alone, as it leaves that one's nodes alone.
 */
export const INSTALLATION_LABEL = `${GROUP}/installation`;

export function installationOf(conditionType: string): string {
  return createHash('sha256').update(conditionType).digest('hex').slice(0, 12);
}

/**
 * The progress a NodeVerification holds for `node`: none when it belongs to another Node UID (one
 * re-created under the same name); unusable when `installation` is given and another installation
 * wrote it.
 */
export function stateOf(nv: NodeVerification | undefined, node: V1Node, installation?: string): StateRead {
  if (!nv) return { kind: 'none' };
  const uid = nv.spec?.nodeUID;
  if (uid === undefined || uid !== node.metadata?.uid) return { kind: 'none' };
  const writer = nv.metadata?.labels?.[INSTALLATION_LABEL];
  if (installation !== undefined && writer !== installation) return { kind: 'invalid', problem: `the NodeVerification belongs to another installation of kube-node-ready (${INSTALLATION_LABEL}=${writer ?? '(none)'}, this one is ${installation})` };
  return parseStatus(uid, nv.status);
}

export function parseStatus(uid: string, s: NodeVerificationStatus | undefined): StateRead {
  if (!s?.phase) return { kind: 'none' };
  if (!PHASES.has(s.phase)) return { kind: 'invalid', problem: `unknown phase ${JSON.stringify(s.phase)}` };
  const attempt = s.attempt ?? 0;
  // Attempt 0 (none started) is a Waiting node, or one a startup timeout failed before its first attempt.
  const noAttemptYet = s.phase === Phase.Waiting || (s.phase === Phase.Failed && s.lastAttempt?.reason === Outcome.StartupTimeout);
  if (!Number.isInteger(attempt) || attempt < 0 || (attempt === 0 && !noAttemptYet)) return { kind: 'invalid', problem: `bad attempt ${JSON.stringify(s.attempt)} in phase ${s.phase}` };
  const state: VerificationState = { uid, attempt, failures: s.failures ?? 0, phase: s.phase };
  const next = toMillis(s.nextAttemptAt);
  if (next !== undefined) state.nextAttemptAt = next;
  if (s.phase === Phase.Backoff && next === undefined) return { kind: 'invalid', problem: 'phase Backoff without nextAttemptAt' };
  if (s.workerPod) state.pod = s.workerPod;
  const last = s.lastAttempt;
  if (last && (OUTCOMES as readonly string[]).includes(last.reason)) {
    state.lastOutcome = last.reason;
    state.lastMessage = last.message;
    if (Number.isInteger(last.attempt) && last.attempt > 0) state.lastAttempt = last.attempt;
    if (last.checks) state.lastChecks = last.checks.map((c) => ({ ...c }));
    const finished = toMillis(last.finishedAt);
    if (finished !== undefined) state.lastFinishedAt = finished;
  }
  const failing = parseFailing(s.failing);
  if (failing) state.failing = failing;
  for (const key of ['launchableAt', 'firstLaunchAt', 'verifiedAt', 'failedAt'] as const) {
    const t = toMillis(s[key]);
    if (t !== undefined) state[key] = t;
  }
  return { kind: 'ok', state };
}

/**
 * The status that represents `state` for `node`, with its one condition. Fields of the current
 * status that the state does not carry (the condition's transition time) are kept or moved as
 * Kubernetes conventions say.
 */
export function statusOf(
  state: VerificationState,
  node: V1Node,
  condition: Omit<StatusCondition, 'lastTransitionTime'>,
  current: NodeVerification | undefined,
  now: number,
  profile?: string,
): NodeVerificationStatus {
  const s: NodeVerificationStatus = { phase: state.phase, ...(profile !== undefined ? { profile } : {}), attempt: state.attempt, failures: state.failures };
  if (state.nextAttemptAt !== undefined) s.nextAttemptAt = formatTime(state.nextAttemptAt);
  if (state.pod) s.workerPod = state.pod;
  if (state.lastOutcome !== undefined) {
    s.lastAttempt = { attempt: state.lastAttempt ?? state.attempt, reason: state.lastOutcome, message: state.lastMessage ?? '' };
    if (state.lastFinishedAt !== undefined) s.lastAttempt.finishedAt = formatTime(state.lastFinishedAt);
    if (state.lastChecks) s.lastAttempt.checks = state.lastChecks.map(checkStatus);
  }
  if (state.failing) s.failing = { since: formatTime(state.failing.since), at: formatTime(state.failing.at), checks: { ...state.failing.checks } };
  const created = toMillis(node.metadata?.creationTimestamp);
  if (created !== undefined) s.nodeCreatedAt = formatTime(created);
  for (const key of ['launchableAt', 'firstLaunchAt', 'verifiedAt', 'failedAt'] as const) {
    const t = state[key];
    if (t !== undefined) s[key] = formatTime(t);
  }
  // No observedGeneration: without a status subresource (ADR 0006) every status write moves the
  // generation, so it would always be one behind and tools that compare the two (kstatus) would
  // see a NodeVerification that never settles. Its spec never changes after creation.
  const before = current?.status?.conditions?.find((c) => c.type === condition.type);
  const transition = before && before.status === condition.status ? before.lastTransitionTime : new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z');
  s.conditions = [{ ...condition, message: condition.message.slice(0, MAX_MESSAGE), lastTransitionTime: transition }];
  return s;
}

/** The CRD's limit on messages (a condition message, an attempt's message, a check's error). */
export const MAX_MESSAGE = 4096;

function checkStatus(c: CheckResult): CheckStatus {
  const out: CheckStatus = { name: c.name, ok: c.ok, durationMs: Math.max(0, Math.round(c.durationMs)) };
  if (c.error !== undefined) out.error = c.error.slice(0, MAX_MESSAGE);
  if (c.target !== undefined) out.target = c.target;
  return out;
}

/** A new NodeVerification for `node`, written by `installation`, without status (the caller adds the first one: ADR 0006). */
export function newNodeVerification(node: V1Node, installation?: string): NodeVerification {
  const name = node.metadata?.name ?? '';
  const uid = node.metadata?.uid ?? '';
  return {
    apiVersion: NodeVerificationApi.apiVersion,
    kind: NodeVerificationApi.kind,
    metadata: {
      name,
      ...(installation !== undefined ? { labels: { [INSTALLATION_LABEL]: installation } } : {}),
      // The Node owns it: deleting the Node deletes it (garbage collection, background).
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid }],
    },
    spec: { nodeName: name, nodeUID: uid },
  };
}

function parseFailing(f: NodeVerificationStatus['failing']): Failing | undefined {
  if (!f) return undefined;
  const since = toMillis(f.since);
  const at = toMillis(f.at);
  if (since === undefined || at === undefined) return undefined;
  return { since, at, checks: { ...f.checks } };
}

export function formatTime(ms: number): string {
  // RFC 3339 with second precision, like Kubernetes timestamps; rounded up so "not before" holds.
  return new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}


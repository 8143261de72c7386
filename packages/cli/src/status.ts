import { parseArgs } from 'node:util';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { ConfigError, ExitCode, errorMessage, formatDuration } from '@kube-node-ready/core';
import { NodeVerificationApi, PodAnnotation, podAttempt, stateOf, WORKER_POD_SELECTOR, workerNodeName, type ControllerConfig, type NodeVerification } from '@kube-node-ready/controller';
import { controllerConfig, kubeConfig } from './kube.js';

export const STATUS_USAGE = `usage: kube-node-ready status [--kubeconfig PATH] [--config PATH] [-o table|json] [--all]

Shows the nodes kube-node-ready is verifying or has verified (their NodeVerification status), and
the controller's leader.
  --config PATH   the controller's configuration (taint, label, Lease names); defaults otherwise
  -o, --output    table (default) or json
  --all           every node, also those kube-node-ready never looked at`;

export interface NodeStatus {
  node: string;
  state: 'Pending' | 'Waiting' | 'Verifying' | 'Backoff' | 'Verified' | 'Failed' | 'Unmanaged';
  /** The latest attempt started (0: none yet). */
  attempt: number;
  /** Consecutive failed attempts of the current verification. */
  failures: number;
  lastOutcome: string;
  lastMessage: string;
  tainted: boolean;
  verified: boolean;
  ageSeconds: number;
  /** Backoff: no new attempt before this time (RFC 3339). */
  nextAttemptAt?: string;
  /** When the node passed (RFC 3339), kept across later verifications. */
  verifiedAt?: string;
  /** Seconds from node creation to the verified time, when it passed. */
  timeToVerifiedSeconds?: number;
}

export interface StatusReport {
  leader: { identity: string; renewedSecondsAgo?: number } | null;
  nodes: NodeStatus[];
}

export async function runStatus(argv: string[], _env: NodeJS.ProcessEnv): Promise<number> {
  let values: { kubeconfig?: string; config?: string; output: string; all?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        kubeconfig: { type: 'string' },
        config: { type: 'string' },
        output: { type: 'string', short: 'o', default: 'table' },
        all: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
    if (values.help) {
      console.log(STATUS_USAGE);
      return ExitCode.OK;
    }
    if (values.output !== 'table' && values.output !== 'json') throw new ConfigError(`expected "table" or "json", got "${values.output}"`, '--output');
  } catch (err) {
    console.error(`kube-node-ready status: ${errorMessage(err)}\n\n${STATUS_USAGE}`);
    return ExitCode.CONFIG_ERROR;
  }
  try {
    const report = await collectStatus(kubeConfig(values.kubeconfig), controllerConfig(values.config), Date.now(), values.all ?? false);
    console.log(values.output === 'json' ? JSON.stringify(report, null, 2) : renderStatus(report));
    return ExitCode.OK;
  } catch (err) {
    console.error(`kube-node-ready status: ${errorMessage(err)}`);
    return err instanceof ConfigError ? ExitCode.CONFIG_ERROR : ExitCode.INTERNAL_ERROR;
  }
}

export async function collectStatus(
  kc: KubeConfig,
  config: Readonly<ControllerConfig>,
  now: number,
  all = false,
): Promise<StatusReport> {
  const core = kc.makeApiClient(CoreV1Api);
  const [nodes, verifications, workers] = await Promise.all([
    core.listNode().then((l) => l.items),
    listVerifications(kc),
    // Without the right to list them, attempts in flight show as the last stored progress.
    core.listNamespacedPod({ namespace: config.worker.namespace, labelSelector: WORKER_POD_SELECTOR }).then(
      (l) => l.items,
      () => [],
    ),
  ]);
  const byName = new Map(verifications.map((nv) => [nv.metadata?.name ?? '', nv]));
  const running = attemptsInFlight(workers);
  const rows = nodes.map((n) => nodeStatus(n, byName.get(n.metadata?.name ?? ''), config, now, running.get(`${n.metadata?.name ?? ''}/${n.metadata?.uid ?? ''}`))).filter((r) => all || r.state !== 'Unmanaged');
  rows.sort((a, b) => a.node.localeCompare(b.node));
  return { leader: await readLeader(kc, config, now), nodes: rows };
}

/** Every NodeVerification (one per node the controller has looked at, named after it). */
async function listVerifications(kc: KubeConfig): Promise<NodeVerification[]> {
  const { group, version, plural } = NodeVerificationApi;
  try {
    const list = (await kc.makeApiClient(CustomObjectsApi).listClusterCustomObject({ group, version, plural })) as { items?: NodeVerification[] };
    return list.items ?? [];
  } catch (err) {
    if ((err as { code?: number }).code === 404) {
      throw new Error(`the cluster has no ${plural}.${group} resource: is kube-node-ready installed (its CRD comes with the Helm chart)?`, { cause: err });
    }
    throw new Error(`listing ${plural}.${group}: ${errorMessage(err)}`, { cause: err });
  }
}

/**
 * The attempt each node's running worker pod runs, by `node name/node UID`: an attempt in flight is
 * not written to the NodeVerification (ADR 0006), its worker pod is its record.
 */
export function attemptsInFlight(pods: readonly V1Pod[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const pod of pods) {
    const phase = pod.status?.phase;
    if (pod.metadata?.deletionTimestamp || phase === 'Succeeded' || phase === 'Failed') continue;
    const attempt = podAttempt(pod);
    if (attempt === 0) continue;
    const key = `${workerNodeName(pod) ?? ''}/${pod.metadata?.annotations?.[PodAnnotation.NodeUid] ?? ''}`;
    out.set(key, Math.max(out.get(key) ?? 0, attempt));
  }
  return out;
}

/**
 * One node's row: its progress from `nv` (its NodeVerification; one written for another node of
 * the same name, an earlier Node object, is no progress of this one), the attempt its running
 * worker pod runs (`inFlight`, newer than that progress: Verifying), its taint and label from the Node.
 */
export function nodeStatus(node: V1Node, nv: NodeVerification | undefined, config: Readonly<ControllerConfig>, now: number, inFlight?: number): NodeStatus {
  const taints = node.spec?.taints ?? [];
  const tainted = config.nodeManagement.taints.some((t) => taints.some((x) => x.key === t.key && x.effect === t.effect));
  const { key, value } = config.nodeManagement.verifiedLabel;
  const verified = node.metadata?.labels?.[key] === value;
  const read = stateOf(nv, node);
  const s = read.kind === 'ok' ? read.state : undefined;
  const created = node.metadata?.creationTimestamp ? new Date(node.metadata.creationTimestamp).getTime() : now;
  // Waiting (for the node to be able to run the worker, or for a slot): said by the condition, not the phase.
  const condition = s ? nv?.status?.conditions?.[0] : undefined;
  const waiting = s?.phase === 'Waiting' || (condition !== undefined && WAITING_REASONS.has(condition.reason));
  const running = inFlight !== undefined && inFlight > (s?.attempt ?? 0) ? inFlight : undefined;
  let state: NodeStatus['state'];
  if (s?.phase === 'Failed') state = 'Failed';
  else if (verified && !tainted) state = 'Verified';
  else if (s?.phase === 'Verifying' || running !== undefined) state = 'Verifying';
  else if (waiting) state = 'Waiting';
  else if (s?.phase === 'Backoff') state = 'Backoff';
  else if (tainted) state = 'Pending';
  else state = 'Unmanaged';
  const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
  const nextAttemptAt = state === 'Backoff' ? iso(s?.nextAttemptAt) : undefined;
  const verifiedAt = iso(s?.verifiedAt);
  return {
    node: node.metadata?.name ?? '',
    state,
    attempt: running ?? s?.attempt ?? 0,
    failures: s?.failures ?? 0,
    lastOutcome: state === 'Waiting' ? (condition?.reason ?? '') : (s?.lastOutcome ?? ''),
    lastMessage: state === 'Waiting' ? (condition?.message ?? '') : (s?.lastMessage ?? ''),
    tainted,
    verified,
    ageSeconds: Math.max(0, Math.round((now - created) / 1000)),
    ...(nextAttemptAt ? { nextAttemptAt } : {}),
    ...(verifiedAt ? { verifiedAt } : {}),
    ...(s?.verifiedAt !== undefined && verified ? { timeToVerifiedSeconds: Math.max(0, (s.verifiedAt - created) / 1000) } : {}),
  };
}

/** Reasons of the NodeVerification's condition while no attempt can start (verification/condition.ts). */
const WAITING_REASONS = new Set(['WaitingForNode', 'WaitingForSlot', 'NodeNotLaunchable']);

async function readLeader(
  kc: KubeConfig,
  config: Readonly<ControllerConfig>,
  now: number,
): Promise<StatusReport['leader']> {
  const namespace = config.leaderElection.namespace || 'kube-system';
  try {
    const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: config.leaderElection.leaseName, namespace });
    const identity = lease.spec?.holderIdentity;
    if (!identity) return null;
    const renew = lease.spec?.renewTime ? new Date(lease.spec.renewTime as unknown as string).getTime() : undefined;
    return { identity, ...(renew ? { renewedSecondsAgo: Math.max(0, Math.round((now - renew) / 1000)) } : {}) };
  } catch {
    return null;
  }
}

export function renderStatus(report: StatusReport): string {
  const header = ['NODE', 'STATE', 'ATTEMPT', 'LAST CHECK RESULT', 'AGE', 'TIME TO VERIFIED'];
  const rows = report.nodes.map((n) => [
    n.node,
    n.state,
    n.attempt ? String(n.attempt) : '-',
    n.lastOutcome ? `${n.lastOutcome}${n.lastMessage ? `: ${truncate(n.lastMessage, 60)}` : ''}` : '-',
    formatDuration(n.ageSeconds * 1000),
    n.timeToVerifiedSeconds === undefined ? '-' : formatDuration(n.timeToVerifiedSeconds * 1000),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  const leader = report.leader
    ? `leader: ${report.leader.identity}${report.leader.renewedSecondsAgo !== undefined ? ` (renewed ${report.leader.renewedSecondsAgo}s ago)` : ''}`
    : 'leader: none (is the controller running? In DaemonSet mode there is none)';
  return [leader, line(header), ...rows.map(line)].join('\n');
}

function truncate(s: string, n: number): string {
  const one = s.replace(/\s+/g, ' ');
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}

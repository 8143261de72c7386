import { formatDuration, type Logger } from '@kube-node-ready/core';
import type { CheckName, HostPort, WorkerConfig } from '../config.js';
import { ApiError } from '../kube/api-client.js';
import type { ClusterApi } from '../kube/cluster.js';

/** The nameservers to test: from --dns-server / dns.servers, else from resolv.conf, or why there are none. */
export type Nameservers = { servers: HostPort[]; source: string } | { error: string };

export interface CheckContext {
  config: WorkerConfig;
  /** Aborts at the check's own timeout or the run's deadline, whichever comes first. */
  signal: AbortSignal;
  log: Logger;
  /** The API, shared by every check of the run; absent when no enabled check needs it (dns alone). */
  cluster?: ClusterApi;
  nameservers: Nameservers;
}

export interface CheckResult {
  ok: boolean;
  /** Why the check failed: one line, each problem separated by "; ". */
  error?: string;
  /** Findings that do not fail the node (slow answers): logged, and in the summary's `warnings`. */
  warnings?: string[];
  /** Structured facts for the log line (latencies, answers, targets). */
  details?: Record<string, unknown>;
  /**
   * What a failed check failed against (`10.96.0.10:53`; several joined by ", "), where the check
   * knows it: the controller names a fault shared by several nodes against one target as cluster-wide.
   */
  target?: string;
  /** The HTTP status of the API answer that failed the check (5xx, 429...): the controller then blames the API, not the node. */
  httpStatus?: number;
  /**
   * Services (`namespace/name`) with no ready endpoint in their EndpointSlices, when that alone
   * failed the check: the cluster's state, read from the API, which the controller does not count against the node.
   */
  noReadyEndpoints?: string[];
}

/** `result` with `httpStatus` set when `err` is the API answering with an HTTP error (the check failed on it). */
export function answeredWith(result: CheckResult, err: unknown): CheckResult {
  if (result.ok || !(err instanceof ApiError) || err.kind !== 'http' || err.status === undefined) return result;
  return { ...result, httpStatus: err.status };
}

/** `result` with `target` set to the given addresses (sorted, unique), when it failed and there are some. */
export function failedAgainst(result: CheckResult, addresses: readonly string[]): CheckResult {
  if (result.ok || addresses.length === 0) return result;
  return { ...result, target: [...new Set(addresses)].sort().join(', ') };
}

export type Check = (ctx: CheckContext) => Promise<CheckResult>;

export type CheckRegistry = Record<CheckName, Check>;

/** Passed when there is no problem; otherwise failed with every problem in the error. */
export function verdict(problems: string[], details?: Record<string, unknown>, warnings: string[] = []): CheckResult {
  return {
    ok: problems.length === 0,
    ...(problems.length > 0 ? { error: problems.join('; ') } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
    ...(details ? { details } : {}),
  };
}

/**
 * Judges latencies against the check's `slowAfter`: each slow step becomes a warning, or a
 * problem with `onSlow: fail`.
 */
export class Slowness {
  readonly warnings: string[] = [];
  private readonly limit: number | undefined;

  constructor(
    private readonly config: WorkerConfig,
    private readonly check: CheckName,
  ) {
    this.limit = config.slowAfter[check];
  }

  /** Records `what` took `latencyMs`; pushes onto `problems` when slow steps fail the check. */
  judge(what: string, latencyMs: number, problems: string[], note = ''): void {
    if (this.limit === undefined || latencyMs <= this.limit) return;
    const text = `${what}: slow: ${formatDuration(latencyMs)}${note} (over ${this.check}.slowAfter ${formatDuration(this.limit)})`;
    if (this.config.onSlow === 'fail') problems.push(text);
    else this.warnings.push(text);
  }
}

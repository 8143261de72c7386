import type { Logger } from '@kube-node-ready/core';
import type { CheckName, HostPort, WorkerConfig } from '../config.js';
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
  /** Structured facts for the log line (latencies, answers, targets). */
  details?: Record<string, unknown>;
}

export type Check = (ctx: CheckContext) => Promise<CheckResult>;

export type CheckRegistry = Record<CheckName, Check>;

/** Passed when there is no problem; otherwise failed with every problem in the error. */
export function verdict(problems: string[], details?: Record<string, unknown>): CheckResult {
  return { ok: problems.length === 0, ...(problems.length > 0 ? { error: problems.join('; ') } : {}), ...(details ? { details } : {}) };
}

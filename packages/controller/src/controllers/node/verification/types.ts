import type { CheckSummary } from './summary.js';

/** One check of a finished attempt, as the status keeps it. */
export type CheckResult = Pick<CheckSummary, 'name' | 'ok' | 'durationMs' | 'error' | 'target'>;

/** How one worker attempt ended. Each has its own Event reason and condition reason. */
export const Outcome = {
  /** Every check passed. */
  Passed: 'Passed',
  /** The worker ran and one or more checks failed (exit 1 with a summary). */
  ChecksFailed: 'ChecksFailed',
  /** The worker could not do its job: configuration / internal error, crash, OOM, unreadable summary. */
  WorkerError: 'WorkerError',
  /** The pod was not scheduled within worker.scheduleTimeout. */
  NotScheduled: 'NotScheduled',
  /** The pod was scheduled but its container did not start within worker.startTimeout. */
  NotStarted: 'NotStarted',
  /** The worker ran longer than worker.timeout (or hit activeDeadlineSeconds). */
  DeadlineExceeded: 'DeadlineExceeded',
  /** The pod disappeared, was deleted or evicted before it reported a result. */
  PodDeleted: 'PodDeleted',
  /**
   * Inconclusive: the checks failed, but the same check failed against the same target on most
   * nodes that finished an attempt since that fault was first seen (cluster-wide.ts): a fault
   * outside the node. Not counted against the node, no remediation signal; tried again later.
   */
  ClusterWide: 'ClusterWide',
  /**
   * No verdict within nodeManagement.startupTimeout of the node's creation: the verification ends
   * with nodeManagement.onStartupTimeout (keep the taint, open the node unverified, or replace it
   * through remediation). Not an attempt of the worker.
   */
  StartupTimeout: 'StartupTimeout',
} as const;
export type Outcome = (typeof Outcome)[keyof typeof Outcome];
export const OUTCOMES: readonly Outcome[] = Object.values(Outcome);

export interface AttemptResult {
  outcome: Outcome;
  /** One line for humans: names the failed checks and their first errors. */
  message: string;
  /** Names of failed checks (ChecksFailed), in the worker's order. */
  failedChecks: string[];
  /** Every check of the summary, for per-check metrics (empty when there is no summary). */
  checks: CheckSummary[];
  /** The summary's warnings: findings that did not fail the node (slow answers...), in the worker's order. */
  warnings: WorkerWarning[];
  exitCode?: number;
  /** When the worker container started / finished (ms), where known. */
  startedAt?: number;
  finishedAt?: number;
}

/** One entry of the summary's `warnings[]`. */
export interface WorkerWarning {
  /** The check it belongs to (its prefix), or `unknown` when the prefix names no check of the summary. */
  check: string;
  /** As the worker wrote it: `dns: ... slow: 3.5s ...`. */
  message: string;
}

/** Where a node is in its verification. Stored in NodeVerification status (api/nodeverification.ts). */
export const Phase = {
  /** Seen, no attempt yet: the node cannot run the worker yet, or waits for a verification slot. */
  Waiting: 'Waiting',
  Verifying: 'Verifying',
  Backoff: 'Backoff',
  Passed: 'Passed',
  Failed: 'Failed',
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

export interface VerificationState {
  /** The Node UID this state was written for. */
  uid: string;
  /** Latest attempt started (1-based, never reused for this node UID; 0 while Waiting for the first). */
  attempt: number;
  /** Consecutive failed attempts in the current verification. */
  failures: number;
  phase: Phase;
  /** Phase Backoff: no new attempt before this time (ms). */
  nextAttemptAt?: number;
  lastOutcome?: Outcome;
  /** The last finished attempt's message (names failed checks and errors). */
  lastMessage?: string;
  /** The last finished attempt's number, when it is not `attempt`. */
  lastAttempt?: number;
  /** The last finished attempt's checks, with their durations. */
  lastChecks?: CheckResult[];
  /** When the last finished attempt ended (ms). */
  lastFinishedAt?: number;
  /** The worker pod of the current (or last) attempt, `namespace/name`. */
  pod?: string;
  /** When the node could first run the worker (ms). */
  launchableAt?: number;
  /** When the first worker pod of this verification was started (ms). */
  firstLaunchAt?: number;
  /** Set when the node passed (kept across later re-verifications: "was ever verified"). */
  verifiedAt?: number;
  /** Set when the node ran out of attempts (ms). */
  failedAt?: number;
  /** While the node's attempts fail: since when, and the checks its latest one failed against a target. */
  failing?: Failing;
}

/** A node's failing streak, as the cluster-wide rule needs it (ClusterWideFailures.restore). */
export interface Failing {
  /** When the first failed attempt of the streak ended (ms). */
  since: number;
  /** When the latest one ended (ms). */
  at: number;
  /** Its failed checks that named a target: check -> target. */
  checks: Record<string, string>;
}

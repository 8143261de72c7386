import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { AttemptResult } from '../controllers/node/verification/types.js';

/**
 * The DaemonSet agent's metrics, on each pod's /metrics, with the reference's per-node names
 * (docs/metrics.md, "DaemonSet mode"). Every series carries the node the pod verifies.
 *
 *   node_check_status                   1: the node passed and was opened; 0: not (yet)
 *   node_check_completion_timestamp     when the verification ended, passed or failed for good (0: still going)
 *   node_check_<check>_duration_seconds the check's duration in the latest attempt
 *   node_check_failures_total{check}    failed runs of each check
 *   node_check_attempts_total{result}   attempts by result (passed, failed, interrupted)
 */
export class AgentMetrics {
  readonly registry = new Registry();
  private readonly status: Gauge;
  private readonly completion: Gauge;
  private readonly failures: Counter;
  private readonly attempts: Counter;
  private readonly durations = new Map<string, Gauge>();

  constructor(
    private readonly node: string,
    checks: readonly string[],
  ) {
    collectDefaultMetrics({ register: this.registry });
    this.status = new Gauge({ name: 'node_check_status', help: '1 when the node passed verification and was opened, else 0', labelNames: ['node'], registers: [this.registry] });
    this.completion = new Gauge({
      name: 'node_check_completion_timestamp',
      help: 'Unix time the verification ended (passed, or failed with no retries left); 0 while it is still going',
      labelNames: ['node'],
      registers: [this.registry],
    });
    this.failures = new Counter({ name: 'node_check_failures_total', help: 'Failed runs of each check', labelNames: ['node', 'check'], registers: [this.registry] });
    this.attempts = new Counter({ name: 'node_check_attempts_total', help: 'Verification attempts by result (passed, failed, interrupted)', labelNames: ['node', 'result'], registers: [this.registry] });
    this.status.set({ node }, 0);
    this.completion.set({ node }, 0);
    for (const check of checks) {
      this.failures.inc({ node, check }, 0);
      this.durations.set(
        check,
        new Gauge({ name: `node_check_${check}_duration_seconds`, help: `Duration of the ${check} check in the latest attempt`, labelNames: ['node'], registers: [this.registry] }),
      );
    }
    for (const result of ['passed', 'failed', 'interrupted']) this.attempts.inc({ node, result }, 0);
  }

  recordAttempt(result: AttemptResult): void {
    const node = this.node;
    this.attempts.inc({ node, result: result.outcome === 'Passed' ? 'passed' : 'failed' });
    for (const check of result.checks) {
      this.durations.get(check.name)?.set({ node }, check.durationMs / 1000);
      if (!check.ok && this.durations.has(check.name)) this.failures.inc({ node, check: check.name });
    }
  }

  recordInterrupted(): void {
    this.attempts.inc({ node: this.node, result: 'interrupted' });
  }

  /** The verification ended at `atMs`: passed (and opened) or failed for good. */
  recordEnded(passed: boolean, atMs: number): void {
    this.status.set({ node: this.node }, passed ? 1 : 0);
    this.completion.set({ node: this.node }, Math.round(atMs / 1000));
  }

  /** A new verification began (after `kube-node-ready verify NODE`). */
  recordRestarted(): void {
    this.status.set({ node: this.node }, 0);
    this.completion.set({ node: this.node }, 0);
  }
}

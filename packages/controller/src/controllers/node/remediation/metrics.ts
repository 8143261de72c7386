import { Counter, Gauge, type Registry } from 'prom-client';
import { BlockReason, RemediationAction, RemediationMetricName, RemediationResult } from './names.js';

/**
 * The two remediation metrics. Once wired, ControllerMetrics owns them (it registers these names
 * already) and is passed as is: it has the same two fields. Until then, and in tests,
 * registerRemediationMetrics() registers them on a registry of their own.
 */
export interface RemediationMetrics {
  /** kube_node_ready_remediations_total{action, result}. */
  remediationsTotal: { inc(labels: { action: string; result: string }, value?: number): void };
  /** kube_node_ready_remediation_blocked{reason}. */
  remediationBlocked: { set(labels: { reason: string }, value: number): void };
}

export function registerRemediationMetrics(registry: Registry): RemediationMetrics {
  const registers = [registry];
  const remediationsTotal = new Counter({
    name: RemediationMetricName.RemediationsTotal,
    help: 'Remediation decisions on failed nodes, by action (delete-nodeclaim, delete-node) and result (deleted, dry-run, skipped, error).',
    labelNames: ['action', 'result'],
    registers,
  });
  const remediationBlocked = new Gauge({
    name: RemediationMetricName.RemediationBlocked,
    help: '1 while remediation deletions are held back for the reason given (circuit-breaker, rate-limit, in-flight, ledger), else 0.',
    labelNames: ['reason'],
    registers,
  });
  for (const action of RemediationAction) for (const result of RemediationResult) remediationsTotal.inc({ action, result }, 0);
  for (const reason of BlockReason) remediationBlocked.set({ reason }, 0);
  return { remediationsTotal, remediationBlocked };
}

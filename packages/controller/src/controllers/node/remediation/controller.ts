import type { V1Node } from '@kubernetes/client-node';
import type { Reconciler } from '../../runner.js';
import type { Remediator } from './remediator.js';

/**
 * Remediation as a queue reconciler (controllers/runner.ts): keys are node names from the node
 * cache, fed by Remediator.observe(); each reconcile is one Remediator.consider(), and the node is
 * looked at again when the decision says (old enough, breaker re-check, a free hourly slot).
 * Deletions are rare and serial by nature: run it with one worker on a queue of its own, so a
 * storm of verifications never delays a remediation decision and vice versa.
 */
export class RemediationController implements Reconciler {
  constructor(
    private readonly remediator: Remediator,
    private readonly nodes: { get(name: string): V1Node | undefined },
  ) {}

  async reconcile(name: string): Promise<{ requeueAfterMs?: number }> {
    const node = this.nodes.get(name);
    if (!node) return {};
    const { requeueAfterMs } = await this.remediator.consider(node);
    return requeueAfterMs !== undefined ? { requeueAfterMs } : {};
  }
}

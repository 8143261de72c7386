import type { V1Node } from '@kubernetes/client-node';
import type { Clock } from '../../../clock.js';
import type { SelfHealingInformer } from '../../../kube/informer.js';
import { nodeName } from '../../../kube/objects.js';
import { WorkQueue } from '../../../queue/workqueue.js';
import type { Controller } from '../../manager.js';
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

/**
 * The remediation controller's registration. Every replica observes every node change (the
 * breaker's history of finished verifications is warm when a follower takes over); only the leader
 * works the queue and ticks the remediator.
 */
export function remediationController(remediator: Remediator, nodes: SelfHealingInformer<V1Node>, clock: Clock): Controller {
  const queue = new WorkQueue<string>({ clock });
  const observe = (node: V1Node): void => {
    if (remediator.observe(node)) queue.add(nodeName(node));
  };
  nodes.on({ add: observe, update: observe, delete: (node) => remediator.forget(node) });
  return {
    name: 'remediation',
    queue,
    reconciler: new RemediationController(remediator, nodes),
    workers: 1,
    resync: () => {
      for (const node of nodes.list()) observe(node);
    },
    startLeading: () => {
      remediator.startedLeading();
      return Promise.resolve();
    },
    tick: () => void remediator.tick(),
  };
}

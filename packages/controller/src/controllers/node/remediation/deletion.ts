import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { formatDuration } from '@kube-node-ready/core';
import type { Clock } from '../../../clock.js';
import { nodeName, nodeUid } from '../../../kube/objects.js';
import type { Decision } from './decide.js';
import type { RemediationTargets, Target } from './executor.js';
import { LEDGER_RETRY_MS, type LedgerGate } from './ledger-gate.js';
import type { RemediationLimiter } from './rate-limit.js';
import type { ConsiderResult } from './remediator.js';
import type { Reporter } from './reporting.js';

/**
 * The deletion of a node decide() chose to delete, in five steps, so that nothing is deleted on
 * stale information:
 *   1. reserve an in-flight slot and an hourly charge, synchronously in the call (before any
 *      await), so that calls in parallel cannot overshoot the limits;
 *   2. read the node live, and give up if it is gone or is another node of the same name;
 *   3. look its NodeClaim up afresh (never from the cache) and decide again on both;
 *   4. record the deletion in the ledger (ledger-gate.ts); a deletion that cannot be recorded is
 *      not issued;
 *   5. delete with a UID precondition (the Node: UID and resourceVersion as read in step 2).
 * Anything but a deletion gives the slot and the charge back. A deletion whose API call failed
 * stays recorded (it may have happened: the ledger may over-count, never under-count); one the API
 * server refused by its precondition, or whose object was gone, is taken out again.
 */

export type DeletionOutcome =
  /** Deleted and reported. */
  | { kind: 'deleted'; result: ConsiderResult }
  /** The live node or the fresh lookup changed the decision: it is handled as any other. */
  | { kind: 'decided'; node: V1Node; decision: Decision; target: Target }
  /** The object changed under the delete (precondition failed), or the hour filled up: decide once more. */
  | { kind: 'again'; node: V1Node }
  /** The node is gone. */
  | { kind: 'gone' }
  /** An API call failed. */
  | { kind: 'error'; err: unknown };

export interface DeletionOptions {
  targets: RemediationTargets;
  gate: LedgerGate;
  limiter: RemediationLimiter;
  reporter: Reporter;
  clock: Clock;
  /** decide() with the breaker and limits of this moment; `self` holds a reservation not counted against it. */
  decide: (node: V1Node, target: Target, self: string) => Decision;
  /** The node's NodeClaim or Node was deleted: it is never acted on again. */
  deleted: (uid: string, target: string) => void;
  /** The limiter's state changed: the block gauges are set again. */
  changed: () => void;
}

export class Deletion {
  constructor(private readonly opts: DeletionOptions) {}

  /** Steps 1 to 5 for `node`, which decide() just chose to delete; step 1 happens before this returns its promise. */
  async run(node: V1Node, decision: Extract<Decision, { kind: 'delete' }>, log: Logger): Promise<DeletionOutcome> {
    const uid = nodeUid(node);
    // 1. Reserve, in the same synchronous step as the decision.
    this.opts.limiter.reserve({ uid, node: nodeName(node), target: 'pending lookup' });
    this.opts.changed();
    const outcome = await this.issue(node, decision, log).catch((err: unknown) => ({ kind: 'error' as const, err }));
    if (outcome.kind !== 'deleted') {
      this.opts.limiter.release(uid);
      this.opts.changed();
    }
    return outcome;
  }

  /** Steps 2 to 5. */
  private async issue(cached: V1Node, decision: Extract<Decision, { kind: 'delete' }>, log: Logger): Promise<Exclude<DeletionOutcome, { kind: 'error' }>> {
    const uid = nodeUid(cached);
    // 2. The node as it is now.
    const fresh = await this.opts.targets.getNode(nodeName(cached));
    if (!fresh || nodeUid(fresh) !== uid) return { kind: 'gone' };
    // 3. Its NodeClaim, looked up afresh; decided again on both (our reservation not held against it).
    const target = await this.opts.targets.find(fresh, { fresh: true });
    const again = this.opts.decide(fresh, target, uid);
    if (again.kind !== 'delete') return { kind: 'decided', node: fresh, decision: again, target };
    if (target.kind === 'ambiguous') return { kind: 'decided', node: fresh, decision: again, target }; // decide() skips it; kept for the type

    // 4. Record it in the ledger first: no record, no deletion.
    const what = target.kind === 'nodeclaim' ? `NodeClaim ${target.claim.name}` : `Node ${nodeName(fresh)}`;
    this.opts.limiter.describe(uid, what);
    const recorded = await this.opts.gate.record({ uid, node: nodeName(fresh), target: what, at: this.opts.clock.now() });
    if (recorded.kind === 'full') {
      // Deletions recorded by another replica fill the hour: the limiter knows them now, and the
      // next round reports the hourly limit.
      log.info({ ledger: this.opts.gate.where }, 'the remediation ledger holds remediation.maxPerHour deletions of the last hour; deciding again');
      return { kind: 'again', node: fresh };
    }
    if (recorded.kind === 'failed') {
      const blocked: Decision = {
        kind: 'blocked',
        reason: 'ledger',
        trigger: again.trigger,
        message: `deletion held back: it could not be recorded in the remediation ledger (${recorded.message}); nothing is deleted without a record, trying again in ${formatDuration(LEDGER_RETRY_MS)} (${again.message})`,
        requeueAfterMs: LEDGER_RETRY_MS,
      };
      return { kind: 'decided', node: fresh, decision: blocked, target };
    }

    // 5. Delete, guarded by UID (and, for the Node, the resourceVersion just read). If the call
    //    fails, whether it happened is unknown: the record stays.
    const result = target.kind === 'nodeclaim' ? await this.opts.targets.deleteNodeClaim(target.claim) : await this.opts.targets.deleteNode(fresh);
    if (result === 'changed') {
      log.info({ target: what }, 'the object changed before the delete (precondition failed); deciding again');
      await this.opts.gate.unrecord(uid, log);
      return { kind: 'again', node: fresh };
    }
    if (result === 'gone') {
      // The NodeClaim vanished between lookup and delete: look again. The Node vanished: done.
      await this.opts.gate.unrecord(uid, log);
      return target.kind === 'nodeclaim' ? { kind: 'again', node: fresh } : { kind: 'gone' };
    }
    this.opts.deleted(uid, what);
    return { kind: 'deleted', result: await this.opts.reporter.deleted(fresh, again, target, log) };
  }
}

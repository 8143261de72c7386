import type { Clock } from '../../../clock.js';
import type { ReactionStep } from '../../../metrics/names.js';

/**
 * The controller's own reaction (kube_node_ready_reaction_seconds): each step's clock starts when
 * the watch delivers what lets the controller act, and stops when its write is acknowledged. The
 * queue, the client-side rate limit, the reconcile and the write's round trip are in it; how late
 * the apiserver delivered the event is not (that is the apiserver's, and every watcher's).
 *
 * A replica that starts leading times from the events it saw while it followed: a node that waited
 * for a leader waited for the controller. A clock whose step the leader then does not take (the node
 * was opened meanwhile, it must wait) is cancelled by the node's next reconcile, and a node's clocks
 * go with the node, so a follower holds at most two per node.
 */
export class ReactionClock {
  /** `step/node` -> when the step became possible. */
  private readonly since = new Map<string, number>();

  constructor(
    private readonly clock: Pick<Clock, 'now'>,
    private readonly observe: (step: ReactionStep, seconds: number) => void,
  ) {}

  /** The step became possible for `node` now (the first time counts). */
  start(step: ReactionStep, node: string): void {
    const key = `${step}/${node}`;
    if (!this.since.has(key)) this.since.set(key, this.clock.now());
  }

  /** The step's write was acknowledged: observed, if its start was seen. */
  stop(step: ReactionStep, node: string): void {
    const key = `${step}/${node}`;
    const at = this.since.get(key);
    if (at === undefined) return;
    this.since.delete(key);
    this.observe(step, (this.clock.now() - at) / 1000);
  }

  /**
   * The step was not taken as measured (the node waits for a slot, its worker failed, it went
   * away). With `startedBy`: only a clock started by then (a reconcile that began before the event
   * decided on the copy before it, and does not stop the clock the event started).
   */
  cancel(step: ReactionStep, node: string, startedBy = Infinity): void {
    const key = `${step}/${node}`;
    if ((this.since.get(key) ?? Infinity) <= startedBy) this.since.delete(key);
  }

  forget(node: string): void {
    this.cancel('launch', node);
    this.cancel('open', node);
  }

}

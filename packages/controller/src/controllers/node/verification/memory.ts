
/**
 * What the verification controller remembers of one node between reconciles. Nothing here decides
 * anything: it spares repeated Events and writes. Lost on a restart (every field is either said
 * again once or rebuilt from the cluster).
 */
export interface NodeMemo {
  /** The unusable stored progress last warned about. */
  invalidReported?: string;
  /** The message of the refused worker pod the node was told about (its Event is recorded once per message). */
  refusedReported?: string;
  /** What the node was told it waits for (`uid|overdue`, `uid|os`): its Event is recorded once. */
  waitingReported?: string;
  /** The condition last written (`uid|json`): the cache lags our own writes, so this is compared too. */
  writtenCondition?: string;
  /** When the node was first found able to run the worker (it may have waited for a slot since). */
  launchableSince?: number;
}

/** Each node's memo, by node name, with one forget. */
export class NodeMemory {
  private readonly memos = new Map<string, NodeMemo>();

  /** The node's memo, if anything was remembered. */
  get(name: string): NodeMemo | undefined {
    return this.memos.get(name);
  }

  /** The node's memo, created empty on first use (to remember something). */
  of(name: string): NodeMemo {
    let memo = this.memos.get(name);
    if (!memo) this.memos.set(name, (memo = {}));
    return memo;
  }

  forget(name: string): void {
    this.memos.delete(name);
  }
}

import { addToLedger, pruneLedger, type LedgerEntry, type RecordResult, type RemediationLedger } from '../controllers/node/remediation/ledger.js';

/**
 * The ledger in memory, with the real ledger's rules (ledger.ts addToLedger, pruneLedger). Writes
 * are traced into `trace`, a test's log of calls, so a test sees a record come before its delete.
 */
export class FakeLedger implements RemediationLedger {
  readonly where = 'ConfigMap kube-system/kube-node-ready-controller-remediation';
  entries: LedgerEntry[] = [];
  loads = 0;
  /** Thrown by every load() while set. */
  loadError: Error | undefined;
  /** Thrown by every record() and remove() while set. */
  writeError: Error | undefined;

  constructor(
    private readonly clock: { now(): number },
    private readonly trace: string[] = [],
  ) {}

  async load(): Promise<LedgerEntry[]> {
    this.loads++;
    if (this.loadError) throw this.loadError;
    return pruneLedger(this.entries, this.clock.now());
  }

  async record(entry: LedgerEntry, maxPerHour: number): Promise<RecordResult> {
    this.trace.push(`record ${entry.node}: ${entry.target}`);
    if (this.writeError) throw this.writeError;
    const added = addToLedger(this.entries, entry, this.clock.now(), maxPerHour);
    if (!added.ok) return { ok: false, reason: 'rate-limit', entries: added.entries };
    this.entries = added.entries;
    return { ok: true, entries: added.entries };
  }

  async remove(uid: string): Promise<void> {
    this.trace.push(`unrecord ${uid}`);
    if (this.writeError) throw this.writeError;
    this.entries = this.entries.filter((e) => e.uid !== uid);
  }
}

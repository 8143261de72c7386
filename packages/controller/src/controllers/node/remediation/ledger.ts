import { CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { FIELD_MANAGER, PodLabel, PodLabelValue } from '../../../api/well-known.js';
import type { Clock } from '../../../clock.js';
import type { ControllerConfig } from '../../../config/schema.js';
import { isNotFound, messageOf, statusCode } from '../../../kube/errors.js';
import type { RemediationKube } from './executor.js';
import { HOUR_MS } from './rate-limit.js';

/**
 * The remediation ledger: the deletions issued in the last hour, kept in a ConfigMap so the hourly
 * budget (remediation.maxPerHour) and the "already deleted this node" memory survive leader changes
 * and restarts (docs/remediation.md, "Leader changes and restarts").
 *
 * Where: ConfigMap `<leaderElection.leaseName>-remediation` in worker.namespace (the replicas that
 * compete for one Lease share one ledger), key `deletions.json`: a JSON array, one deletion per line,
 * oldest first:
 *
 *   [
 *     {"uid":"<node uid>","node":"<node name>","target":"NodeClaim default-x7k2p","at":"2025-01-01T10:00:00.000Z"}
 *   ]
 *
 * Rules:
 * - The leader records a deletion here before it issues it, with a resourceVersion-guarded update
 *   (created when missing; a 409 re-reads and tries again). A deletion that cannot be recorded is
 *   not issued.
 * - The ledger enforces maxPerHour itself, in the same guarded write: two leaders at once (a
 *   partition, a stale lease) cannot both spend the last unit of the budget.
 * - Every write drops entries an hour old or older, so the ConfigMap holds at most maxPerHour
 *   entries (one per node: a node recorded again replaces its entry), and never more than
 *   MAX_LEDGER_BYTES.
 * - A ledger that cannot be parsed (edited by hand) is an error, never an empty ledger.
 *
 * Pure functions (parse, prune, add, serialize) are exported for table tests; ConfigMapLedger does
 * the I/O and is tested against the real API server (ledger.sandbox.test.ts).
 */

export interface LedgerEntry {
  /** The Node's UID. */
  uid: string;
  /** The Node's name. */
  node: string;
  /** What was deleted: "NodeClaim x" or "Node y". */
  target: string;
  /** When the deletion was recorded (ms since the epoch). */
  at: number;
}

export type RecordResult =
  /** Recorded: `entries` is the ledger as written (this entry included). */
  | { ok: true; entries: LedgerEntry[] }
  /** Not recorded: the ledger already holds maxPerHour deletions of the last hour (others wrote them). */
  | { ok: false; reason: 'rate-limit'; entries: LedgerEntry[] };

/** What the remediator needs from a ledger (ConfigMapLedger; unit tests pass a recording fake). */
export interface RemediationLedger {
  /** For messages: "ConfigMap <namespace>/<name>". */
  readonly where: string;
  /** The deletions of the last hour. Throws when the ledger cannot be read or parsed. */
  load(): Promise<LedgerEntry[]>;
  /** Records a deletion about to be issued, unless the ledger's hour is full. Throws when it cannot be written. */
  record(entry: LedgerEntry, maxPerHour: number): Promise<RecordResult>;
  /** Removes a node's entry (its deletion was not issued after all). Throws when it cannot be written. */
  remove(uid: string): Promise<void>;
}

/** The ConfigMap key holding the deletions. */
export const LEDGER_KEY = 'deletions.json';
export const LEDGER_SUFFIX = '-remediation';
/** Well under the 1 MiB a ConfigMap may hold: about 1500 entries with names of typical length. */
export const MAX_LEDGER_BYTES = 256 * 1024;
/** Guarded writes tried before giving up when others keep changing the ConfigMap. */
export const LEDGER_WRITE_ATTEMPTS = 5;
const MAX_NAME = 253;

/**
 * The ledger's name for a Lease name: `<leaseName>-remediation`, the Lease name cut (and trailing
 * dots and dashes dropped) so the result stays a valid name of at most 253 characters. The chart's
 * RBAC computes the same (templates/_helpers.tpl "kube-node-ready.remediationLedgerName").
 */
export function ledgerName(leaseName: string): string {
  return `${leaseName.slice(0, MAX_NAME - LEDGER_SUFFIX.length).replace(/[-.]+$/, '')}${LEDGER_SUFFIX}`;
}

/** Where the controller with this configuration keeps its ledger. */
export function ledgerLocation(config: Pick<ControllerConfig, 'worker' | 'leaderElection'>): { namespace: string; name: string } {
  return { namespace: config.worker.namespace, name: ledgerName(config.leaderElection.leaseName) };
}

// ---------------------------------------------------------------------------------------------
// The format, pure

/**
 * Parses the ConfigMap's `deletions.json`. Absent or blank: an empty ledger (a ConfigMap the chart
 * rendered, before the first deletion). Anything else that is not the documented format throws an
 * Error naming the ConfigMap, the key and the entry.
 */
export function parseLedger(text: string | undefined, where: string): LedgerEntry[] {
  if (text === undefined || text.trim() === '') return [];
  const fail = (what: string): never => {
    throw new Error(`${where}, key ${LEDGER_KEY}: ${what}; fix it, or delete the ConfigMap (the hourly budget then starts from zero)`);
  };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return fail(`not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (!Array.isArray(parsed)) return fail(`expected a JSON array of deletions, found ${parsed === null ? 'null' : typeof parsed}`);
  return parsed.map((item: unknown, i) => {
    const at = `entry ${i + 1}`;
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return fail(`${at}: expected an object {"uid", "node", "target", "at"}, found ${show(item)}`);
    const o = item as Record<string, unknown>;
    for (const key of ['uid', 'node', 'target', 'at'] as const) {
      if (typeof o[key] !== 'string') return fail(`${at}: "${key}" must be a string, found ${show(o[key])}`);
    }
    if (o.uid === '') return fail(`${at}: "uid" is empty`);
    const time = typeof o.at === 'string' && /^\d{4}-\d\d-\d\dT/.test(o.at) ? Date.parse(o.at) : NaN;
    if (Number.isNaN(time)) return fail(`${at}: "at" must be an RFC 3339 time such as "2025-01-01T10:00:00Z", found ${show(o.at)}`);
    return { uid: o.uid as string, node: o.node as string, target: o.target as string, at: time };
  });
}

/** One deletion per line, oldest first. */
export function serializeLedger(entries: readonly LedgerEntry[]): string {
  if (entries.length === 0) return '[]\n';
  const lines = entries.map((e) => `  ${JSON.stringify({ uid: e.uid, node: e.node, target: e.target, at: new Date(e.at).toISOString() })}`);
  return `[\n${lines.join(',\n')}\n]\n`;
}

/**
 * The deletions of the last hour, oldest first, one per node (the latest). A time in the future
 * (another replica's clock ahead of ours, a hand edit) counts as now, so it still ages out within
 * the hour.
 */
export function pruneLedger(entries: readonly LedgerEntry[], now: number): LedgerEntry[] {
  const byUid = new Map<string, LedgerEntry>();
  for (const e of entries) {
    const entry = { ...e, at: Math.min(e.at, now) };
    if (now - entry.at >= HOUR_MS) continue;
    const prev = byUid.get(entry.uid);
    if (!prev || prev.at <= entry.at) byUid.set(entry.uid, entry);
  }
  return [...byUid.values()].sort((a, b) => a.at - b.at);
}

/**
 * The ledger with `entry` added (replacing the node's earlier entry), or `ok: false` when the last
 * hour already holds maxPerHour deletions of other nodes.
 */
export function addToLedger(entries: readonly LedgerEntry[], entry: LedgerEntry, now: number, maxPerHour: number): { ok: true; entries: LedgerEntry[] } | { ok: false; entries: LedgerEntry[] } {
  const recent = pruneLedger(entries, now);
  const others = recent.filter((e) => e.uid !== entry.uid);
  if (others.length >= maxPerHour) return { ok: false, entries: recent };
  return { ok: true, entries: pruneLedger([...others, entry], now) };
}

function show(value: unknown): string {
  const s = value === undefined ? 'nothing' : JSON.stringify(value);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

// ---------------------------------------------------------------------------------------------
// The ConfigMap

export interface ConfigMapLedgerOptions {
  kube: RemediationKube;
  clock: Clock;
  namespace: string;
  name: string;
  /** Size limit of the serialized ledger (tests make it small). */
  maxBytes?: number;
}

type Change = { write: false } | { write: true; entries: LedgerEntry[] };

export class ConfigMapLedger implements RemediationLedger {
  private readonly core: CoreV1Api;

  constructor(private readonly opts: ConfigMapLedgerOptions) {
    this.core = opts.kube.kubeConfig.makeApiClient(CoreV1Api);
  }

  get where(): string {
    return `ConfigMap ${this.opts.namespace}/${this.opts.name}`;
  }

  async load(): Promise<LedgerEntry[]> {
    const current = await this.read();
    return pruneLedger(parseLedger(current?.data?.[LEDGER_KEY], this.where), this.opts.clock.now());
  }

  async record(entry: LedgerEntry, maxPerHour: number): Promise<RecordResult> {
    let refused: LedgerEntry[] | undefined;
    const written = await this.update((entries, now) => {
      const added = addToLedger(entries, entry, now, maxPerHour);
      if (added.ok) return { write: true, entries: added.entries };
      refused = added.entries;
      return { write: false };
    });
    return refused ? { ok: false, reason: 'rate-limit', entries: refused } : { ok: true, entries: written };
  }

  async remove(uid: string): Promise<void> {
    await this.update((entries, now) => (entries.some((e) => e.uid === uid) ? { write: true, entries: pruneLedger(entries.filter((e) => e.uid !== uid), now) } : { write: false }));
  }

  /** Read, change, write guarded by the resourceVersion read (or create); on 409 read again. */
  private async update(change: (entries: LedgerEntry[], now: number) => Change): Promise<LedgerEntry[]> {
    for (let attempt = 1; attempt <= LEDGER_WRITE_ATTEMPTS; attempt++) {
      const current = await this.read();
      const now = this.opts.clock.now();
      const entries = parseLedger(current?.data?.[LEDGER_KEY], this.where);
      const next = change(entries, now);
      if (!next.write) return pruneLedger(entries, now);
      const text = serializeLedger(next.entries);
      const bytes = Buffer.byteLength(text);
      const max = this.opts.maxBytes ?? MAX_LEDGER_BYTES;
      if (bytes > max) {
        throw new Error(`${this.where}: the ledger would hold ${next.entries.length} deletions (${bytes} bytes), more than the ${max} bytes it may; remediation.maxPerHour is too high for one ConfigMap`);
      }
      try {
        await this.write(current, text);
        return next.entries;
      } catch (err) {
        if (statusCode(err) === 409) continue; // changed (or created) by someone else since we read it
        throw new Error(`${this.where}: ${current ? 'update' : 'create'} failed: ${messageOf(err)}`, { cause: err });
      }
    }
    throw new Error(`${this.where}: changed by someone else on each of ${LEDGER_WRITE_ATTEMPTS} attempts to write it`);
  }

  private async read(): Promise<V1ConfigMap | undefined> {
    const { namespace, name } = this.opts;
    try {
      return await this.opts.kube.read('get configmap', () => this.core.readNamespacedConfigMap({ namespace, name }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`${this.where}: read failed: ${messageOf(err)}`, { cause: err });
    }
  }

  private async write(current: V1ConfigMap | undefined, text: string): Promise<void> {
    const { namespace, name } = this.opts;
    if (!current) {
      const body: V1ConfigMap = {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace, labels: { [PodLabel.Name]: PodLabelValue.Name, [PodLabel.Component]: 'controller', [PodLabel.ManagedBy]: PodLabelValue.ManagedBy } },
        data: { [LEDGER_KEY]: text },
      };
      await this.opts.kube.write('create configmap', () => this.core.createNamespacedConfigMap({ namespace, body, fieldManager: FIELD_MANAGER }));
      return;
    }
    // Only our key changes: labels, annotations (the Helm chart renders this ConfigMap too, and owns
    // it through them), other keys and `immutable` are sent back as read.
    const m = current.metadata ?? {};
    const body: V1ConfigMap = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name,
        namespace,
        resourceVersion: m.resourceVersion ?? '',
        ...(m.labels ? { labels: m.labels } : {}),
        ...(m.annotations ? { annotations: m.annotations } : {}),
        ...(m.ownerReferences ? { ownerReferences: m.ownerReferences } : {}),
        ...(m.finalizers ? { finalizers: m.finalizers } : {}),
      },
      data: { ...current.data, [LEDGER_KEY]: text },
      ...(current.binaryData ? { binaryData: current.binaryData } : {}),
      ...(current.immutable !== undefined ? { immutable: current.immutable } : {}),
    };
    await this.opts.kube.write('update configmap', () => this.core.replaceNamespacedConfigMap({ namespace, name, body, fieldManager: FIELD_MANAGER }));
  }
}

import { describe, expect, it } from 'vitest';
import { testConfig } from '../../../testing/builders.js';
import { addToLedger, LEDGER_KEY, ledgerLocation, ledgerName, parseLedger, pruneLedger, serializeLedger, type LedgerEntry } from './ledger.js';

// The ledger's format and rules, pure. The ConfigMap I/O (create, guarded update, 409 retry,
// size limit, what is kept of the object) runs against the real API server in ledger.sandbox.test.ts.

const MIN = 60_000;
const HOUR = 60 * MIN;
const NOW = Date.UTC(2025, 0, 1, 12);
const WHERE = 'ConfigMap kube-system/kube-node-ready-controller-remediation';
const entry = (uid: string, minutesAgo: number, node = `node-${uid}`): LedgerEntry => ({ uid, node, target: `NodeClaim claim-${uid}`, at: NOW - minutesAgo * MIN });

describe('ledger name and place', () => {
  it('<leaderElection.leaseName>-remediation in worker.namespace', () => {
    expect(ledgerLocation(testConfig())).toEqual({ namespace: 'kube-system', name: 'kube-node-ready-controller-remediation' });
    expect(ledgerLocation(testConfig({ worker: { namespace: 'node-ready' }, leaderElection: { leaseName: 'knr' } }))).toEqual({ namespace: 'node-ready', name: 'knr-remediation' });
  });

  it('stays a valid name of at most 253 characters for the longest Lease names', () => {
    const long = `${'a'.repeat(240)}.b-c`;
    const name = ledgerName(long);
    expect(name).toHaveLength(252); // cut to 241 characters, the trailing "." dropped
    expect(name).toBe(`${'a'.repeat(240)}-remediation`);
    expect(ledgerName('x'.repeat(253))).toHaveLength(253);
    expect(ledgerName('x'.repeat(253))).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
  });
});

describe('parseLedger', () => {
  it('reads what serializeLedger writes, one deletion per line', () => {
    const entries = [entry('a', 30), entry('b', 5)];
    const text = serializeLedger(entries);
    expect(text).toBe(
      '[\n' +
        '  {"uid":"a","node":"node-a","target":"NodeClaim claim-a","at":"2025-01-01T11:30:00.000Z"},\n' +
        '  {"uid":"b","node":"node-b","target":"NodeClaim claim-b","at":"2025-01-01T11:55:00.000Z"}\n' +
        ']\n',
    );
    expect(parseLedger(text, WHERE)).toEqual(entries);
    expect(serializeLedger([])).toBe('[]\n');
  });

  it('no key, or a blank one (the ConfigMap as the chart renders it): an empty ledger', () => {
    expect(parseLedger(undefined, WHERE)).toEqual([]);
    expect(parseLedger('', WHERE)).toEqual([]);
    expect(parseLedger(' \n', WHERE)).toEqual([]);
    expect(parseLedger('[]', WHERE)).toEqual([]);
  });

  it('accepts any RFC 3339 time and ignores fields it does not know', () => {
    expect(parseLedger('[{"uid":"u","node":"n","target":"Node n","at":"2025-01-01T13:00:00+01:00","note":"by hand"}]', WHERE)).toEqual([
      { uid: 'u', node: 'n', target: 'Node n', at: NOW },
    ]);
  });

  it.each([
    ['not JSON', '[{"uid": "a",', /^not valid JSON \(/],
    ['not an array', '{"uid":"a"}', /^expected a JSON array of deletions, found object$/],
    ['null', 'null', /^expected a JSON array of deletions, found null$/],
    ['an entry that is not an object', '["a"]', /^entry 1: expected an object \{"uid", "node", "target", "at"\}, found "a"$/],
    ['a missing field', '[{"uid":"a","node":"n","target":"Node n","at":"2025-01-01T00:00:00Z"},{"uid":"b","node":"n","at":"2025-01-01T00:00:00Z"}]', /^entry 2: "target" must be a string, found nothing$/],
    ['an empty uid', '[{"uid":"","node":"n","target":"Node n","at":"2025-01-01T00:00:00Z"}]', /^entry 1: "uid" is empty$/],
    ['a number for a time', '[{"uid":"a","node":"n","target":"Node n","at":1735689600000}]', /^entry 1: "at" must be a string, found 1735689600000$/],
    ['a time that is not RFC 3339', '[{"uid":"a","node":"n","target":"Node n","at":"yesterday"}]', /^entry 1: "at" must be an RFC 3339 time such as "2025-01-01T10:00:00Z", found "yesterday"$/],
    ['an impossible date', '[{"uid":"a","node":"n","target":"Node n","at":"2025-13-45T00:00:00Z"}]', /^entry 1: "at" must be an RFC 3339 time/],
  ])('a hand edit that breaks it (%s): an error naming the ConfigMap, the key and the entry, never an empty ledger', (_, text, detail) => {
    let message = '';
    try {
      parseLedger(text, WHERE);
    } catch (err) {
      message = (err as Error).message;
    }
    const prefix = `${WHERE}, key ${LEDGER_KEY}: `;
    const suffix = '; fix it, or delete the ConfigMap (the hourly budget then starts from zero)';
    expect(message.startsWith(prefix), message).toBe(true);
    expect(message.endsWith(suffix), message).toBe(true);
    expect(message.slice(prefix.length, -suffix.length)).toMatch(detail);
  });

  it('quotes long values short', () => {
    expect(() => parseLedger(`[{"uid":"a","node":"n","target":"Node n","at":"${'x'.repeat(500)}"}]`, WHERE)).toThrow(/found "x{56}\.\.\.;/);
  });
});

describe('pruneLedger', () => {
  it('keeps the last hour, oldest first', () => {
    expect(pruneLedger([entry('new', 1), entry('old', 60), entry('mid', 59)], NOW).map((e) => e.uid)).toEqual(['mid', 'new']);
  });

  it('one entry per node: the latest', () => {
    expect(pruneLedger([entry('a', 30, 'first'), entry('b', 20), entry('a', 10, 'second')], NOW)).toEqual([entry('b', 20), entry('a', 10, 'second')]);
  });

  it('a time in the future (another clock ahead, a hand edit) counts as now, so it still ages out within the hour', () => {
    const ahead = { ...entry('a', 0), at: NOW + 365 * 24 * HOUR };
    expect(pruneLedger([ahead], NOW)).toEqual([{ ...ahead, at: NOW }]);
    expect(pruneLedger(pruneLedger([ahead], NOW), NOW + HOUR)).toEqual([]);
  });
});

describe('addToLedger', () => {
  it('adds while the last hour holds fewer than maxPerHour deletions, pruning as it goes', () => {
    const full = [entry('a', 61), entry('b', 30), entry('c', 10)];
    const added = addToLedger(full, entry('d', 0), NOW, 3);
    expect(added).toEqual({ ok: true, entries: [entry('b', 30), entry('c', 10), entry('d', 0)] });
  });

  it('refuses once the hour holds maxPerHour deletions of other nodes', () => {
    expect(addToLedger([entry('b', 30), entry('c', 10)], entry('d', 0), NOW, 2)).toEqual({ ok: false, entries: [entry('b', 30), entry('c', 10)] });
  });

  it('a node recorded again replaces its entry, and is not held back by it', () => {
    expect(addToLedger([entry('b', 30), entry('c', 10)], entry('c', 0), NOW, 2)).toEqual({ ok: true, entries: [entry('b', 30), entry('c', 0)] });
  });

  it('bounded: however many writes, at most maxPerHour entries', () => {
    let entries: LedgerEntry[] = [];
    for (let i = 0; i < 500; i++) {
      const now = NOW + i * MIN;
      const added = addToLedger(entries, { uid: `u${i}`, node: `n${i}`, target: `Node n${i}`, at: now }, now, 5);
      entries = added.entries;
      expect(entries.length).toBeLessThanOrEqual(5);
    }
    // 5 per rolling hour: those of the last hour are the last five accepted.
    expect(entries).toHaveLength(5);
  });

  it('a hand-edited ledger with more than maxPerHour entries (maxPerHour lowered) is not added to until it drains', () => {
    const many = [entry('a', 50), entry('b', 40), entry('c', 30), entry('d', 20)];
    expect(addToLedger(many, entry('e', 0), NOW, 2).ok).toBe(false);
    expect(addToLedger(many, entry('e', 0), NOW + 21 * MIN, 2).ok).toBe(false); // c and d are still in the hour
    expect(addToLedger(many, entry('e', 0), NOW + 31 * MIN, 2)).toMatchObject({ ok: true, entries: [entry('d', 20), entry('e', 0)] });
  });
});

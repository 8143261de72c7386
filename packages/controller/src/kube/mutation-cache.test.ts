import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Phase } from '../controllers/node/verification/types.js';
import { aNode } from '../testing/builders.js';
import { compareResourceVersions, MutationCache } from './mutation-cache.js';

/** An informer cache to move by hand. */
function informer(...nodes: V1Node[]) {
  const byName = new Map(nodes.map((n) => [n.metadata?.name ?? '', n]));
  return {
    get: (name: string) => byName.get(name),
    deliver: (node: V1Node) => byName.set(node.metadata?.name ?? '', node),
    delete: (name: string) => byName.delete(name),
  };
}

const at = (rv: string, uid = 'uid-n1') => aNode('n1').uid(uid).resourceVersion(rv).tainted().build();
const written = (rv: string) => aNode('n1').resourceVersion(rv).tainted().withState({ attempt: 1, failures: 0, phase: Phase.Verifying }).build();

describe("MutationCache (uncached: 'gone', as for Nodes)", () => {
  it("serves our own write until the informer delivers it (or something newer), then the informer's copy", () => {
    const cache = informer(at('100'));
    const copies = new MutationCache(cache, 'gone');
    expect(copies.get('n1')).toBe(cache.get('n1'));

    const ours = written('105');
    copies.observe(ours);
    expect(copies.get('n1')).toBe(ours);

    cache.deliver(at('103')); // a kubelet update from before our write: still behind
    expect(copies.get('n1')).toBe(ours);

    const caughtUp = written('105');
    cache.deliver(caughtUp);
    expect(copies.get('n1')).toBe(caughtUp);
    cache.deliver(at('103')); // (cannot happen with a watch; shows the remembered copy is gone)
    expect(copies.get('n1')?.metadata?.resourceVersion).toBe('103');
  });

  it('ignores a copy older than, or as old as, what it already has', () => {
    const cache = informer(at('100'));
    const copies = new MutationCache(cache, 'gone');
    copies.observe(written('99'));
    copies.observe(written('100'));
    expect(copies.get('n1')).toBe(cache.get('n1'));
    const newer = written('120');
    copies.observe(newer);
    copies.observe(written('110'));
    expect(copies.get('n1')).toBe(newer);
  });

  it('a node the informer no longer has is gone, whatever we wrote to it', () => {
    const cache = informer(at('100'));
    const copies = new MutationCache(cache, 'gone');
    copies.observe(written('105'));
    cache.delete('n1');
    expect(copies.get('n1')).toBeUndefined();
    cache.deliver(at('90'));
    expect(copies.get('n1')?.metadata?.resourceVersion).toBe('90');
  });

  it('a node re-created under the same name: the newer object wins, whichever side has it', () => {
    const cache = informer(at('100', 'old'));
    const copies = new MutationCache(cache, 'gone');
    const recreated = at('150', 'new'); // read live after a write to the old one was refused
    copies.observe(recreated);
    expect(copies.get('n1')).toBe(recreated);
    cache.deliver(at('160', 'new'));
    expect(copies.get('n1')?.metadata?.uid).toBe('new');
  });

  it('without comparable versions, trusts the informer', () => {
    const cache = informer(at('100'));
    const copies = new MutationCache(cache, 'gone');
    copies.observe(written('opaque-1'));
    expect(copies.get('n1')).toBe(cache.get('n1'));
  });
});

describe("MutationCache (uncached: 'own', as for the NodeVerifications this controller creates)", () => {
  it('our created object stands in until the informer has it; one of another UID replaces what we knew', () => {
    const cache = informer();
    const copies = new MutationCache(cache, 'own');
    const created = at('200', 'nv-1');
    copies.observe(created);
    expect(copies.get('n1')).toBe(created);
    cache.deliver(at('200', 'nv-1'));
    expect(copies.get('n1')).toBe(cache.get('n1'));
    // Deleted and created again before the watch said so: the object we know is replaced even
    // where its version does not compare as newer than our last copy of the other one.
    const other = informer();
    const again = new MutationCache(other, 'own');
    again.observe(at('300', 'nv-1'));
    const replacement = at('250', 'nv-2');
    again.observe(replacement);
    expect(again.get('n1')).toBe(replacement);
  });
});

describe('compareResourceVersions (KEP-5504)', () => {
  it.each([
    ['9', '10', -1],
    ['10', '9', 1],
    ['123', '123', 0],
    ['123', '124', -1],
    ['18446744073709551616', '18446744073709551615', 1],
  ] as const)('%s vs %s is %d', (a, b, expected) => {
    expect(compareResourceVersions(a, b)).toBe(expected);
  });

  it.each([
    ['', '1'],
    ['0', '1'],
    ['01', '1'],
    ['1a', '1'],
    [undefined, '1'],
  ])('%j is not comparable', (a, b) => {
    expect(compareResourceVersions(a, b)).toBeUndefined();
    expect(compareResourceVersions(b, a)).toBeUndefined();
  });
});

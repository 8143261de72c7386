import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { aNode } from '../../../testing/builders.js';
import { compareResourceVersions, NodeCopies } from './node-copies.js';
import { Phase } from './types.js';

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

describe('NodeCopies', () => {
  it("serves our own write until the informer delivers it (or something newer), then the informer's copy", () => {
    const cache = informer(at('100'));
    const copies = new NodeCopies(cache);
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
    const copies = new NodeCopies(cache);
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
    const copies = new NodeCopies(cache);
    copies.observe(written('105'));
    cache.delete('n1');
    expect(copies.get('n1')).toBeUndefined();
    cache.deliver(at('90'));
    expect(copies.get('n1')?.metadata?.resourceVersion).toBe('90');
  });

  it('a node re-created under the same name: the newer object wins, whichever side has it', () => {
    const cache = informer(at('100', 'old'));
    const copies = new NodeCopies(cache);
    const recreated = at('150', 'new'); // read live after a write to the old one was refused
    copies.observe(recreated);
    expect(copies.get('n1')).toBe(recreated);
    cache.deliver(at('160', 'new'));
    expect(copies.get('n1')?.metadata?.uid).toBe('new');
  });

  it('without comparable versions, trusts the informer', () => {
    const cache = informer(at('100'));
    const copies = new NodeCopies(cache);
    copies.observe(written('opaque-1'));
    expect(copies.get('n1')).toBe(cache.get('n1'));
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

import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { CacheIndex } from './informer.js';

describe('CacheIndex', () => {
  const pod = (name: string, node?: string, namespace = 'ns'): V1Pod => ({ metadata: { name, namespace, ...(node ? { annotations: { node } } : {}) } });
  const names = (pods: readonly V1Pod[]) => pods.map((p) => p.metadata?.name).sort();
  const index = () => new CacheIndex<V1Pod>((p) => p.metadata?.annotations?.['node']);

  it('files objects under their key, and leaves out those without one', () => {
    const i = index();
    for (const p of [pod('a', 'n1'), pod('b', 'n1'), pod('c', 'n2'), pod('d')]) i.put(p);
    expect(names(i.get('n1'))).toEqual(['a', 'b']);
    expect(names(i.get('n2'))).toEqual(['c']);
    expect(i.get('n3')).toEqual([]);
  });

  it('keeps the newest copy, moves an object whose key changed, and forgets deleted ones', () => {
    const i = index();
    i.put(pod('a', 'n1'));
    const newer = { ...pod('a', 'n1'), status: { phase: 'Succeeded' } };
    i.put(newer);
    expect(i.get('n1')).toEqual([newer]);
    i.put(pod('a', 'n2'));
    expect(i.get('n1')).toEqual([]);
    expect(names(i.get('n2'))).toEqual(['a']);
    i.put(pod('a'));
    expect(i.get('n2')).toEqual([]);
    i.put(pod('a', 'n2'));
    i.remove(pod('a'));
    expect(i.get('n2')).toEqual([]);
    i.remove(pod('never-seen', 'n2'));
  });

  it('tells objects of the same name in other namespaces apart', () => {
    const i = index();
    i.put(pod('a', 'n1', 'ns1'));
    i.put(pod('a', 'n1', 'ns2'));
    i.remove(pod('a', 'n1', 'ns1'));
    expect(i.get('n1').map((p) => p.metadata?.namespace)).toEqual(['ns2']);
  });
});

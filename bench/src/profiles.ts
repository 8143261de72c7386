import type { V1Node } from '@kubernetes/client-node';
import { parseConfig } from '../../packages/controller/src/config/load.js';
import { Profiles } from '../../packages/controller/src/config/profiles.js';

/**
 * `node dist/bench.mjs profiles`: what choosing a node's profile costs per reconcile (config
 * profiles, docs/profiles.md). No cluster: the lookup is pure. 5000 nodes spread over the pools,
 * each profile selecting by one label and one set-based requirement; the node no profile selects
 * walks them all, which is the worst case.
 */
export interface ProfileLookupResult {
  profiles: number;
  nodes: number;
  lookups: number;
  nsPerLookup: number;
  /** Nodes selected by no profile (the walk over every profile). */
  nsPerLookupNoMatch: number;
}

export function measureProfileLookup(count: number, nodes = 5000, rounds = 40): ProfileLookupResult {
  const config = parseConfig({
    profiles: Array.from({ length: count }, (_, i) => ({
      name: `pool-${i}`,
      nodeSelector: { matchLabels: { 'karpenter.sh/nodepool': `pool-${i}` }, matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['a', 'b', 'c'] }] },
    })),
  });
  const profiles = new Profiles(config);
  const labels = (pool: string): Record<string, string> => ({
    'karpenter.sh/nodepool': pool,
    'topology.kubernetes.io/zone': 'b',
    'kubernetes.io/os': 'linux',
    'node.kubernetes.io/instance-type': 'm5.large',
  });
  const spread: V1Node[] = Array.from({ length: nodes }, (_, i) => ({ metadata: { name: `n${i}`, labels: labels(`pool-${i % count}`) } }));
  const unmatched: V1Node[] = Array.from({ length: nodes }, (_, i) => ({ metadata: { name: `u${i}`, labels: labels('other') } }));
  const time = (list: readonly V1Node[]): number => {
    let sink = 0;
    for (const node of list) sink += profiles.of(node).name.length; // warm-up
    const start = process.hrtime.bigint();
    for (let r = 0; r < rounds; r++) for (const node of list) sink += profiles.of(node).name.length;
    const ns = Number(process.hrtime.bigint() - start);
    if (sink === 0) throw new Error('unreachable');
    return ns / (rounds * list.length);
  };
  return { profiles: count, nodes, lookups: rounds * nodes, nsPerLookup: Math.round(time(spread)), nsPerLookupNoMatch: Math.round(time(unmatched)) };
}

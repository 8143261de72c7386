import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { aNode } from '../../../testing/builders.js';
import { matchNodeClaim, type NodeClaim } from './executor.js';

// The NodeClaim lookup rules, pure. Deleting (preconditions, 404 on the group) is proven against the
// real API server in remediation.sandbox.test.ts.

const claim = (name: string, status: NodeClaim['status'] = {}, meta: NonNullable<NodeClaim['metadata']> = {}): NodeClaim => ({
  apiVersion: 'karpenter.sh/v1',
  kind: 'NodeClaim',
  metadata: { name, uid: `uid-${name}`, ...meta },
  status,
});

const node = (name: string, providerID?: string, owner?: { name: string; uid: string; apiVersion?: string }): V1Node => {
  const n = aNode(name).build();
  if (providerID) n.spec = { ...n.spec, providerID };
  if (owner) n.metadata = { ...n.metadata, ownerReferences: [{ apiVersion: owner.apiVersion ?? 'karpenter.sh/v1', kind: 'NodeClaim', name: owner.name, uid: owner.uid }] };
  return n;
};

describe('matchNodeClaim', () => {
  const claims = [
    claim('general-a', { providerID: 'aws:///us-east-1a/i-0aaa', nodeName: 'ip-10-0-0-1' }),
    claim('general-b', { providerID: 'aws:///us-east-1a/i-0bbb', nodeName: 'ip-10-0-0-2' }),
    claim('general-c', {}),
  ];

  it('1. by status.providerID', () => {
    expect(matchNodeClaim(node('renamed', 'aws:///us-east-1a/i-0bbb'), claims)).toEqual({
      kind: 'nodeclaim',
      claim: { name: 'general-b', uid: 'uid-general-b' },
      matchedBy: 'providerID',
      deleting: false,
      doNotDisrupt: false,
    });
  });

  it('2. by status.nodeName when no provider ID matches', () => {
    expect(matchNodeClaim(node('ip-10-0-0-1'), claims)).toMatchObject({ kind: 'nodeclaim', claim: { name: 'general-a' }, matchedBy: 'nodeName' });
  });

  it('2. not by name when the claim names another machine (a node re-created on a new instance)', () => {
    expect(matchNodeClaim(node('ip-10-0-0-1', 'aws:///us-east-1a/i-0zzz'), claims)).toEqual({ kind: 'node', why: 'no-nodeclaim' });
  });

  it('3. by the node\'s ownerReference (name and UID) when the claim has no status yet', () => {
    expect(matchNodeClaim(node('fresh', undefined, { name: 'general-c', uid: 'uid-general-c' }), claims)).toMatchObject({
      kind: 'nodeclaim',
      claim: { name: 'general-c' },
      matchedBy: 'ownerReference',
    });
    // A stale owner reference (same name, another UID) or another API group matches nothing.
    expect(matchNodeClaim(node('fresh', undefined, { name: 'general-c', uid: 'other' }), claims)).toEqual({ kind: 'node', why: 'no-nodeclaim' });
    expect(matchNodeClaim(node('fresh', undefined, { name: 'general-c', uid: 'uid-general-c', apiVersion: 'example.com/v1' }), claims)).toEqual({ kind: 'node', why: 'no-nodeclaim' });
  });

  it('no match: the Node itself', () => {
    expect(matchNodeClaim(node('plain', 'sandbox:///plain'), claims)).toEqual({ kind: 'node', why: 'no-nodeclaim' });
    expect(matchNodeClaim(node('plain'), [])).toEqual({ kind: 'node', why: 'no-nodeclaim' });
  });

  it('two matches: ambiguous, nothing is deleted', () => {
    const twins = [claim('x', { providerID: 'aws:///i-1' }), claim('y', { providerID: 'aws:///i-1' })];
    expect(matchNodeClaim(node('n', 'aws:///i-1'), twins)).toEqual({ kind: 'ambiguous', matchedBy: 'providerID', claims: ['x', 'y'] });
  });

  it('reports a claim already being deleted, and Karpenter\'s do-not-disrupt on the claim', () => {
    const list = [claim('d', { providerID: 'p://1' }, { deletionTimestamp: '2025-01-01T00:00:00Z', annotations: { 'karpenter.sh/do-not-disrupt': 'true' } })];
    expect(matchNodeClaim(node('n', 'p://1'), list)).toMatchObject({ deleting: true, doNotDisrupt: true });
  });
});

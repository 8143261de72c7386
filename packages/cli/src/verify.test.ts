import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '@kube-node-ready/core';
import { parseConfig, type ControllerConfig, type NodeVerification, type NodeVerificationStatus } from '@kube-node-ready/controller';
import { reverifyPlan } from './verify.js';

const config = parseConfig({}) as ControllerConfig;
const TAINT = { key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' };
const OTHER = { key: 'other/taint', value: 'x', effect: 'NoSchedule' };
const TEST = { op: 'test', path: '/metadata/resourceVersion', value: '42' };
const REMOVE_LABEL = { op: 'remove', path: '/metadata/labels/node-ready~1verified' };

function node(opts: { verified?: boolean; taints?: V1Taint[] }): V1Node {
  return {
    metadata: { name: 'n1', uid: 'u1', resourceVersion: '42', labels: { team: 'a', ...(opts.verified ? { 'node-ready/verified': 'true' } : {}) } },
    spec: opts.taints ? { taints: opts.taints } : {},
  };
}

const nv = (status: NodeVerificationStatus, nodeUID = 'u1'): NodeVerification => ({ metadata: { name: 'n1' }, spec: { nodeName: 'n1', nodeUID }, status });
const passed = nv({ phase: 'Passed', attempt: 1, failures: 0, verifiedAt: '2025-01-01T00:00:42Z' });

describe('kube-node-ready verify: what restarts a verification', () => {
  it('a verified node loses its label, gets the taint back (after the taints it has) and its NodeVerification is deleted', () => {
    expect(reverifyPlan(node({ verified: true, taints: [OTHER] }), passed, config, true)).toEqual({
      patch: [TEST, REMOVE_LABEL, { op: 'add', path: '/spec/taints/-', value: TAINT }],
      deleteVerification: true,
    });
    // A node without any taint gets the list.
    expect(reverifyPlan(node({ verified: true }), undefined, config, true).patch).toEqual([TEST, REMOVE_LABEL, { op: 'add', path: '/spec/taints', value: [TAINT] }]);
  });

  it('a failed node (tainted, never labelled) needs no node change: only its NodeVerification is deleted, so attempts start again', () => {
    const failed = nv({ phase: 'Failed', attempt: 3, failures: 3 });
    expect(reverifyPlan(node({ taints: [OTHER, TAINT] }), failed, config, true)).toEqual({ patch: [TEST], deleteVerification: true });
    expect(reverifyPlan(node({ taints: [TAINT] }), failed, config, false)).toEqual({ patch: [TEST], deleteVerification: true });
  });

  it('--no-taint on an open node keeps its NodeVerification: without the taint, that is what has the controller verify it', () => {
    expect(reverifyPlan(node({ verified: true, taints: [OTHER] }), passed, config, false)).toEqual({ patch: [TEST, REMOVE_LABEL], deleteVerification: false });
  });

  it('--no-taint on an open node the controller would not verify again (no progress of its own, or failed) is refused before any write', () => {
    for (const [progress, said] of [
      [undefined, 'no NodeVerification of its own'],
      [nv({ phase: 'Passed', attempt: 1, failures: 0 }, 'u0'), 'no NodeVerification of its own'],
      [nv({ phase: 'Failed', attempt: 3, failures: 3 }), 'its NodeVerification says Failed'],
    ] as const) {
      const refused = (() => {
        try {
          reverifyPlan(node({ verified: true }), progress, config, false);
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as Error).message).toMatch(new RegExp(`^--no-taint: the node carries no verification taint and ${said}: .*without --no-taint`));
    }
  });

  it('--no-taint with nodeManagement.verifyUntaintedNodes: the controller verifies any node, so the NodeVerification is deleted', () => {
    const untainted = parseConfig({ nodeManagement: { verifyUntaintedNodes: true } }) as ControllerConfig;
    expect(reverifyPlan(node({ verified: true }), undefined, untainted, false)).toEqual({ patch: [TEST, REMOVE_LABEL], deleteVerification: true });
  });
});

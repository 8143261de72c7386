import { describe, expect, it } from 'vitest';
import { BRING_UP, bringUpPlan, CNI_AGENT_TAINT, REALISTIC_RANGES } from './bring-up.js';
import type { k8s } from './kube.js';

const CREATED = '2026-01-01T00:00:00Z';
const created = Date.parse(CREATED);
const node = (name: string, annotations: Record<string, string>): k8s.V1Node => ({ metadata: { name, creationTimestamp: CREATED as unknown as Date, annotations } });

describe('bring-up plan (pod side)', () => {
  it('reads explicit knobs, counted from the node creation', () => {
    expect(bringUpPlan(node('n', { [BRING_UP.cniDelay]: '15s', [BRING_UP.imagePullDelay]: '10s' }))).toEqual({ cniReadyAt: created + 15_000, imagePullMs: 10_000 });
    expect(bringUpPlan(node('n', {}))).toEqual({});
  });

  it('the realistic preset picks per node, deterministically, within its ranges; explicit knobs override it', () => {
    const plans = Array.from({ length: 50 }, (_, i) => bringUpPlan(node(`node-${i}`, { [BRING_UP.preset]: 'realistic' })));
    const within = (v: number, [min, max]: readonly [number, number]) => {
      expect(v).toBeGreaterThanOrEqual(min);
      expect(v).toBeLessThanOrEqual(max);
    };
    for (const p of plans) {
      within(p.readyAt! - created, REALISTIC_RANGES.notReadyMs);
      within(p.cniReadyAt! - p.readyAt!, REALISTIC_RANGES.cniDelayMs);
      within(p.imagePullMs!, REALISTIC_RANGES.imagePullMs);
      expect(p.taintRemovals).toHaveLength(1);
      expect(p.taintRemovals![0]!.key).toBe(CNI_AGENT_TAINT);
      within(p.taintRemovals![0]!.at - created, REALISTIC_RANGES.agentTaintMs);
    }
    expect(new Set(plans.map((p) => p.cniReadyAt)).size).toBeGreaterThan(10);
    expect(bringUpPlan(node('node-7', { [BRING_UP.preset]: 'realistic' }))).toEqual(plans[7]);
    // No CNI delay of its own: pods still wait for the node to turn Ready.
    const noCni = bringUpPlan(node('node-7', { [BRING_UP.preset]: 'realistic', [BRING_UP.cniDelay]: '0' }));
    expect(noCni.cniReadyAt).toBe(noCni.readyAt);
  });

  it('counts the CNI delay from the moment the node turns Ready, and reads the taint removals', () => {
    const p = bringUpPlan(node('n', { [BRING_UP.notReadyFor]: '20s', [BRING_UP.cniDelay]: '5s', [BRING_UP.removeTaintsAfter]: `${CNI_AGENT_TAINT}=30s, other=1m` }));
    expect(p).toEqual({
      readyAt: created + 20_000,
      cniReadyAt: created + 25_000,
      taintRemovals: [
        { key: CNI_AGENT_TAINT, at: created + 30_000 },
        { key: 'other', at: created + 60_000 },
      ],
    });
    expect(bringUpPlan(node('n', { [BRING_UP.removeTaintsAfter]: 'nonsense' })).invalid).toEqual([expect.stringMatching(/"nonsense" is not KEY=DURATION/)]);
  });

  it('ignores a knob it cannot read, and says why', () => {
    const p = bringUpPlan(node('n', { [BRING_UP.cniDelay]: 'soon', [BRING_UP.preset]: 'slow' }));
    expect(p.cniReadyAt).toBeUndefined();
    expect(p.invalid).toEqual([expect.stringMatching(/^sandbox.kube-node-ready.io\/bring-up: unknown preset "slow"/), expect.stringMatching(/cni-delay: invalid duration "soon"/)]);
  });
});

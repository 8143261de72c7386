import { silentLogger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { KubeEventRecorder } from '../../../events/recorder.js';
import { RecordingSink } from '../../../testing/event-sink.js';
import { FakeClock } from '../../../testing/fake-clock.js';
import { KubeRemediationEvents } from './events.js';
import { RemediationReason } from './names.js';

function setup() {
  const clock = new FakeClock('2025-01-01T00:00:00Z');
  const sink = new RecordingSink();
  const recorder = new KubeEventRecorder({ sink, clock, log: silentLogger(), component: 'kube-node-ready-controller', instance: 'pod-a' });
  const events = new KubeRemediationEvents(recorder);
  return { clock, sink, events };
}

describe('KubeRemediationEvents', () => {
  it('node Events go through the controller\'s recorder as node Events (involvedObject Node, UID = name)', async () => {
    const { events, sink } = setup();
    await events.node('n1', 'Warning', RemediationReason.Blocked, 'deletion paused');
    expect(sink.calls).toHaveLength(1);
    expect(sink.calls[0]).toMatchObject({
      op: 'create',
      namespace: 'default',
      event: { involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'n1', uid: 'n1' }, type: 'Warning', reason: 'RemediationBlocked', message: 'deletion paused' },
    });
  });

  it('a node Event and a NodeClaim Event with the same text are two Events, not one aggregated', async () => {
    const { events, sink } = setup();
    await events.node('c', 'Warning', RemediationReason.Blocked, 'same');
    await events.nodeClaim({ name: 'c', uid: 'c' }, 'Warning', RemediationReason.Blocked, 'same');
    expect(sink.calls.map((c) => `${c.op} ${c.op === 'create' ? c.event.involvedObject.kind : ''}`)).toEqual(['create Node', 'create NodeClaim']);
  });

  it('NodeClaim Events: namespace default, involvedObject karpenter.sh/v1 NodeClaim with its UID (what kubectl describe nodeclaim finds)', async () => {
    const { events, sink } = setup();
    await events.nodeClaim({ name: 'general-abcde', uid: 'uid-1' }, 'Normal', RemediationReason.NodeClaimDeleted, 'node n1: deleted NodeClaim general-abcde');
    expect(sink.calls).toHaveLength(1);
    expect(sink.calls[0]).toMatchObject({
      op: 'create',
      namespace: 'default',
      event: {
        metadata: { namespace: 'default', name: expect.stringMatching(/^general-abcde\.[0-9a-f]+$/) },
        involvedObject: { apiVersion: 'karpenter.sh/v1', kind: 'NodeClaim', name: 'general-abcde', uid: 'uid-1' },
        type: 'Normal',
        reason: 'RemediationNodeClaimDeleted',
        message: 'node n1: deleted NodeClaim general-abcde',
        count: 1,
        reportingComponent: 'kube-node-ready-controller',
        reportingInstance: 'pod-a',
      },
    });
  });

  it('repeats within 10 minutes bump the count; later ones create a new Event', async () => {
    const { clock, events, sink } = setup();
    const claim = { name: 'c', uid: 'u' };
    await events.nodeClaim(claim, 'Warning', RemediationReason.Blocked, 'same');
    await events.nodeClaim(claim, 'Warning', RemediationReason.Blocked, 'same');
    await clock.advance(10 * 60_000);
    await events.nodeClaim(claim, 'Warning', RemediationReason.Blocked, 'same');
    expect(sink.calls.map((c) => `${c.op}${c.op === 'bump' ? ` ${c.count}` : ''}`)).toEqual(['create', 'bump 2', 'create']);
  });

  it('never throws: a failed write is logged and the next one creates afresh', async () => {
    const { events, sink } = setup();
    sink.nextError = new Error('connection reset');
    await expect(events.nodeClaim({ name: 'c', uid: 'u' }, 'Normal', RemediationReason.DryRun, 'x')).resolves.toBeUndefined();
    await events.nodeClaim({ name: 'c', uid: 'u' }, 'Normal', RemediationReason.DryRun, 'x');
    expect(sink.calls.map((c) => c.op)).toEqual(['create']);
  });
});

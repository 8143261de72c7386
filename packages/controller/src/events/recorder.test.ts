import { silentLogger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { RecordingSink } from '../testing/event-sink.js';
import { eventName, KubeEventRecorder } from './recorder.js';
import { EventType, Reason } from './reasons.js';

function setup() {
  const clock = new FakeClock('2025-01-01T00:00:00Z');
  const sink = new RecordingSink();
  const recorder = new KubeEventRecorder({ sink, clock, log: silentLogger(), component: 'kube-node-ready-controller', instance: 'pod-a' });
  return { clock, sink, recorder };
}

describe('KubeEventRecorder', () => {
  it('writes a core/v1 Event that `kubectl describe node` finds', async () => {
    const { sink, recorder } = setup();
    await recorder.nodeEvent('node-1', EventType.Warning, Reason.VerificationChecksFailed, 'check failed: dns: timeout');
    expect(sink.calls).toHaveLength(1);
    const call = sink.calls[0];
    expect(call?.op).toBe('create');
    if (call?.op !== 'create') return;
    expect(call.namespace).toBe('default');
    expect(call.event).toMatchObject({
      metadata: { namespace: 'default' },
      involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'node-1', uid: 'node-1' },
      type: 'Warning',
      reason: 'VerificationChecksFailed',
      message: 'check failed: dns: timeout',
      count: 1,
      firstTimestamp: '2025-01-01T00:00:00.000Z',
      source: { component: 'kube-node-ready-controller', host: 'pod-a' },
      reportingComponent: 'kube-node-ready-controller',
      reportingInstance: 'pod-a',
    });
    expect(call.event.metadata?.name).toMatch(/^node-1\.[0-9a-f]+$/);
  });

  it('aggregates repeats within the window into a count, then starts a new Event', async () => {
    const { sink, recorder, clock } = setup();
    await recorder.nodeEvent('node-1', EventType.Normal, Reason.AwaitingKarpenterRegistration, 'waiting');
    clock.set(clock.now() + 60_000);
    await recorder.nodeEvent('node-1', EventType.Normal, Reason.AwaitingKarpenterRegistration, 'waiting');
    await recorder.nodeEvent('node-2', EventType.Normal, Reason.AwaitingKarpenterRegistration, 'waiting');
    clock.set(clock.now() + 10 * 60_000);
    await recorder.nodeEvent('node-1', EventType.Normal, Reason.AwaitingKarpenterRegistration, 'waiting');
    expect(sink.calls.map((c) => (c.op === 'bump' ? `bump ${c.count} ${c.lastTimestamp}` : `create ${c.event.involvedObject.name}`))).toEqual([
      'create node-1',
      'bump 2 2025-01-01T00:01:00.000Z',
      'create node-2',
      'create node-1',
    ]);
  });

  it('never throws: a failed write is logged and the next one creates afresh', async () => {
    const { sink, recorder } = setup();
    sink.nextError = new Error('forbidden');
    await expect(recorder.nodeEvent('node-1', EventType.Normal, Reason.VerificationStarted, 'x')).resolves.toBeUndefined();
    await recorder.nodeEvent('node-1', EventType.Normal, Reason.VerificationStarted, 'x');
    expect(sink.calls.map((c) => c.op)).toEqual(['create']);
  });

  it('bounds the message', async () => {
    const { sink, recorder } = setup();
    await recorder.nodeEvent('node-1', EventType.Warning, Reason.VerificationWorkerError, 'x'.repeat(5000));
    const call = sink.calls[0];
    expect(call?.op === 'create' && call.event.message?.length).toBe(1024);
  });

  it('names events within 253 characters for the longest node names', () => {
    const name = eventName('a'.repeat(253), Date.UTC(2025, 0, 1));
    expect(name.length).toBeLessThanOrEqual(253);
    expect(name).toMatch(/^a+\.[0-9a-f]+$/);
  });
});

import { describe, expect, it } from 'vitest';
import { silentLogger } from '@kube-node-ready/core';
import type { k8s } from '../kube.js';
import { KubeletEvents, REASON } from './events.js';

/** Records the Event writes a KubeletEvents makes; each write takes a tick. */
class RecordingEventsApi {
  calls: Array<{ op: 'create' | 'patch'; name: string; body: Record<string, unknown> }> = [];
  inFlight = 0;
  maxInFlight = 0;
  private async tick() {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    await new Promise((r) => setTimeout(r, 5));
    this.inFlight--;
  }
  async createNamespacedEvent(p: { namespace: string; body: k8s.CoreV1Event }) {
    await this.tick();
    this.calls.push({ op: 'create', name: p.body.metadata!.name!, body: p.body as unknown as Record<string, unknown> });
    return p.body;
  }
  async patchNamespacedEvent(p: { name: string; body: Record<string, unknown> }) {
    await this.tick();
    this.calls.push({ op: 'patch', name: p.name, body: p.body });
    return {};
  }
}

const subject = { namespace: 'ns', name: 'web', uid: 'uid-1', node: 'node-a' };
const settle = async (e: KubeletEvents) => {
  while (e.pending()) await new Promise((r) => setTimeout(r, 5));
};

describe('kubelet pod Events', () => {
  it('writes core/v1 Events as a kubelet does: source kubelet on the node, the container as field path', async () => {
    const api = new RecordingEventsApi();
    const events = new KubeletEvents(api as unknown as k8s.CoreV1Api, silentLogger());
    events.record({ ...subject, fieldPath: 'spec.containers{main}' }, 'Normal', REASON.started, 'Started container main');
    await settle(events);
    expect(api.calls).toHaveLength(1);
    expect(api.calls[0]!.name).toMatch(/^web\.[0-9a-f]+$/);
    expect(api.calls[0]!.body).toMatchObject({
      involvedObject: { kind: 'Pod', namespace: 'ns', name: 'web', uid: 'uid-1', fieldPath: 'spec.containers{main}' },
      type: 'Normal',
      reason: 'Started',
      message: 'Started container main',
      source: { component: 'kubelet', host: 'node-a' },
      reportingComponent: 'kubelet',
      reportingInstance: 'node-a',
      count: 1,
    });
  });

  it('an identical Event raises the count of the first instead of creating another', async () => {
    const api = new RecordingEventsApi();
    const events = new KubeletEvents(api as unknown as k8s.CoreV1Api, silentLogger());
    for (let i = 0; i < 5; i++) events.record(subject, 'Warning', REASON.unhealthy, 'Readiness probe failed: no');
    events.record(subject, 'Warning', REASON.unhealthy, 'Readiness probe failed: other');
    await settle(events);
    const creates = api.calls.filter((c) => c.op === 'create');
    expect(creates.map((c) => c.body.message)).toEqual(['Readiness probe failed: no', 'Readiness probe failed: other']);
    const patches = api.calls.filter((c) => c.op === 'patch');
    expect(patches.every((p) => p.name === creates[0]!.name)).toBe(true);
    expect(patches.at(-1)!.body.count).toBe(5);
    expect(patches.length).toBeLessThan(4); // coalesced, not one per occurrence
  });

  it('keeps a few writes in flight and drops what does not fit in its queue', async () => {
    const api = new RecordingEventsApi();
    const events = new KubeletEvents(api as unknown as k8s.CoreV1Api, silentLogger(), { concurrency: 2, maxQueued: 10 });
    for (let i = 0; i < 30; i++) events.record({ ...subject, uid: `u${i}` }, 'Normal', REASON.created, 'Created container: main');
    await settle(events);
    expect(api.maxInFlight).toBe(2);
    expect(api.calls).toHaveLength(12); // 2 in flight at once + 10 queued
    expect(events.dropped).toBe(18);
  });
});

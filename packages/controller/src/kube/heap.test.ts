import { silentLogger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { COMPACT_DELAY_MS, HeapCompactor } from './heap.js';

function compactor(gc: NodeJS.GCFunction | undefined) {
  const clock = new FakeClock();
  const heap = new HeapCompactor({ clock, log: silentLogger(), gc, memory: () => ({ rss: 100, heapTotal: 50 }) });
  return { clock, heap };
}

function recordingGc(): { gc: NodeJS.GCFunction; calls: unknown[] } {
  const calls: unknown[] = [];
  const gc = ((options?: unknown) => void calls.push(options)) as NodeJS.GCFunction;
  return { gc, calls };
}

describe('HeapCompactor', () => {
  it('runs one last-resort collection once no cache is listing', async () => {
    const { gc, calls } = recordingGc();
    const { clock, heap } = compactor(gc);
    heap.started('nodes');
    heap.started('pods');
    heap.listed('pods');
    await clock.advance(COMPACT_DELAY_MS * 5); // the Nodes are still listing
    expect(calls).toEqual([]);
    heap.started('nodes'); // a failed list, listed again
    heap.listed('nodes');
    await clock.advance(COMPACT_DELAY_MS - 1);
    heap.started('nodeverifications'); // a list starting within the delay puts it off
    heap.listed('nodeverifications');
    await clock.advance(COMPACT_DELAY_MS - 1);
    expect(calls).toEqual([]);
    await clock.advance(1);
    expect(calls).toEqual([{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
    // A later relist compacts again.
    heap.started('nodes');
    heap.listed('nodes');
    await clock.advance(COMPACT_DELAY_MS);
    expect(calls).toHaveLength(2);
  });

  it('does nothing without --expose-gc', async () => {
    const { clock, heap } = compactor(undefined);
    heap.started('nodes');
    heap.listed('nodes');
    expect(clock.timers).toBe(0);
    await clock.advance(COMPACT_DELAY_MS);
  });

  it('stop() cancels a pending collection', async () => {
    const { gc, calls } = recordingGc();
    const { clock, heap } = compactor(gc);
    heap.started('nodes');
    heap.listed('nodes');
    heap.stop();
    await clock.advance(COMPACT_DELAY_MS * 2);
    expect(calls).toEqual([]);
  });
});

import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { PodAnnotation } from '../../../api/well-known.js';
import { VerificationSlots } from './slots.js';

/** A pod cache that reports its changes as the informer does (add, update, delete). */
function podCache(initial: V1Pod[]) {
  const pods = new Map(initial.map((p) => [p.metadata?.name ?? '', p]));
  const handlers: Array<{ add?: (p: V1Pod) => void; update?: (p: V1Pod) => void; delete?: (p: V1Pod) => void }> = [];
  return {
    list: () => [...pods.values()],
    on: (h: (typeof handlers)[number]) => void handlers.push(h),
    put(pod: V1Pod) {
      const known = pods.has(pod.metadata?.name ?? '');
      pods.set(pod.metadata?.name ?? '', pod);
      for (const h of handlers) (known ? h.update : h.add)?.(pod);
    },
    remove(pod: V1Pod) {
      pods.delete(pod.metadata?.name ?? '');
      for (const h of handlers) h.delete?.(pod);
    },
  };
}

function setup(o: { pods?: V1Pod[] } = {}) {
  const clock = { t: 1_000_000, now: () => clock.t };
  const pods = podCache(o.pods ?? []);
  const slots = new VerificationSlots(pods, clock, { reservationTtlMs: 60_000, waitingTtlMs: 30_000 });
  return { clock, pods, slots };
}

const running = (node: string): V1Pod => ({ metadata: { name: `w-${node}`, annotations: { [PodAnnotation.NodeName]: node } }, status: { phase: 'Running' } });

describe('VerificationSlots', () => {
  it('counts pods in flight and reservations, not finished pods', () => {
    const { slots, pods } = setup({ pods: [running('a'), { ...running('b'), status: { phase: 'Succeeded' } }] });
    slots.reserve('c');
    expect([...slots.active()].sort()).toEqual(['a', 'c']);
    expect(slots.activeCount('a')).toBe(1);
    expect(slots.activeCount('nobody')).toBe(2);
    // c's pod reaches the cache: it holds the slot instead of the reservation (counted once).
    pods.put(running('c'));
    expect(slots.activeCount()).toBe(2);
    slots.release('c');
    expect(slots.activeCount()).toBe(2);
    // a's pod finishes, c's is being deleted: both slots are free.
    pods.put({ ...running('a'), status: { phase: 'Succeeded' } });
    pods.put({ ...running('c'), metadata: { ...running('c').metadata, deletionTimestamp: new Date() } });
    expect(slots.activeCount()).toBe(0);
    expect(slots.active().size).toBe(0);
  });

  it('follows the cache through deletes and a relist, and a node with two unfinished pods holds one slot', () => {
    const { slots, pods } = setup({ pods: [running('a')] });
    const second: V1Pod = { ...running('a'), metadata: { ...running('a').metadata, name: 'w-a-2' } };
    pods.put(second);
    expect(slots.activeCount()).toBe(1);
    pods.remove(running('a'));
    expect(slots.activeCount()).toBe(1);
    pods.remove(second);
    expect(slots.activeCount()).toBe(0);
    // The same update twice (a relist reports what it finds again) counts once.
    pods.put(running('b'));
    pods.put(running('b'));
    expect([...slots.active()]).toEqual(['b']);
    pods.remove(running('b'));
    expect(slots.activeCount()).toBe(0);
  });

  it('a reservation whose pod never reaches the cache ends after reservationTtlMs', () => {
    const { slots, clock } = setup();
    slots.reserve('a');
    clock.t += 60_000;
    expect(slots.activeCount()).toBe(1);
    clock.t += 1;
    expect(slots.activeCount()).toBe(0);
  });

  it('serves waiting nodes in order of arrival (creation time, then name), whatever order they looked in', () => {
    const { slots } = setup();
    // Three nodes look while every slot is taken, the newest first.
    slots.wait('n3', 3000);
    slots.wait('n1', 1000);
    slots.wait('n2b', 2000);
    slots.wait('n2a', 2000);
    expect(slots.first()).toEqual(['n1']);
    expect(slots.first(3)).toEqual(['n1', 'n2a', 'n2b']);
    // With one slot free (bound 1, nothing in flight), only the first in line may take it.
    expect(slots.taken('n3', 3000)).toBe(3);
    expect(slots.taken('n2b', 2000)).toBe(2);
    expect(slots.taken('n2a', 2000)).toBe(1);
    expect(slots.taken('n1', 1000)).toBe(0);
    // A node that arrives now queues behind all of them.
    expect(slots.taken('n4', 4000)).toBe(4);
    slots.reserve('n1');
    expect(slots.first()).toEqual(['n2a']);
    expect(slots.taken('n2a', 2000)).toBe(1); // n1's reservation
  });

  it('keeps the time each node waited, across turns, until the node is forgotten', () => {
    const { slots, clock } = setup();
    slots.wait('a', 1);
    clock.t += 20_000;
    slots.wait('a', 1); // looks again: keeps its place and its start
    clock.t += 5_000;
    expect(slots.waiting('a')).toBe(true);
    expect(slots.queuedMs('a')).toBe(25_000);
    slots.reserve('a');
    expect(slots.waiting('a')).toBe(false);
    clock.t += 60_000;
    expect(slots.queuedMs('a')).toBe(25_000);
    slots.wait('a', 1);
    clock.t += 1_000;
    slots.leaveQueue('a');
    expect(slots.queuedMs('a')).toBe(26_000);
    slots.forget('a');
    expect(slots.queuedMs('a')).toBe(0);
  });

  it('a waiting node not seen again within waitingTtlMs stops holding up the nodes behind it', () => {
    const { slots, clock } = setup();
    slots.wait('gone', 1);
    slots.wait('b', 2);
    clock.t += 25_000;
    slots.wait('b', 2);
    expect(slots.taken('b', 2)).toBe(1);
    clock.t += 10_000;
    expect(slots.taken('b', 2)).toBe(0);
    expect(slots.first(5)).toEqual(['b']);
    expect(slots.waiting('gone')).toBe(false);
  });
});

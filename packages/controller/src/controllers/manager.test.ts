import { silentLogger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../queue/workqueue.js';
import { FakeClock, flushPromises } from '../testing/fake-clock.js';
import { Manager, type Controller } from './manager.js';

/** A controller that records what the manager asked of it, and blocks each reconcile until released. */
function recording(name: string, journal: string[], clock: FakeClock) {
  const releases: Array<() => void> = [];
  const controller: Controller = {
    name,
    queue: new WorkQueue<string>({ clock }),
    workers: 1,
    reconciler: {
      reconcile: async (key) => {
        journal.push(`${name}: reconcile ${key}`);
        await new Promise<void>((resolve) => releases.push(resolve));
        journal.push(`${name}: done ${key}`);
        return {};
      },
    },
    startLeading: async () => {
      journal.push(`${name}: start leading`);
      await flushPromises(1);
      controller.queue.add(`${name}-first`);
    },
    stopLeading: () => journal.push(`${name}: stop leading`),
    resync: () => journal.push(`${name}: resync`),
    tick: () => journal.push(`${name}: tick`),
  };
  return { controller, release: () => releases.shift()?.() };
}

function setup() {
  const clock = new FakeClock();
  const journal: string[] = [];
  const manager = new Manager({ clock, log: silentLogger(), resyncIntervalMs: 60_000 });
  const a = recording('a', journal, clock);
  const b = recording('b', journal, clock);
  manager.register(a.controller);
  manager.register(b.controller);
  return { clock, journal, manager, a, b };
}

describe('Manager', () => {
  it('takes over in the order registered, then runs every controller\'s workers', async () => {
    const { journal, manager } = setup();
    await manager.lead();
    await flushPromises();
    expect(journal).toEqual(['a: start leading', 'b: start leading', 'a: reconcile a-first', 'b: reconcile b-first']);
  });

  it('ticks only while leading, and resyncs on every replica', async () => {
    const { clock, journal, manager } = setup();
    manager.start();
    manager.tick();
    await clock.advance(60_000);
    expect(journal).toEqual(['a: resync', 'b: resync']);
    await manager.lead();
    journal.length = 0;
    manager.tick();
    expect(journal).toEqual(['a: tick', 'b: tick']);
    manager.abandon();
    journal.length = 0;
    manager.tick();
    manager.stop();
    await clock.advance(120_000);
    expect(journal).toEqual([]);
  });

  it('lost leadership: stops leading, drops the queued keys, lets the running reconcile end', async () => {
    const { journal, manager, a, b } = setup();
    await manager.lead();
    await flushPromises();
    a.controller.queue.add('queued');
    manager.abandon();
    a.release();
    b.release();
    await manager.finished();
    expect(journal).toEqual([
      'a: start leading',
      'b: start leading',
      'a: reconcile a-first',
      'b: reconcile b-first',
      'a: stop leading',
      'b: stop leading',
      'a: done a-first',
      'b: done b-first',
    ]);
  });

  it('stop: drains the queued keys before returning', async () => {
    const { journal, manager, a, b } = setup();
    await manager.lead();
    await flushPromises();
    a.controller.queue.add('queued');
    const drained = manager.drain(30_000);
    for (let i = 0; i < 3; i++) {
      a.release();
      b.release();
      await flushPromises();
    }
    await drained;
    expect(journal.filter((line) => line.startsWith('a:'))).toEqual(['a: start leading', 'a: reconcile a-first', 'a: done a-first', 'a: reconcile queued', 'a: done queued']);
  });
});

import { silentLogger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { FakeClock, flushPromises } from '../testing/fake-clock.js';
import { LeaderElector, type LeaseClient, type LeaseRecord, type ObservedLease, type RunResult } from './elector.js';

/** One Lease in memory with the API server's resourceVersion rules. */
class LeaseStore {
  lease: ObservedLease | undefined;
  private rv = 0;

  put(record: LeaseRecord): ObservedLease {
    this.lease = { record: { ...record }, resourceVersion: String(++this.rv) };
    return this.lease;
  }
}

/** A recording fake client on a shared store; `nextError` fails the next call, `hang` never answers. */
class FakeLeaseClient implements LeaseClient {
  calls: string[] = [];
  nextError: Error | undefined;
  failAll = false;
  hang = false;

  constructor(private readonly store: LeaseStore) {}

  async get(): Promise<ObservedLease | undefined> {
    await this.gate('get');
    return this.store.lease && structuredClone(this.store.lease);
  }

  async create(record: LeaseRecord): Promise<ObservedLease> {
    await this.gate('create');
    if (this.store.lease) throw Object.assign(new Error('already exists'), { code: 409 });
    return structuredClone(this.store.put(record));
  }

  async update(record: LeaseRecord, resourceVersion: string): Promise<ObservedLease> {
    await this.gate(`update ${record.holderIdentity || '(released)'}`);
    if (this.store.lease?.resourceVersion !== resourceVersion) throw Object.assign(new Error('conflict'), { code: 409 });
    return structuredClone(this.store.put(record));
  }

  reset(): void {
    this.calls = [];
    this.nextError = undefined;
    this.failAll = false;
    this.hang = false;
  }

  private async gate(call: string): Promise<void> {
    this.calls.push(call);
    if (this.hang) await new Promise(() => {});
    const err = this.nextError ?? (this.failAll ? new Error('connection refused') : undefined);
    this.nextError = undefined;
    if (err) throw err;
  }
}

const S = 1000;

function candidate(store: LeaseStore, clock: FakeClock, identity: string, opts: { releaseOnCancel?: boolean } = {}) {
  const client = new FakeLeaseClient(store);
  const events: string[] = [];
  const stop = new AbortController();
  let leadership: AbortSignal | undefined;
  const elector = new LeaderElector({
    client,
    identity,
    clock,
    log: silentLogger(),
    leaseDurationMs: 15 * S,
    renewDeadlineMs: 10 * S,
    retryPeriodMs: 2 * S,
    random: () => 0.5, // jittered retry = 2s + 0.5 x 1.2 x 2s = 3.2s
    releaseOnCancel: opts.releaseOnCancel ?? true,
    onStartedLeading: (signal) => {
      leadership = signal;
      events.push('started');
    },
    onStoppedLeading: () => events.push('stopped'),
    onNewLeader: (id) => events.push(`leader ${id}`),
  });
  let result: RunResult | undefined;
  const done = elector.run(stop.signal).then((r) => (result = r));
  return { client, elector, events, stop, done, result: () => result, leadership: () => leadership };
}

describe('LeaderElector', () => {
  it('creates a missing lease and leads at once', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'host-a_1');
    await flushPromises();
    expect(a.elector.isLeader()).toBe(true);
    expect(a.events).toEqual(['leader host-a_1', 'started']);
    expect(store.lease?.record).toEqual({
      holderIdentity: 'host-a_1',
      leaseDurationSeconds: 15,
      acquireTime: clock.now(),
      renewTime: clock.now(),
      leaseTransitions: 0,
    });
    a.stop.abort();
    await a.done;
  });

  it('renews every retryPeriod, keeping acquireTime and transitions', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flushPromises();
    const acquired = clock.now();
    a.client.reset();
    await clock.advance(2 * S);
    expect(a.client.calls).toEqual(['get', 'update a']);
    await clock.advance(2 * S);
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'a', acquireTime: acquired, renewTime: acquired + 4 * S, leaseTransitions: 0 });
    a.stop.abort();
    await a.done;
  });

  it('a follower does not take a lease that is being renewed', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flushPromises();
    const b = candidate(store, clock, 'b');
    await clock.advance(60 * S);
    expect(a.elector.isLeader()).toBe(true);
    expect(b.elector.isLeader()).toBe(false);
    expect(b.elector.leader()).toBe('a');
    expect(b.client.calls.filter((c) => c.startsWith('update'))).toEqual([]);
    a.stop.abort();
    b.stop.abort();
    await Promise.all([a.done, b.done]);
  });

  it('takes over a lease whose holder stopped renewing, once leaseDuration passed on its own clock', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    // A lease left by a crashed leader whose clock was far ahead: renewTime in our future.
    store.put({ holderIdentity: 'crashed', leaseDurationSeconds: 15, acquireTime: clock.now() + 3_600 * S, renewTime: clock.now() + 3_600 * S, leaseTransitions: 4 });
    const start = clock.now();
    const b = candidate(store, clock, 'b');
    await flushPromises();
    expect(b.elector.isLeader()).toBe(false);
    await clock.advance(14 * S);
    expect(b.elector.isLeader()).toBe(false); // 15 s since *we* first saw the record have not passed
    await clock.advance(3.2 * S);
    expect(b.elector.isLeader()).toBe(true);
    // Tries at 0, 3.2, 6.4, 9.6, 12.8 and 16 s: the first after 15 s takes it.
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 5, acquireTime: start + 16 * S });
    b.stop.abort();
    await b.done;
  });

  it('retries acquisition with jitter: retryPeriod x (1 + random x 1.2)', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    store.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: clock.now(), leaseTransitions: 0 });
    const b = candidate(store, clock, 'b');
    await flushPromises();
    expect(b.client.calls).toEqual(['get']);
    await clock.advance(3.1 * S);
    expect(b.client.calls).toEqual(['get']);
    await clock.advance(0.1 * S);
    expect(b.client.calls).toEqual(['get', 'get']);
    b.stop.abort();
    await b.done;
  });

  it('loses leadership when renewals fail for renewDeadline, and says so', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flushPromises();
    a.client.failAll = true;
    await clock.advance(2 * S); // first failed renewal starts the 10 s deadline
    await clock.advance(9 * S);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.leadership()?.aborted).toBe(false);
    await clock.advance(1 * S);
    await a.done;
    expect(a.result()).toBe('lost');
    expect(a.elector.isLeader()).toBe(false);
    expect(a.leadership()?.aborted).toBe(true);
    expect(a.events.at(-1)).toBe('stopped');
  });

  it('survives a few failed renewals within renewDeadline', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flushPromises();
    a.client.failAll = true;
    await clock.advance(8 * S);
    a.client.failAll = false;
    await clock.advance(30 * S);
    expect(a.elector.isLeader()).toBe(true);
    a.stop.abort();
    await a.done;
  });

  it('does not stay leader behind a hung API call', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flushPromises();
    a.client.hang = true;
    await clock.advance(2 * S + 10 * S);
    await a.done;
    expect(a.result()).toBe('lost');
  });

  it('a write on a stale resourceVersion fails: someone else moved the lease on', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flushPromises();
    // Another writer takes the lease between our read and our write, forever after.
    const realGet = a.client.get.bind(a.client);
    a.client.get = async () => {
      const seen = await realGet();
      store.put({ holderIdentity: 'thief', leaseDurationSeconds: 15, renewTime: clock.now(), leaseTransitions: 9 });
      return seen;
    };
    await clock.advance(12 * S);
    await a.done;
    expect(a.result()).toBe('lost');
    expect(store.lease?.record.holderIdentity).toBe('thief');
  });

  it('releases the lease when stopped, so a follower takes over at once', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a');
    await flushPromises();
    const b = candidate(store, clock, 'b');
    await clock.advance(5 * S);
    a.stop.abort();
    await a.done;
    expect(a.result()).toBe('stopped');
    expect(a.events).toEqual(['leader a', 'started', 'stopped']);
    expect(store.lease?.record).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1 });
    await clock.advance(3.2 * S); // b's next jittered try
    expect(b.elector.isLeader()).toBe(true);
    expect(store.lease?.record.leaseTransitions).toBe(1);
    b.stop.abort();
    await b.done;
  });

  it('two candidates: exactly one leads; when it dies without releasing, the other leads within leaseDuration + a retry', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    const a = candidate(store, clock, 'a', { releaseOnCancel: false });
    const b = candidate(store, clock, 'b');
    await flushPromises();
    expect([a.elector.isLeader(), b.elector.isLeader()].filter(Boolean)).toHaveLength(1);
    const [leader, follower] = a.elector.isLeader() ? [a, b] : [b, a];

    // The leader's process freezes: its calls never return and it never releases.
    leader.client.hang = true;
    let tookOver = 0;
    for (let t = 0; t < 40 && !follower.elector.isLeader(); t++) {
      await clock.advance(S);
      tookOver = t + 1;
    }
    expect(follower.elector.isLeader()).toBe(true);
    expect(tookOver).toBeLessThanOrEqual(15 + 2 + 4);
    expect(leader.elector.isLeader()).toBe(false); // renewDeadline passed: it stepped down first
    leader.stop.abort();
    follower.stop.abort();
    await Promise.all([a.done, b.done]);
  });

  it('stops trying to acquire when stopped before it leads', async () => {
    const clock = new FakeClock();
    const store = new LeaseStore();
    store.put({ holderIdentity: 'other', leaseDurationSeconds: 15, renewTime: clock.now(), leaseTransitions: 0 });
    const b = candidate(store, clock, 'b');
    await flushPromises();
    b.stop.abort();
    await b.done;
    expect(b.result()).toBe('stopped');
    expect(b.events).toEqual(['leader other']);
    expect(store.lease?.record.holderIdentity).toBe('other');
  });

  it('rejects timing that cannot work', () => {
    const base = { client: new FakeLeaseClient(new LeaseStore()), identity: 'x', clock: new FakeClock(), log: silentLogger(), onStartedLeading: () => {} };
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 10 * S, renewDeadlineMs: 10 * S, retryPeriodMs: 2 * S })).toThrow(/leaseDuration/);
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 15 * S, renewDeadlineMs: 10 * S, retryPeriodMs: 9 * S })).toThrow(/renewDeadline/);
  });
});

import { Writable } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { FakeClock, flushPromises } from '../testing/fake-clock.js';
import { KubeClient, WriteFencedError } from './client.js';
import type { PriorityTokenBucket } from './throttle.js';

// The write fence of KubeClient.call(). The calls here are closures that count how often they
// run; no request leaves the process (the kubeconfig points at a closed loopback port).

async function client(opts: { qps?: number; burst?: number } = {}) {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const clock = new FakeClock();
  const log = await createLogger({ level: 'silent', destination: new Writable({ write: (_c, _e, done) => done() }) });
  return { clock, kube: new KubeClient(kc, { qps: opts.qps ?? 100, burst: opts.burst ?? 100, clock, log }) };
}

function counted<T>(result: () => Promise<T>) {
  const fn = () => {
    fn.calls++;
    return result();
  };
  fn.calls = 0;
  return fn;
}

describe('KubeClient write fence', () => {
  it('without a fence, writes and reads run', async () => {
    const { kube } = await client();
    const write = counted(async () => 'patched');
    await expect(kube.call('patch node', write)).resolves.toBe('patched');
    expect(write.calls).toBe(1);
  });

  it('a fenced write is refused before it is sent; reads still run', async () => {
    const { kube } = await client();
    kube.fenceWrites(AbortSignal.abort());
    for (const what of ['create pod', 'patch node', 'patch node status', 'delete nodeclaim', 'update configmap', 'create event']) {
      const write = counted(async () => 'sent');
      await expect(kube.call(what, write), what).rejects.toBeInstanceOf(WriteFencedError);
      expect(write.calls, what).toBe(0);
    }
    const read = counted(async () => 'read');
    await expect(kube.call('get node', read)).resolves.toBe('read');
    await expect(kube.call('list pods', read)).resolves.toBe('read');
    expect(read.calls).toBe(2);
  });

  it('a write waiting for a rate-limit token when the fence closes is refused at once and never sent', async () => {
    const { kube, clock } = await client({ qps: 1, burst: 1 });
    const leading = new AbortController();
    kube.fenceWrites(leading.signal);
    await kube.call('get node', async () => 'spends the burst');
    const write = counted(async () => 'sent');
    const outcome = kube.call('patch node', write).then(
      () => 'sent',
      (err: unknown) => (err instanceof WriteFencedError ? 'refused' : `other: ${String(err)}`),
    );
    await flushPromises();
    leading.abort();
    expect(await outcome).toBe('refused');
    await clock.advance(5_000); // the token it waited for arrives: the write is still not sent
    await flushPromises();
    expect(write.calls).toBe(0);
  });

  it('the caller of a write in flight gets the refusal at once, not the answer', async () => {
    const { kube } = await client();
    const leading = new AbortController();
    kube.fenceWrites(leading.signal);
    let answer: (value: string) => void = () => undefined;
    const write = counted(() => new Promise<string>((resolve) => (answer = resolve)));
    const call = kube.call('create pod', write);
    await flushPromises();
    expect(write.calls).toBe(1);
    leading.abort();
    await expect(call).rejects.toBeInstanceOf(WriteFencedError);
    answer('created'); // too late: nobody acts on it
  });

  it('refuses every write in flight when the fence closes, and a new term fences only its own writes', async () => {
    const { kube } = await client({ qps: 1000, burst: 1000 });
    const first = new AbortController();
    kube.fenceWrites(first.signal);
    const answers: Array<(value: string) => void> = [];
    const inFlight = Array.from({ length: 200 }, (_, i) =>
      kube.call(`patch node ${i}`, () => new Promise<string>((resolve) => answers.push(resolve))).then(
        () => 'answered',
        (err: unknown) => (err instanceof WriteFencedError ? 'refused' : `other: ${String(err)}`),
      ),
    );
    // Half are answered before the fence closes: they end as answered, the rest as refused.
    await flushPromises();
    expect(answers).toHaveLength(200);
    for (const answer of answers.slice(0, 100)) answer('patched');
    await flushPromises();
    first.abort();
    const outcomes = await Promise.all(inFlight);
    expect(outcomes.filter((o) => o === 'answered')).toHaveLength(100);
    expect(outcomes.filter((o) => o === 'refused')).toHaveLength(100);
    // The next term's writes run under its own signal; the old one's abort is spent.
    const second = new AbortController();
    kube.fenceWrites(second.signal);
    await expect(kube.call('patch node', async () => 'patched')).resolves.toBe('patched');
  });

  it('a write that failed transiently is not retried once the fence closes', async () => {
    const { kube } = await client();
    const leading = new AbortController();
    kube.fenceWrites(leading.signal);
    const write = counted(async () => {
      leading.abort();
      throw Object.assign(new Error('injected: internal error'), { code: 500 });
    });
    await expect(kube.call('patch node', write)).rejects.toBeInstanceOf(WriteFencedError);
    // p-retry would try again after 200 ms (real timers); the refusal comes before the call.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(write.calls).toBe(1);
  });
});

describe('KubeClient rate-limit metric', () => {
  it('reports time waited for kubernetes.qps, not for the Events budget', async () => {
    const { kube, clock } = await client({ qps: 1, burst: 1 });
    const throttled: number[] = [];
    kube.observe({ throttled: (seconds) => throttled.push(seconds) });
    await kube.call('patch node', async () => 'spends the burst');
    const second = kube.call('patch node', async () => 'waited');
    await flushPromises();
    await clock.advance(1_000);
    await expect(second).resolves.toBe('waited');
    expect(throttled).toEqual([1]);
    // The Events budget (its own limiter, a burst of 50 at 10/s): spent, then waited for, and not counted.
    const events = (kube as unknown as { eventLimiter: PriorityTokenBucket }).eventLimiter;
    const spent: Array<Promise<string>> = [];
    for (let i = 0; i < 60; i++) spent.push(kube.call('create event', async () => 'recorded', { limiter: events }));
    await flushPromises();
    await clock.advance(10_000);
    expect(await Promise.all(spent)).toHaveLength(60);
    expect(throttled).toEqual([1]);
  });
});

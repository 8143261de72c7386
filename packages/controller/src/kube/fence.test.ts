import { describe, expect, it } from 'vitest';
import { flushPromises } from '../testing/fake-clock.js';
import { offlineKubeClient as client } from '../testing/offline-kube.js';
import { WriteFencedError } from './fence.js';

// The write fence, through KubeClient. The calls here are closures that count how often they
// run, in place of requests (testing/offline-kube.ts).

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
    await expect(kube.write('patch node', write)).resolves.toBe('patched');
    expect(write.calls).toBe(1);
  });

  it('a fenced write is refused before it is sent; reads still run', async () => {
    const { kube } = await client();
    kube.fenceWrites(AbortSignal.abort());
    for (const what of ['create pod', 'patch node', 'patch node status', 'delete nodeclaim', 'update configmap', 'create event']) {
      const write = counted(async () => 'sent');
      await expect(kube.write(what, write), what).rejects.toBeInstanceOf(WriteFencedError);
      expect(write.calls, what).toBe(0);
    }
    const read = counted(async () => 'read');
    await expect(kube.read('get node', read)).resolves.toBe('read');
    await expect(kube.read('list pods', read)).resolves.toBe('read');
    expect(read.calls).toBe(2);
  });

  it("every one of KubeClient's calls that changes the cluster is a fenced write", async () => {
    const { kube } = await client();
    kube.fenceWrites(AbortSignal.abort());
    const node = { metadata: { name: 'n1' } };
    const writes: Record<string, () => Promise<unknown>> = {
      patchNode: () => kube.patchNode('n1', []),
      patchNodeStatus: () => kube.patchNodeStatus('n1', {}),
      createNodeVerification: () => kube.createNodeVerification(node),
      updateNodeVerification: () => kube.updateNodeVerification(node),
      deleteNodeVerification: () => kube.deleteNodeVerification('n1', 'uid'),
      createPod: () => kube.createPod({ metadata: { name: 'p', namespace: 'ns' } }),
      deletePod: () => kube.deletePod('ns', 'p'),
      createEvent: () => kube.createEvent('default', { metadata: { name: 'e' }, involvedObject: {} }),
      bumpEvent: () => kube.bumpEvent('default', 'e', 2, new Date(0).toISOString()),
    };
    // Refused before it is sent: a request sent would fail otherwise (nothing listens) and be retried.
    for (const [method, write] of Object.entries(writes)) await expect(write(), method).rejects.toBeInstanceOf(WriteFencedError);
  });

  it('a write waiting for a rate-limit token when the fence closes is refused at once and never sent', async () => {
    const { kube, clock } = await client({ qps: 1, burst: 1 });
    const leading = new AbortController();
    kube.fenceWrites(leading.signal);
    await kube.read('get node', async () => 'spends the burst');
    const write = counted(async () => 'sent');
    const outcome = kube.write('patch node', write).then(
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
    const call = kube.write('create pod', write);
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
      kube.write(`patch node ${i}`, () => new Promise<string>((resolve) => answers.push(resolve))).then(
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
    await expect(kube.write('patch node', async () => 'patched')).resolves.toBe('patched');
  });

  it('a write that failed transiently is not retried once the fence closes', async () => {
    const { kube } = await client();
    const leading = new AbortController();
    kube.fenceWrites(leading.signal);
    const write = counted(async () => {
      leading.abort();
      throw Object.assign(new Error('injected: internal error'), { code: 500 });
    });
    await expect(kube.write('patch node', write)).rejects.toBeInstanceOf(WriteFencedError);
    // p-retry would try again after 200 ms (real timers); the refusal comes before the call.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(write.calls).toBe(1);
  });
});

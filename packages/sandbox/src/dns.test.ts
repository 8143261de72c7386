import { describe, expect, it } from 'vitest';
import dns2 from 'dns2';
import { replyOrDrop } from './dns.js';

describe('replyOrDrop (the sandbox DNS server answering a client that is gone)', () => {
  it('a reply that cannot be sent is logged, never an unhandled rejection (which ended the sandbox daemon)', async () => {
    const logged: unknown[] = [];
    const reply = replyOrDrop(() => Promise.reject(new Error('send EHOSTUNREACH 10.244.0.136:45931')), { debug: (o: unknown) => void logged.push(o) });
    reply(new dns2.Packet());
    await new Promise((r) => setTimeout(r, 10));
    expect(logged).toEqual([{ err: 'Error: send EHOSTUNREACH 10.244.0.136:45931' }]);
  });

  it('sends the reply (a synchronous send, as dns2 TCP, too)', async () => {
    const sent: dns2.Packet[] = [];
    const packet = new dns2.Packet();
    replyOrDrop((r) => void sent.push(r), { debug: () => undefined })(packet);
    await new Promise((r) => setTimeout(r, 10));
    expect(sent).toEqual([packet]);
  });
});

import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import dns2 from 'dns2';
import { afterEach, describe, expect, it } from 'vitest';
import { formatHostPort, type HostPort } from '../config.js';
import { deadline } from './deadline.js';
import { DnsQueryError, MIN_EDNS_BUFFER, queryDns } from './dns-client.js';

const { Packet } = dns2;
const NAME = 'kubernetes.default.svc.cluster.local';

/** A raw UDP responder on 127.0.0.1: `reply` turns each query into the datagram sent back (and from where). */
async function udpResponder(reply: (query: dns2.Packet, raw: Buffer) => { message: Buffer; from?: dgram.Socket } | undefined) {
  const socket = dgram.createSocket('udp4');
  const received: Buffer[] = [];
  socket.on('message', (raw, rinfo) => {
    received.push(raw);
    const out = reply(Packet.parse(raw), raw);
    if (out) (out.from ?? socket).send(out.message, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const server: HostPort = { host: '127.0.0.1', port: (socket.address() as AddressInfo).port };
  return { server, received, close: () => socket.close() };
}

function answer(query: dns2.Packet, change: (r: dns2.Packet) => void = () => {}): Buffer {
  const response = Packet.createResponseFromRequest(query);
  response.answers.push({ name: NAME, type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 5, address: '10.96.0.1' } as dns2.Packet.Resource);
  change(response);
  return response.toBuffer();
}

const cleanups: Array<() => void> = [];
afterEach(() => cleanups.splice(0).forEach((f) => f()));

async function ask(server: HostPort, ms = 400, options = {}) {
  const limit = deadline(ms, 'dns check timeout');
  try {
    return await queryDns(server, NAME, 'A', limit.signal, options);
  } finally {
    limit.dispose();
  }
}

describe('answers that arrive but are not the answer are reported as rejected, not as "no answer"', () => {
  it('another transaction ID', async () => {
    const r = await udpResponder((q) => ({ message: answer(q, (p) => (p.header.id = (q.header.id + 1) & 0xffff)) }));
    cleanups.push(r.close);
    const err = await ask(r.server).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DnsQueryError);
    expect((err as Error).message).toBe('timeout: no valid answer over udp within 400ms (dns check timeout); 1 reply arrived but was rejected: another transaction ID');
  });

  it('another question', async () => {
    const r = await udpResponder((q) => ({ message: answer(q, (p) => (p.questions = [{ name: 'other.example', type: Packet.TYPE.A, class: Packet.CLASS.IN } as dns2.Packet.Question])) }));
    cleanups.push(r.close);
    const err = await ask(r.server).catch((e: unknown) => e);
    expect((err as Error).message).toBe('timeout: no valid answer over udp within 400ms (dns check timeout); 1 reply arrived but was rejected: another question (other.example A)');
  });

  it('from another source address (a DNAT not undone on the way back)', async () => {
    // The reply leaves from 127.0.0.2: what a client sees when the answer of a DNS pod behind a
    // ClusterIP is not translated back to the ClusterIP.
    const other = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => other.bind(0, '127.0.0.2', resolve));
    cleanups.push(() => other.close());
    const r = await udpResponder((q) => ({ message: answer(q), from: other }));
    cleanups.push(r.close);
    const err = await ask(r.server, 1500).catch((e: unknown) => e);
    const from = formatHostPort({ host: '127.0.0.2', port: (other.address() as AddressInfo).port });
    expect((err as Error).message).toBe(
      `timeout: no valid answer over udp within 1.5s (dns check timeout); 2 replies arrived but were rejected: the answer came from ${from}, not from ${formatHostPort(r.server)} (2)`,
    );
  });

  it('a silent server is still "no answer"', async () => {
    const r = await udpResponder(() => undefined);
    cleanups.push(r.close);
    const err = await ask(r.server).catch((e: unknown) => e);
    expect((err as Error).message).toBe('timeout: no answer over udp within 400ms (dns check timeout)');
  });
});

describe('EDNS0 buffer size and padding', () => {
  it('pads the query to the requested size with the padding option and offers the buffer size', async () => {
    const r = await udpResponder((q) => ({ message: answer(q) }));
    cleanups.push(r.close);
    const result = await ask(r.server, 1000, { padTo: 1472, transport: 'udp-only' });
    expect(result).toMatchObject({ rcode: 'NOERROR', addresses: ['10.96.0.1'], querySize: 1472, transport: 'udp', sends: 1 });
    const raw = r.received[0] as Buffer;
    expect(raw.length).toBe(1472);
    expect(raw.readUInt16BE(10)).toBe(1); // ARCOUNT: the OPT record
    const opt = Packet.parse(raw).additionals[0] as dns2.Packet.Resource & { class: number };
    expect(opt.type).toBe(Packet.TYPE.EDNS);
    expect(opt.class).toBe(MIN_EDNS_BUFFER);
    // After the header (12), the question (name in wire form, type, class) and the 11-byte OPT
    // record: the padding option (code 12), its length filling the message exactly.
    const option = 12 + (NAME.length + 2) + 4 + 11;
    expect(raw.readUInt16BE(option)).toBe(12);
    expect(option + 4 + raw.readUInt16BE(option + 2)).toBe(1472);
  });

  it('a query without options carries no OPT record', async () => {
    const r = await udpResponder((q) => ({ message: answer(q) }));
    cleanups.push(r.close);
    await ask(r.server);
    expect((r.received[0] as Buffer).readUInt16BE(10)).toBe(0);
  });

  it('returns a truncated UDP answer as it is with transport udp-only', async () => {
    const r = await udpResponder((q) => ({ message: answer(q, (p) => (p.header.tc = 1)) }));
    cleanups.push(r.close);
    const result = await ask(r.server, 1000, { ednsBufferSize: MIN_EDNS_BUFFER, transport: 'udp-only' });
    expect(result).toMatchObject({ truncated: true, transport: 'udp', truncatedUdp: false });
  });
});

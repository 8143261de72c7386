import dgram from 'node:dgram';
import net, { type AddressInfo } from 'node:net';
import { silentLogger } from '@kube-node-ready/core';
import dns2 from 'dns2';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { fuzzAsync, isReplay, type Rng } from '../../../core/src/testing/fuzz.js';
import { dnsCheck } from '../checks/dns.js';
import type { HostPort } from '../config.js';
import { configOf } from '../testing/harness.js';
import { deadline } from './deadline.js';
import { DnsQueryError, lookupAddresses, type DnsAnswer } from './dns-client.js';

// A wall-clock budget far above Vitest's default 5 s: the fuzz loops are bounded by count and by
// CPU time (hangAfterCpuMs), so their wall time says only how loaded the machine is.
vi.setConfig({ testTimeout: 120_000 });

/**
 * Fuzz test of the worker's DNS client and dns check against a loopback nameserver that answers
 * every query with bytes built for the case: valid answers, garbage, valid headers with random
 * bodies, right IDs with corrupt bodies, wrong IDs, truncation with garbage over TCP, empty and
 * oversized datagrams. Seeded: a failure names its seed, and KNR_FUZZ_SEED=<seed> replays it.
 *
 * Each case knows what a correct client makes of it (a pass with exactly these addresses, or a
 * failure), and the client must agree, reject only with a DnsQueryError, and settle within its
 * deadline (a guard well beyond the deadline catches hangs; it is not a speed assertion).
 */

const { Packet } = dns2;
const TYPE_A = 1;
const TYPE_AAAA = 28;
const TYPE_CNAME = 5;
const CLASS_IN = 1;

/** Deadline of a lookup that should fail (most time out, so it is short), and of one that should pass. */
const FAIL_BUDGET_MS = 200;
const PASS_BUDGET_MS = 5_000;
const GUARD_SLACK_MS = 5_000;

interface Query {
  id: number;
  name: string;
  type: number;
  transport: 'udp' | 'tcp';
}

interface TcpReply {
  /** Written in order, one chunk per write. */
  chunks: Buffer[];
  /** After the chunks: close gracefully, reset, or keep the connection open. */
  then: 'end' | 'destroy' | 'hold';
}

type Expect = { ok: true; addresses: string[]; type: 'A' | 'AAAA'; transport: 'udp' | 'tcp' } | { ok: false };

interface Case {
  kind: string;
  expect: Expect;
  /** Datagrams sent back for a UDP query. */
  udp(q: Query): Buffer[];
  /** What the TCP side does for a query (default: the same bytes as UDP, framed, then end). */
  tcp?(q: Query): TcpReply;
}

// ---------------------------------------------------------------------------------------------
// DNS messages, built byte by byte so that each byte's role is known.

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n & 0xffff);
  return b;
}

function encodeName(name: string): Buffer {
  const labels = name.split('.').filter(Boolean);
  return Buffer.concat([...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'latin1')])), Buffer.from([0])]);
}

interface Flags {
  qr?: number;
  opcode?: number;
  aa?: number;
  tc?: number;
  rd?: number;
  ra?: number;
  rcode?: number;
}

function header(id: number, flags: Flags, counts: [number, number, number, number]): Buffer {
  const { qr = 1, opcode = 0, aa = 0, tc = 0, rd = 1, ra = 1, rcode = 0 } = flags;
  const b = Buffer.alloc(12);
  b.writeUInt16BE(id);
  b[2] = (qr << 7) | (opcode << 3) | (aa << 2) | (tc << 1) | rd;
  b[3] = (ra << 7) | rcode;
  counts.forEach((c, i) => b.writeUInt16BE(c, 4 + 2 * i));
  return b;
}

function question(name: string, type: number, cls = CLASS_IN): Buffer {
  return Buffer.concat([encodeName(name), u16(type), u16(cls)]);
}

/** A resource record; the owner is the question's name (pointer to offset 12) unless given. */
function record(type: number, rdata: Buffer, owner?: string, opts: { cls?: number; ttl?: number } = {}): Buffer {
  const ttl = Buffer.alloc(4);
  ttl.writeUInt32BE(opts.ttl ?? 30);
  return Buffer.concat([owner === undefined ? Buffer.from([0xc0, 0x0c]) : encodeName(owner), u16(type), u16(opts.cls ?? CLASS_IN), ttl, u16(rdata.length), rdata]);
}

const aRecord = (address: string, owner?: string) => record(TYPE_A, Buffer.from(address.split('.').map(Number)), owner);
const aaaaRecord = (groups: number[], owner?: string) => record(TYPE_AAAA, Buffer.concat(groups.map(u16)), owner);
const cnameRecord = (target: string, owner?: string) => record(TYPE_CNAME, encodeName(target), owner);

/** A complete response to `q` with these answer records. */
function response(q: Query, answers: Buffer[], flags: Flags = {}, opts: { id?: number; questions?: Buffer[] } = {}): Buffer {
  const questions = opts.questions ?? [question(q.name, q.type)];
  return Buffer.concat([header(opts.id ?? q.id, flags, [questions.length, answers.length, 0, 0]), ...questions, ...answers]);
}

function framed(message: Buffer): Buffer {
  return Buffer.concat([u16(message.length), message]);
}

const randomAddress = (r: Rng) => `10.${r.int(256)}.${r.int(256)}.${r.between(1, 254)}`;
/** fd00:A:B::C with A, B, C non-zero: one way to write it (RFC 5952), whoever formats it. */
function randomV6(r: Rng): { groups: number[]; text: string } {
  const [a, b, c] = [r.between(1, 0xffff), r.between(1, 0xffff), r.between(1, 0xffff)];
  return { groups: [0xfd00, a, b, 0, 0, 0, 0, c], text: `fd00:${a.toString(16)}:${b.toString(16)}::${c.toString(16)}` };
}

const pass = (addresses: string[], opts: { type?: 'A' | 'AAAA'; transport?: 'udp' | 'tcp' } = {}): Expect => ({
  ok: true,
  addresses,
  type: opts.type ?? 'A',
  transport: opts.transport ?? 'udp',
});
const FAIL: Expect = { ok: false };

// ---------------------------------------------------------------------------------------------
// Cases

/**
 * One byte of a valid single-A answer XORed with a mask, and what that does to the answer: every
 * byte's role in the message is known, so is the verdict of a correct client.
 */
function flippedAnswer(r: Rng, name: string): Case {
  const address = randomAddress(r);
  const nameLength = encodeName(name).length;
  const length = 12 + nameLength + 4 + 16;
  const offset = r.int(length);
  const mask = r.chance(0.2) ? 0x20 : r.between(1, 255);
  const answerAt = 12 + nameLength + 4;
  const build = (q: Query) => response(q, [aRecord(address)]);
  let expect: Expect;
  let what: string;
  if (offset < 2) [expect, what] = [FAIL, 'id'];
  else if (offset === 2) {
    if (mask & 0x80) [expect, what] = [FAIL, 'qr'];
    else if (mask & 0x78) [expect, what] = [FAIL, 'opcode'];
    else if (mask & 0x02) [expect, what] = [pass([address], { transport: 'tcp' }), 'tc (the tcp answer is intact)'];
    else [expect, what] = [pass([address]), 'aa/rd'];
  } else if (offset === 3) [expect, what] = mask & 0x0f ? [FAIL, 'rcode'] : [pass([address]), 'ra/z/ad/cd'];
  else if (offset < 8) [expect, what] = [FAIL, offset < 6 ? 'qdcount' : 'ancount'];
  else if (offset < 12) [expect, what] = [pass([address]), 'nscount/arcount (sections the client does not read)'];
  else if (offset < 12 + nameLength) {
    const sample = encodeName(name)[offset - 12] as number;
    const isLetter = /[a-z]/i.test(String.fromCharCode(sample));
    const isLength = labelStarts(name).includes(offset - 12);
    if (!isLength && isLetter && mask === 0x20) [expect, what] = [pass([address]), 'case of a question letter'];
    else [expect, what] = [FAIL, 'question name'];
  } else if (offset < answerAt) [expect, what] = [FAIL, offset < answerAt - 2 ? 'question type' : 'question class'];
  else {
    const at = offset - answerAt;
    if (at < 2) [expect, what] = [FAIL, 'answer owner'];
    else if (at < 4) [expect, what] = [FAIL, 'answer type'];
    else if (at < 6) [expect, what] = [FAIL, 'answer class'];
    else if (at < 10) [expect, what] = [pass([address]), 'answer ttl'];
    else if (at < 12) [expect, what] = [FAIL, 'answer rdlength'];
    else {
      const octets = address.split('.').map(Number);
      octets[at - 12] = (octets[at - 12] as number) ^ mask;
      [expect, what] = [pass([octets.join('.')]), 'answer address'];
    }
  }
  return {
    kind: `one byte flipped: ${what} (offset ${offset}, mask 0x${mask.toString(16)})`,
    expect,
    udp: (q) => {
      const bytes = build(q);
      bytes[offset] = (bytes[offset] as number) ^ mask;
      return [bytes];
    },
    tcp: (q) => ({ chunks: [framed(build(q))], then: 'end' }),
  };
}

/** Offsets of the length bytes in an encoded name. */
function labelStarts(name: string): number[] {
  const starts: number[] = [];
  let at = 0;
  for (const label of name.split('.').filter(Boolean)) {
    starts.push(at);
    at += label.length + 1;
  }
  starts.push(at); // the terminating zero
  return starts;
}

function randomCase(r: Rng, name: string): Case {
  const address = randomAddress(r);
  const other = randomAddress(r);
  const garbage = (n = r.int(600)) => r.bytes(n);
  const tcpGarbage = (): TcpReply => {
    switch (r.int(7)) {
      case 0:
        return { chunks: [garbage(r.between(1, 300))], then: r.pick(['end', 'destroy', 'hold'] as const) };
      case 1:
        return { chunks: [framed(garbage(r.between(0, 300)))], then: 'end' };
      case 2:
        return { chunks: [u16(r.between(100, 65535)), garbage(r.int(90))], then: r.pick(['end', 'hold'] as const) };
      case 3:
        return { chunks: [], then: r.pick(['end', 'destroy', 'hold'] as const) };
      case 4:
        return { chunks: [u16(0)], then: 'hold' };
      case 5:
        return { chunks: [Buffer.from([r.int(256)])], then: r.pick(['end', 'hold'] as const) };
      default:
        return { chunks: [framed(garbage(r.between(12, 60))), framed(garbage(40))], then: 'hold' };
    }
  };
  switch (r.int(24)) {
    case 0:
      return { kind: 'valid answer', expect: pass([address]), udp: (q) => [response(q, [aRecord(address)])] };
    case 1: {
      const addresses = Array.from({ length: r.between(2, 6) }, () => randomAddress(r));
      return { kind: 'several addresses', expect: pass(addresses), udp: (q) => [response(q, addresses.map((a) => aRecord(a)))] };
    }
    case 2: {
      const target = `t${r.int(1e6)}.fuzz.test`;
      return { kind: 'cname chain', expect: pass([address]), udp: (q) => [response(q, [cnameRecord(target), aRecord(address, target)])] };
    }
    case 3: {
      const v6 = randomV6(r);
      return {
        kind: 'AAAA only (A is empty)',
        expect: pass([v6.text], { type: 'AAAA' }),
        udp: (q) => [response(q, q.type === TYPE_AAAA ? [aaaaRecord(v6.groups)] : [])],
      };
    }
    case 4: {
      const v6 = randomV6(r);
      return { kind: 'AAAA record in the answer to an A query', expect: pass([v6.text], { type: 'AAAA' }), udp: (q) => [response(q, [aaaaRecord(v6.groups)])] };
    }
    case 5: {
      // Stray datagrams before the real answer: ignored.
      const strays = (q: Query) => [
        garbage(),
        response(q, [aRecord(other)], {}, { id: (q.id + 1) & 0xffff }),
        response(q, [aRecord(other)], { qr: 0 }),
        response(q, [aRecord(other)], {}, { questions: [question(`x${name}`, q.type)] }),
        Buffer.alloc(0),
      ];
      return { kind: 'stray datagrams, then the answer', expect: pass([address]), udp: (q) => [...strays(q).filter(() => r.chance(0.6)), response(q, [aRecord(address)])] };
    }
    case 6:
      return { kind: 'random bytes', expect: FAIL, udp: () => [garbage()] };
    case 7:
      return { kind: 'empty datagram', expect: FAIL, udp: () => [Buffer.alloc(0)] };
    case 8:
      return { kind: 'right id, random rest', expect: FAIL, udp: (q) => [Buffer.concat([u16(q.id), garbage()])] };
    case 9:
      return {
        kind: 'valid header, random body',
        expect: FAIL,
        udp: (q) => [Buffer.concat([header(q.id, {}, [r.int(3), r.int(5), r.int(3), r.int(3)]), garbage()])],
      };
    case 10:
      return { kind: 'wrong id', expect: FAIL, udp: (q) => [response(q, [aRecord(address)], {}, { id: q.id ^ r.between(1, 0xffff) })] };
    case 11:
      return { kind: 'a query, not a response (qr 0)', expect: FAIL, udp: (q) => [response(q, [aRecord(address)], { qr: 0 })] };
    case 12: {
      const rcode = r.between(1, 15);
      return { kind: `rcode ${rcode} with an address`, expect: FAIL, udp: (q) => [response(q, [aRecord(address)], { rcode })] };
    }
    case 13: {
      const mismatch = r.pick(['name', 'type', 'class', 'none', 'two'] as const);
      return {
        kind: `answer to another question (${mismatch})`,
        expect: FAIL,
        udp: (q) => {
          const questions = {
            name: [question(`other${r.int(1000)}.fuzz.test`, q.type)],
            type: [question(q.name, q.type === TYPE_A ? 15 : TYPE_A)],
            class: [question(q.name, q.type, 3)],
            none: [],
            two: [question(q.name, q.type), question(q.name, q.type)],
          }[mismatch];
          // Owner names written out (no pointer): offset 12 is not the question's name any more.
          return [response(q, [aRecord(address, mismatch === 'name' ? undefined : q.name)], {}, { questions })];
        },
      };
    }
    case 14: {
      const owner = r.pick(['other', 'cname-elsewhere', 'cname-loop'] as const);
      const target = `t${r.int(1e6)}.fuzz.test`;
      const records = (q: Query) =>
        ({
          other: [aRecord(address, `other.${q.name}`)],
          'cname-elsewhere': [cnameRecord(target), aRecord(address, `x${target}`)],
          'cname-loop': [cnameRecord(target), cnameRecord(q.name, target)],
        })[owner];
      return { kind: `address for another name (${owner})`, expect: FAIL, udp: (q) => [response(q, records(q))] };
    }
    case 15:
      return {
        kind: 'answer count beyond the records',
        expect: FAIL,
        udp: (q) => {
          const bytes = response(q, [aRecord(address)]);
          bytes.writeUInt16BE(r.between(2, 65535), 6);
          return [bytes];
        },
      };
    case 16: {
      return {
        kind: 'truncated message',
        expect: FAIL,
        udp: (q) => {
          const bytes = response(q, [aRecord(address)]);
          return [bytes.subarray(0, r.int(bytes.length))];
        },
      };
    }
    case 17: {
      const rdata = r.pick([3, 5, 16]);
      return { kind: `A record of ${rdata} bytes`, expect: FAIL, udp: (q) => [response(q, [record(TYPE_A, garbage(rdata))])] };
    }
    case 18:
      return { kind: 'no answer at all', expect: FAIL, udp: () => [] };
    case 19:
      return { kind: 'oversized random datagram', expect: FAIL, udp: (q) => [Buffer.concat([u16(q.id), garbage(r.between(9_000, 65_000))])] };
    case 20: {
      const addresses = Array.from({ length: r.between(200, 1500) }, () => randomAddress(r));
      return { kind: `oversized valid answer (${addresses.length} records)`, expect: pass(addresses), udp: (q) => [response(q, addresses.map((a) => aRecord(a)))] };
    }
    case 21: {
      // Truncated over UDP; TCP has the answer (whole or dripped byte by byte) or garbage.
      const intact = r.chance(0.4);
      const drip = r.chance(0.5);
      return {
        kind: `tc over udp, then ${intact ? (drip ? 'a dripped' : 'an intact') : 'garbage over'} tcp`,
        expect: intact ? pass([address], { transport: 'tcp' }) : FAIL,
        udp: (q) => [response(q, r.chance(0.5) ? [aRecord(address)] : [], { tc: 1 })],
        tcp: (q) => {
          if (!intact) return tcpGarbage();
          const whole = framed(response(q, [aRecord(address)]));
          return { chunks: drip ? [...whole].map((b) => Buffer.from([b])) : [whole], then: 'hold' };
        },
      };
    }
    case 22:
      return {
        kind: 'tc over udp, then a tcp answer that does not match',
        expect: FAIL,
        udp: (q) => [response(q, [], { tc: 1 })],
        tcp: (q) => ({
          chunks: [framed(r.chance(0.5) ? response(q, [aRecord(address)], {}, { id: q.id ^ 1 }) : response(q, [aRecord(address)], {}, { questions: [question(`x${q.name}`, q.type)] }))],
          then: 'hold',
        }),
      };
    default:
      return flippedAnswer(r, name);
  }
}

// ---------------------------------------------------------------------------------------------
// The nameserver: UDP and TCP on one loopback port, answering each query by its case (by name).

interface FuzzServer {
  server: HostPort;
  cases: Map<string, Case>;
  /** TCP connections of a case, destroyed when the case ends. */
  sockets: Map<string, Set<net.Socket>>;
  close(): Promise<void>;
}

function parseQuery(bytes: Buffer, transport: 'udp' | 'tcp'): Query | undefined {
  try {
    const packet = Packet.parse(bytes);
    const q = packet.questions[0];
    return q ? { id: packet.header.id, name: q.name.toLowerCase(), type: q.type, transport } : undefined;
  } catch {
    return undefined;
  }
}

async function startFuzzServer(): Promise<FuzzServer> {
  const cases = new Map<string, Case>();
  const sockets = new Map<string, Set<net.Socket>>();
  for (let attempt = 0; ; attempt++) {
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    const { port } = udp.address() as AddressInfo;
    const tcp = net.createServer();
    const listening = await new Promise<boolean>((resolve) => {
      tcp.once('error', () => resolve(false));
      tcp.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (!listening) {
      udp.close();
      if (attempt > 20) throw new Error('no loopback port free for both UDP and TCP');
      continue;
    }
    udp.on('message', (message, from) => {
      const q = parseQuery(message, 'udp');
      const c = q && cases.get(q.name);
      if (!q || !c) return;
      for (const datagram of c.udp(q)) udp.send(datagram, from.port, from.address);
    });
    tcp.on('connection', (socket) => {
      socket.on('error', () => {});
      let received = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        if (received.length < 2 || received.length < 2 + received.readUInt16BE(0)) return;
        const q = parseQuery(received.subarray(2, 2 + received.readUInt16BE(0)), 'tcp');
        const c = q && cases.get(q.name);
        if (!q || !c) return void socket.destroy();
        const open = sockets.get(q.name) ?? new Set();
        sockets.set(q.name, open.add(socket));
        const reply = c.tcp ? c.tcp(q) : { chunks: c.udp(q).slice(-1).map(framed), then: 'end' as const };
        void (async () => {
          for (const chunk of reply.chunks) {
            if (socket.destroyed) return;
            socket.write(chunk);
            if (reply.chunks.length > 1) await new Promise((resolve) => setImmediate(resolve));
          }
          if (reply.then === 'end') socket.end();
          if (reply.then === 'destroy') socket.destroy();
        })();
      });
    });
    return {
      server: { host: '127.0.0.1', port },
      cases,
      sockets,
      close: async () => {
        udp.close();
        for (const set of sockets.values()) for (const s of set) s.destroy();
        await new Promise<void>((resolve) => tcp.close(() => resolve()));
      },
    };
  }
}

// ---------------------------------------------------------------------------------------------

let ns: FuzzServer;
beforeAll(async () => {
  ns = await startFuzzServer();
});
afterAll(() => ns.close());

/** What a lookup came to: an answer the dns check accepts (NOERROR with addresses), or not. */
function verdictOf(answer: DnsAnswer): boolean {
  return answer.rcode === 'NOERROR' && answer.addresses.length > 0;
}

describe('DNS client and dns check against a nameserver answering anything (fuzz)', () => {
  it('never throws anything but a DnsQueryError, settles within its deadline, and passes only a valid answer, with its addresses', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
    const kinds = new Map<string, number>();
    try {
      await fuzzAsync(
        0xd25000,
        1200,
        async (r, seed) => {
          const name = `c${seed}.fuzz.test`;
          const c = randomCase(r, name);
          kinds.set(c.kind.replace(/ \(.*/, ''), (kinds.get(c.kind.replace(/ \(.*/, '')) ?? 0) + 1);
          ns.cases.set(name, c);
          const budget = c.expect.ok ? PASS_BUDGET_MS : FAIL_BUDGET_MS;
          const throughCheck = r.chance(0.25);
          const limit = deadline(budget, 'fuzz case deadline');
          const started = performance.now();
          try {
            if (throughCheck) {
              const config = configOf(['--checks', 'dns', '--dns-names', name, '--dns-server', `127.0.0.1:${ns.server.port}`]);
              const result = await dnsCheck({ config, signal: limit.signal, log: silentLogger(), nameservers: { servers: [ns.server], source: 'fuzz' } });
              expect(result.ok, `${c.kind}: dns check ${JSON.stringify(result).slice(0, 400)}`).toBe(c.expect.ok);
              if (c.expect.ok) {
                const [lookup] = result.details?.lookups as Array<Record<string, unknown>>;
                expect(lookup, c.kind).toMatchObject({ answers: c.expect.addresses, type: c.expect.type, transport: c.expect.transport, rcode: 'NOERROR' });
              }
            } else {
              let answer: DnsAnswer | undefined;
              try {
                answer = await lookupAddresses(ns.server, name, limit.signal);
              } catch (err) {
                if (!(err instanceof DnsQueryError)) throw new Error(`${c.kind}: rejected with ${String(err)}, not a DnsQueryError`, { cause: err });
                expect(['timeout', 'refused', 'network', 'malformed'], c.kind).toContain(err.kind);
              }
              const passed = answer !== undefined && verdictOf(answer);
              expect(passed, `${c.kind}: ${answer ? JSON.stringify(answer).slice(0, 400) : 'rejected'}`).toBe(c.expect.ok);
              if (c.expect.ok && answer) {
                expect({ addresses: answer.addresses, type: answer.type, transport: answer.transport }, c.kind).toEqual({
                  addresses: c.expect.addresses,
                  type: c.expect.type,
                  transport: c.expect.transport,
                });
              }
            }
            const elapsed = performance.now() - started;
            expect(elapsed, `${c.kind}: settled ${Math.round(elapsed)}ms after a ${budget}ms deadline`).toBeLessThan(budget + GUARD_SLACK_MS);
          } finally {
            limit.dispose();
            ns.cases.delete(name);
            for (const s of ns.sockets.get(name) ?? []) s.destroy();
            ns.sockets.delete(name);
          }
        },
        { guardMs: FAIL_BUDGET_MS + PASS_BUDGET_MS + GUARD_SLACK_MS, concurrency: 48 },
      );
    } finally {
      process.off('uncaughtException', onUncaught);
      process.off('unhandledRejection', onUncaught);
    }
    expect(uncaught).toEqual([]);
    // Every kind of case ran.
    if (!isReplay()) expect(kinds.size).toBeGreaterThanOrEqual(24);
  }, 120_000);

  it('leaves no socket or timer behind', async () => {
    const counts = () => {
      const out: Record<string, number> = {};
      for (const type of process.getActiveResourcesInfo()) out[type] = (out[type] ?? 0) + 1;
      return out;
    };
    // The previous test's cases have all settled; give closed handles a turn of the loop to go.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const before = counts();
    await fuzzAsync(
      0xd2a000,
      60,
      async (r, seed) => {
        const name = `c${seed}.fuzz.test`;
        ns.cases.set(name, randomCase(r, name));
        const limit = deadline(FAIL_BUDGET_MS, 'fuzz case deadline');
        try {
          await lookupAddresses(ns.server, name, limit.signal).catch(() => undefined);
        } finally {
          limit.dispose();
          ns.cases.delete(name);
          for (const s of ns.sockets.get(name) ?? []) s.destroy();
          ns.sockets.delete(name);
        }
      },
      { guardMs: FAIL_BUDGET_MS + GUARD_SLACK_MS, concurrency: 20 },
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    const after = counts();
    for (const type of ['UDPWrap', 'TCPSocketWrap', 'Timeout']) expect(after[type] ?? 0, type).toBeLessThanOrEqual(before[type] ?? 0);
  }, 60_000);
});

describe('DNS client regressions found by fuzzing', () => {
  const ADDRESS = '10.96.0.1';
  const OTHER = '10.66.6.6';
  let n = 0;
  async function lookup(udp: (q: Query) => Buffer[]): Promise<DnsAnswer | DnsQueryError> {
    const name = `r${n++}.regression.test`;
    ns.cases.set(name, { kind: 'regression', expect: FAIL, udp });
    const limit = deadline(FAIL_BUDGET_MS, 'regression deadline');
    try {
      return await lookupAddresses(ns.server, name, limit.signal);
    } catch (err) {
      if (err instanceof DnsQueryError) return err;
      throw err;
    } finally {
      limit.dispose();
      ns.cases.delete(name);
    }
  }
  const passed = (result: DnsAnswer | DnsQueryError) => !(result instanceof DnsQueryError) && verdictOf(result);

  it.each<[string, (q: Query) => Buffer[]]>([
    ['an address record for another name', (q) => [response(q, [aRecord(ADDRESS, `other.${q.name}`)])]],
    ['an answer to another name', (q) => [response(q, [aRecord(ADDRESS, q.name)], {}, { questions: [question(`other.${q.name}`, q.type)] })]],
    ['an answer to another type', (q) => [response(q, [aRecord(ADDRESS, q.name)], {}, { questions: [question(q.name, 15)] })]],
    ['an answer without the question', (q) => [response(q, [aRecord(ADDRESS, q.name)], {}, { questions: [] })]],
    ['an answer of another opcode', (q) => [response(q, [aRecord(ADDRESS)], { opcode: 2 })]],
    ['an address of another class', (q) => [response(q, [record(TYPE_A, Buffer.from([10, 96, 0, 1]), undefined, { cls: 3 })])]],
    ['a CNAME whose target has no address (one for another name)', (q) => [response(q, [cnameRecord('target.test'), aRecord(ADDRESS, 'elsewhere.test')])]],
    ['more answers counted than present', (q) => {
      const bytes = response(q, [aRecord(ADDRESS)]);
      bytes.writeUInt16BE(2, 6);
      return [bytes];
    }],
  ])('does not pass %s', async (_name, udp) => {
    expect(passed(await lookup(udp))).toBe(false);
  });

  it('reports an answer with an undecodable record as malformed', async () => {
    const result = await lookup((q) => [response(q, [aRecord(ADDRESS), record(TYPE_A, Buffer.from([1, 2, 3, 4, 5]))])]);
    expect(result).toBeInstanceOf(DnsQueryError);
    expect((result as DnsQueryError).kind).toBe('malformed');
    expect((result as DnsQueryError).message).toMatch(/^malformed answer over udp from 127\.0\.0\.1:\d+: answers\[1\] at offset \d+: A decode: RDLENGTH is 5, expected 4$/);
  });

  it('ignores a forged reply to another question and takes the real one', async () => {
    const result = await lookup((q) => [response(q, [aRecord(OTHER, q.name)], {}, { questions: [question(`x${q.name}`, q.type)] }), response(q, [aRecord(ADDRESS)])]);
    expect(result).toMatchObject({ addresses: [ADDRESS] });
  });

  it('reports an AAAA record in the answer to an A query under AAAA, not A', async () => {
    const v6 = { groups: [0xfd00, 0, 0, 0, 0, 0, 0, 1], text: 'fd00::1' };
    const result = await lookup((q) => [response(q, [aaaaRecord(v6.groups)])]);
    expect(result).toMatchObject({ type: 'AAAA', addresses: [v6.text] });
  });

  it('follows a CNAME chain written in any order, ignoring case', async () => {
    const result = await lookup((q) => [response(q, [aRecord(ADDRESS, 'B.test'), cnameRecord('b.TEST', 'a.test'), cnameRecord('A.test', q.name.toUpperCase())])]);
    expect(result).toMatchObject({ addresses: [ADDRESS] });
  });
});

import dgram from 'node:dgram';
import net, { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import dns2 from 'dns2';
import { formatHostPort, type HostPort } from '../config.js';
import { describeAbort, settleOnce } from './deadline.js';

/**
 * One DNS question to one nameserver, over UDP, repeated over TCP when the UDP answer is truncated.
 *
 * dns2's Packet does the wire format. Its UDPClient/TCPClient are not used: they cannot be
 * cancelled, the TCP fallback has no timeout (a silent server keeps the socket, and the process,
 * alive forever) and it splits the server address on ':' (IPv6 breaks). Here every socket is closed
 * when the answer arrives, on error, or when the caller's signal aborts.
 */

const { Packet } = dns2;
type Packet = dns2.Packet;

export type RecordType = 'A' | 'AAAA';

export interface DnsAnswer {
  rcode: string;
  /** The answer had the TC bit set (only with transport 'udp-only': otherwise it was repeated over TCP). */
  truncated: boolean;
  /** Size in bytes of the DNS message sent (UDP payload, or TCP without the length prefix). */
  querySize: number;
  /** Size in bytes of the DNS message received. */
  answerSize: number;
  /** UDP copies of the query sent before the answer came (1 when the first one was answered). */
  sends: number;
  /**
   * The addresses of the type asked for, owned by the name asked for or by a name it is an alias
   * of (a CNAME chain in the answer section). Records for other names or of other types are not
   * the answer and are left out.
   */
  addresses: string[];
  type: RecordType;
  transport: 'udp' | 'tcp';
  /** The UDP answer had the TC bit set and the query was repeated over TCP. */
  truncatedUdp: boolean;
  latencyMs: number;
}

export type DnsErrorKind = 'timeout' | 'refused' | 'network' | 'malformed' | 'size';

export class DnsQueryError extends Error {
  override name = 'DnsQueryError';
  constructor(
    readonly kind: DnsErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/** How often an unanswered UDP query is sent again (the same id; any copy's answer counts). */
export const UDP_RETRANSMIT_MS = 1000;

const RCODE_NAMES = new Map<number, string>(Object.entries(Packet.RCODE).map(([name, code]) => [code, name]));

export function rcodeName(code: number): string {
  return RCODE_NAMES.get(code) ?? `RCODE${code}`;
}

export interface QueryOptions {
  /** Send an EDNS0 OPT record (RFC 6891) offering this UDP payload size. Absent: no OPT (512-byte DNS). */
  ednsBufferSize?: number;
  /** Pad the query with the EDNS0 padding option (RFC 7830) to this many bytes of DNS message (implies OPT). */
  padTo?: number;
  /**
   * 'udp' (default): UDP, repeated over TCP when the answer is truncated; 'udp-only': a truncated
   * UDP answer is returned as it is; 'tcp': TCP only.
   */
  transport?: 'udp' | 'udp-only' | 'tcp';
}

/** Asks `server` for `name`; rejects with DnsQueryError (a timeout when `signal` aborts). */
export async function queryDns(server: HostPort, name: string, type: RecordType, signal: AbortSignal, options: QueryOptions = {}): Promise<DnsAnswer> {
  const started = performance.now();
  const query = buildQuery(name, type, options);
  const mode = options.transport ?? 'udp';
  let exchange = mode === 'tcp' ? await exchangeTcp(server, query, signal) : await exchangeUdp(server, query, signal);
  let transport: DnsAnswer['transport'] = mode === 'tcp' ? 'tcp' : 'udp';
  const sends = exchange.sends;
  if (exchange.packet.header.tc && mode === 'udp') {
    exchange = await exchangeTcp(server, query, signal);
    transport = 'tcp';
  }
  const response = exchange.packet;
  return {
    rcode: rcodeName(response.header.rcode),
    truncated: response.header.tc === 1,
    querySize: query.buffer.length,
    answerSize: exchange.size,
    sends,
    addresses: addressesOf(response, query),
    type,
    transport,
    truncatedUdp: mode === 'udp' && transport === 'tcp',
    latencyMs: Math.round(performance.now() - started),
  };
}

/**
 * The addresses of `name`: an A query, then AAAA when the name exists but has no A record
 * (IPv6-only clusters). The first answer that is not NOERROR-with-addresses is returned as is.
 */
export async function lookupAddresses(server: HostPort, name: string, signal: AbortSignal): Promise<DnsAnswer> {
  const a = await queryDns(server, name, 'A', signal);
  if (a.rcode !== 'NOERROR' || a.addresses.length > 0) return a;
  const aaaa = await queryDns(server, name, 'AAAA', signal);
  return aaaa.addresses.length > 0 ? { ...aaaa, latencyMs: a.latencyMs + aaaa.latencyMs } : a;
}

interface Query {
  id: number;
  name: string;
  type: RecordType;
  buffer: Buffer;
}

/** The EDNS payload size recommended against fragmentation (DNS flag day 2020). */
export const MIN_EDNS_BUFFER = 1232;
/** EDNS0 option code of padding (RFC 7830). dns2 has no codec for it: the OPT record is written here. */
const EDNS_PADDING = 12;
/** OPT record without options: root name (1), type (2), class = payload size (2), TTL (4), RDLENGTH (2). */
const OPT_SIZE = 11;
const OPTION_HEADER_SIZE = 4;

function buildQuery(name: string, type: RecordType, options: QueryOptions = {}): Query {
  const packet = new Packet();
  packet.header.id = Packet.uuid();
  packet.header.rd = 1;
  packet.questions.push({ name, type: Packet.TYPE[type], class: Packet.CLASS.IN } as dns2.Packet.Question);
  let buffer = packet.toBuffer();
  if (options.ednsBufferSize !== undefined || options.padTo !== undefined) {
    const withOpt = buffer.length + OPT_SIZE;
    const padding = options.padTo === undefined ? undefined : Math.max(0, options.padTo - withOpt - OPTION_HEADER_SIZE);
    const rdata = padding === undefined ? Buffer.alloc(0) : Buffer.alloc(OPTION_HEADER_SIZE + padding);
    if (padding !== undefined) {
      rdata.writeUInt16BE(EDNS_PADDING, 0);
      rdata.writeUInt16BE(padding, 2);
    }
    const opt = Buffer.alloc(OPT_SIZE);
    opt.writeUInt16BE(Packet.TYPE.EDNS, 1);
    opt.writeUInt16BE(options.ednsBufferSize ?? MIN_EDNS_BUFFER, 3);
    opt.writeUInt16BE(rdata.length, 9);
    buffer = Buffer.concat([buffer, opt, rdata]);
    buffer.writeUInt16BE(1, 10); // ARCOUNT
  }
  return { id: packet.header.id, name, type, buffer };
}

type Reply = { packet: Packet } | { malformed: string } | { rejected: string };

/**
 * Reads a message as the reply to `query`. Anything that is not one is rejected, with the reason:
 * another ID, not a response, another opcode or question (stray, forged or undecodable datagrams;
 * resolvers match the question too, RFC 5452 section 9.1). A reply whose answer section cannot be
 * decoded is malformed, unless it is truncated (the query goes over TCP then) or reports an error
 * rcode.
 */
function matchReply(message: Buffer, query: Query): Reply {
  let packet: Packet;
  try {
    packet = Packet.parse(message);
  } catch {
    return { rejected: 'not a DNS message' };
  }
  const { header, questions } = packet;
  if (header.qr !== 1) return { rejected: 'a query, not an answer' };
  if (header.id !== query.id) return { rejected: 'another transaction ID' };
  if (header.opcode !== 0) return { rejected: 'another opcode' };
  const question = questions[0];
  if (header.qdcount !== 1 || !question || !sameName(question.name, query.name) || question.type !== Packet.TYPE[query.type] || question.class !== Packet.CLASS.IN) {
    const asked = question ? `${question.name || '.'} ${Packet.typeName(question.type) ?? question.type}` : 'none';
    return { rejected: `another question (${header.qdcount === 1 ? asked : `${header.qdcount} questions`})` };
  }
  const broken = packet.errors.find((e) => e.section === 'answers');
  if (broken && !header.tc && header.rcode === Packet.RCODE.NOERROR) return { malformed: broken.message };
  return { packet };
}

/**
 * Replies that arrived but are not the answer, counted by reason, so a timeout can say "answers
 * arrived but were rejected" instead of "no answer".
 */
class Rejections {
  private readonly counts = new Map<string, number>();

  add(reason: string): void {
    this.counts.set(reason, (this.counts.get(reason) ?? 0) + 1);
  }

  /** "; 2 replies arrived but were rejected: another transaction ID (2)", or "". */
  describe(): string {
    if (this.counts.size === 0) return '';
    const total = [...this.counts.values()].reduce((a, b) => a + b, 0);
    const reasons = [...this.counts].map(([reason, n]) => `${reason}${n > 1 ? ` (${n})` : ''}`).join(', ');
    return `; ${total} ${total === 1 ? 'reply arrived but was' : 'replies arrived but were'} rejected: ${reasons}`;
  }
}

/** DNS names compare without regard to ASCII case (RFC 4343) and a trailing dot. */
function sameName(a: string, b: string): boolean {
  return canonicalName(a) === canonicalName(b);
}

function canonicalName(name: string): string {
  return name.replace(/\.$/, '').replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** Addresses of the asked type for the asked name, following CNAMEs in the answer section (in any order). */
function addressesOf(packet: Packet, query: Query): string[] {
  const owners = new Set([canonicalName(query.name)]);
  const owned = (r: dns2.Packet.Resource) => r.class === Packet.CLASS.IN && owners.has(canonicalName(r.name));
  for (let grew = true; grew; ) {
    grew = false;
    for (const r of packet.answers) {
      if (r.type === Packet.TYPE.CNAME && owned(r) && typeof r.domain === 'string' && !owners.has(canonicalName(r.domain))) {
        owners.add(canonicalName(r.domain));
        grew = true;
      }
    }
  }
  const type = Packet.TYPE[query.type];
  return packet.answers.flatMap((r) => (r.type === type && owned(r) && typeof r.address === 'string' ? [r.address] : []));
}

interface Exchange {
  packet: Packet;
  /** Bytes of the DNS message received. */
  size: number;
  sends: number;
}

function exchangeUdp(server: HostPort, query: Query, signal: AbortSignal): Promise<Exchange> {
  const rejections = new Rejections();
  return settleOnce(signal, () => timeoutError(signal, 'udp', rejections), ({ resolve, reject }) => {
    // A connected socket only accepts datagrams from the server and reports ICMP
    // "port unreachable" as ECONNREFUSED: a dead nameserver fails fast instead of timing out.
    // A second, unconnected socket on the same port (SO_REUSEADDR) receives what the kernel does not
    // give the connected one: replies from another source address (a DNAT not undone on the way back).
    const family = isIP(server.host) === 6 ? 'udp6' : 'udp4';
    const socket = dgram.createSocket({ type: family, reuseAddr: true });
    const stray = dgram.createSocket({ type: family, reuseAddr: true });
    let retransmit: NodeJS.Timeout | undefined;
    let closed = false;
    let sends = 0;
    const send = () => {
      sends++;
      socket.send(query.buffer, (err) => {
        if (err) reject(socketError(err, server, 'udp', query));
      });
    };
    socket.on('message', (message) => {
      const reply = matchReply(message, query);
      if ('packet' in reply) resolve({ packet: reply.packet, size: message.length, sends });
      else if ('malformed' in reply) reject(new DnsQueryError('malformed', `malformed answer over udp from ${formatHostPort(server)}: ${reply.malformed}`));
      else rejections.add(reply.rejected);
    });
    stray.on('message', (message, from) => {
      const reply = matchReply(message, query);
      if (!('rejected' in reply)) rejections.add(`the answer came from ${formatHostPort({ host: from.address, port: from.port })}, not from ${formatHostPort(server)}`);
    });
    stray.on('error', () => {}); // best effort: without it, only wrong-source replies go unseen
    socket.on('error', (err) => reject(socketError(err, server, 'udp', query)));
    socket.once('connect', () => {
      if (closed) return;
      send();
      retransmit = setInterval(send, UDP_RETRANSMIT_MS);
    });
    socket.bind(0, () => {
      if (closed) return;
      const { port } = socket.address();
      stray.bind(port, () => {
        if (!closed) socket.connect(server.port, server.host);
      });
    });
    return () => {
      closed = true;
      clearInterval(retransmit);
      for (const s of [socket, stray]) {
        try {
          s.close();
        } catch {
          // already closed
        }
      }
    };
  });
}

function exchangeTcp(server: HostPort, query: Query, signal: AbortSignal): Promise<Exchange> {
  return settleOnce(signal, () => timeoutError(signal, 'tcp'), ({ resolve, reject }) => {
    const socket = net.connect({ host: server.host, port: server.port });
    let received = Buffer.alloc(0);
    socket.on('connect', () => {
      const length = Buffer.alloc(2);
      length.writeUInt16BE(query.buffer.length);
      socket.write(Buffer.concat([length, query.buffer]));
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 2) return;
      const size = received.readUInt16BE(0);
      if (received.length < 2 + size) return;
      const reply = matchReply(received.subarray(2, 2 + size), query);
      if ('packet' in reply) resolve({ packet: reply.packet, size, sends: 1 });
      else reject(new DnsQueryError('malformed', `malformed answer over tcp from ${formatHostPort(server)}: ${'malformed' in reply ? reply.malformed : `not the answer to the query (${reply.rejected})`}`));
    });
    socket.on('end', () => reject(new DnsQueryError('malformed', `${formatHostPort(server)} closed the tcp connection before a full answer`)));
    socket.on('error', (err) => reject(socketError(err, server, 'tcp', query)));
    return () => socket.destroy();
  });
}

function timeoutError(signal: AbortSignal, transport: 'udp' | 'tcp', rejections?: Rejections): DnsQueryError {
  const rejected = rejections?.describe() ?? '';
  const what = rejected ? `no valid answer over ${transport}` : `no answer over ${transport}`;
  return new DnsQueryError('timeout', `timeout: ${what} within ${describeAbort(signal)}${rejected}`);
}

function socketError(err: Error, server: HostPort, transport: 'udp' | 'tcp', query: Query): DnsQueryError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') {
    return new DnsQueryError('refused', `connection refused: nothing listens on ${transport} ${formatHostPort(server)}`);
  }
  if (code === 'EMSGSIZE') {
    // The kernel learned a smaller path MTU (an ICMP "fragmentation needed" for a packet sent with
    // don't-fragment), or the message exceeds the interface MTU.
    return new DnsQueryError('size', `a ${query.buffer.length}-byte ${transport} query is too large for the path (EMSGSIZE: a router or the interface reported a smaller MTU)`);
  }
  return new DnsQueryError('network', `network error over ${transport}: ${code ? `${code} ` : ''}${err.message}`.trim());
}

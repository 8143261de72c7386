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

export type DnsErrorKind = 'timeout' | 'refused' | 'network' | 'malformed';

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

/** Asks `server` for `name`; rejects with DnsQueryError (a timeout when `signal` aborts). */
export async function queryDns(server: HostPort, name: string, type: RecordType, signal: AbortSignal): Promise<DnsAnswer> {
  const started = performance.now();
  const query = buildQuery(name, type);
  let response = await exchangeUdp(server, query, signal);
  let transport: DnsAnswer['transport'] = 'udp';
  if (response.header.tc) {
    response = await exchangeTcp(server, query, signal);
    transport = 'tcp';
  }
  return {
    rcode: rcodeName(response.header.rcode),
    addresses: addressesOf(response, query),
    type,
    transport,
    truncatedUdp: transport === 'tcp',
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

function buildQuery(name: string, type: RecordType): Query {
  const packet = new Packet();
  packet.header.id = Packet.uuid();
  packet.header.rd = 1;
  packet.questions.push({ name, type: Packet.TYPE[type], class: Packet.CLASS.IN } as dns2.Packet.Question);
  return { id: packet.header.id, name, type, buffer: packet.toBuffer() };
}

type Reply = { packet: Packet } | { malformed: string };

/**
 * Reads a message as the reply to `query`. Undefined for anything that is not one: another ID, not
 * a response, another opcode or question (stray, forged or undecodable datagrams; resolvers match
 * the question too, RFC 5452 section 9.1). A reply whose answer section cannot be decoded is
 * malformed, unless it is truncated (the query goes over TCP then) or reports an error rcode.
 */
function matchReply(message: Buffer, query: Query): Reply | undefined {
  let packet: Packet;
  try {
    packet = Packet.parse(message);
  } catch {
    return undefined;
  }
  const { header, questions } = packet;
  if (header.id !== query.id || header.qr !== 1 || header.opcode !== 0) return undefined;
  const question = questions[0];
  if (header.qdcount !== 1 || !question || !sameName(question.name, query.name) || question.type !== Packet.TYPE[query.type] || question.class !== Packet.CLASS.IN) {
    return undefined;
  }
  const broken = packet.errors.find((e) => e.section === 'answers');
  if (broken && !header.tc && header.rcode === Packet.RCODE.NOERROR) return { malformed: broken.message };
  return { packet };
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

function exchangeUdp(server: HostPort, query: Query, signal: AbortSignal): Promise<Packet> {
  return settleOnce(signal, () => timeoutError(signal, 'udp'), ({ resolve, reject }) => {
    // A connected socket only accepts datagrams from the server and reports ICMP
    // "port unreachable" as ECONNREFUSED: a dead nameserver fails fast instead of timing out.
    const socket = dgram.createSocket(isIP(server.host) === 6 ? 'udp6' : 'udp4');
    let retransmit: NodeJS.Timeout | undefined;
    let closed = false;
    const send = () =>
      socket.send(query.buffer, (err) => {
        if (err) reject(socketError(err, server, 'udp'));
      });
    socket.on('message', (message) => {
      const reply = matchReply(message, query);
      if (!reply) return;
      if ('packet' in reply) resolve(reply.packet);
      else reject(new DnsQueryError('malformed', `malformed answer over udp from ${formatHostPort(server)}: ${reply.malformed}`));
    });
    socket.on('error', (err) => reject(socketError(err, server, 'udp')));
    socket.once('connect', () => {
      if (closed) return;
      send();
      retransmit = setInterval(send, UDP_RETRANSMIT_MS);
    });
    socket.connect(server.port, server.host);
    return () => {
      closed = true;
      clearInterval(retransmit);
      try {
        socket.close();
      } catch {
        // already closed
      }
    };
  });
}

function exchangeTcp(server: HostPort, query: Query, signal: AbortSignal): Promise<Packet> {
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
      if (reply && 'packet' in reply) resolve(reply.packet);
      else reject(new DnsQueryError('malformed', `malformed answer over tcp from ${formatHostPort(server)}${reply ? `: ${reply.malformed}` : ': not an answer to the query'}`));
    });
    socket.on('end', () => reject(new DnsQueryError('malformed', `${formatHostPort(server)} closed the tcp connection before a full answer`)));
    socket.on('error', (err) => reject(socketError(err, server, 'tcp')));
    return () => socket.destroy();
  });
}

function timeoutError(signal: AbortSignal, transport: 'udp' | 'tcp'): DnsQueryError {
  return new DnsQueryError('timeout', `timeout: no answer over ${transport} within ${describeAbort(signal)}`);
}

function socketError(err: Error, server: HostPort, transport: 'udp' | 'tcp'): DnsQueryError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') {
    return new DnsQueryError('refused', `connection refused: nothing listens on ${transport} ${formatHostPort(server)}`);
  }
  return new DnsQueryError('network', `network error over ${transport}: ${code ? `${code} ` : ''}${err.message}`.trim());
}

import type { Socket } from 'node:net';
import { isIP, type AddressInfo } from 'node:net';
import dns2 from 'dns2';
import type { HostPort } from '../config.js';

const { Packet, UDPServer, TCPServer } = dns2;

/** How the test server answers one question: an rcode and addresses, or silence. */
export type Reply = { rcode?: number; addresses?: string[]; delayMs?: number } | 'drop';
export type Handler = (question: { name: string; type: number }, transport: 'udp' | 'tcp') => Reply;

export interface TestDnsServer {
  server: HostPort;
  queries: Array<{ name: string; type: string; transport: 'udp' | 'tcp' }>;
  close(): Promise<void>;
}

/**
 * A dns2 server on one loopback address: UDP and TCP bound separately on the same port there
 * (dns2's createServer would bind TCP on every interface).
 */
export async function startDnsServer(handler: Handler, opts: { host?: string; port?: number; tcp?: boolean } = {}): Promise<TestDnsServer> {
  const host = opts.host ?? '127.0.0.1';
  const queries: TestDnsServer['queries'] = [];
  const respond = (transport: 'udp' | 'tcp') => (request: dns2.Packet, send: (response: dns2.Packet) => void) => {
    const question = request.questions[0];
    if (!question) return;
    queries.push({ name: question.name, type: Packet.typeName(question.type), transport });
    const reply = handler(question, transport);
    if (reply === 'drop') return;
    const response = Packet.createResponseFromRequest(request);
    response.header.rcode = reply.rcode ?? Packet.RCODE.NOERROR;
    for (const address of reply.addresses ?? []) {
      const type = isIP(address) === 6 ? Packet.TYPE.AAAA : Packet.TYPE.A;
      if (type === question.type) response.answers.push({ name: question.name, type, class: Packet.CLASS.IN, ttl: 30, address } as dns2.Packet.Resource);
    }
    if (reply.delayMs === undefined) return send(response);
    const timer = setTimeout(() => {
      timers.delete(timer);
      send(response);
    }, reply.delayMs);
    timers.add(timer);
  };
  const timers = new Set<NodeJS.Timeout>();

  // The UDP port is the kernel's pick; the same number for TCP can be taken by another socket
  // (tests run in parallel): then pick again, unless the caller asked for that port.
  let udp: InstanceType<typeof UDPServer>;
  let port: number;
  let tcp: InstanceType<typeof TCPServer> | undefined;
  const sockets = new Set<Socket>();
  for (let attempt = 1; ; attempt++) {
    udp = new UDPServer(respond('udp'));
    await udp.listen(opts.port ?? 0, host);
    port = (udp.address() as AddressInfo).port;
    if (opts.tcp === false) break;
    const server = new TCPServer(respond('tcp'));
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => resolve());
      });
      tcp = server;
      break;
    } catch (err) {
      udp.close();
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || opts.port !== undefined || attempt >= 20) throw err;
    }
  }
  return {
    server: { host, port },
    queries,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      udp.close();
      for (const s of sockets) s.destroy();
      if (tcp) await new Promise<void>((resolve) => tcp?.close(() => resolve()));
    },
  };
}

/** Answers every A question for `names` with `addresses`, NXDOMAIN otherwise. */
export function zone(records: Record<string, string[]>): Handler {
  return ({ name, type }) => {
    const addresses = records[name.toLowerCase()];
    if (!addresses) return { rcode: Packet.RCODE.NXDOMAIN };
    return { addresses: addresses.filter((a) => (type === Packet.TYPE.AAAA ? isIP(a) === 6 : isIP(a) === 4)) };
  };
}

import dgram from 'node:dgram';
import net from 'node:net';
import dns2 from 'dns2';

const { Packet } = dns2;

/**
 * A DNS server that answers like CoreDNS does for size: over UDP it fills the answer with as many
 * records as fit the client's EDNS buffer (512 bytes without EDNS) and sets TC when some are left
 * out; over TCP it sends every record. `records(name)` gives the A records of a name (NXDOMAIN
 * when undefined). Used in network-namespace tests, where it runs as its own process.
 */
export async function startSizedDnsServer(host: string, port: number, records: (name: string) => string[] | undefined): Promise<{ close(): void }> {
  const answer = (query: dns2.Packet, limit: number): Buffer => {
    const question = query.questions[0];
    const response = Packet.createResponseFromRequest(query);
    response.additionals = [];
    const addresses = question ? records(question.name.toLowerCase()) : undefined;
    if (!addresses) response.header.rcode = Packet.RCODE.NXDOMAIN;
    let buffer = response.toBuffer();
    for (const address of question?.type === Packet.TYPE.A ? (addresses ?? []) : []) {
      response.answers.push({ name: question?.name ?? '', type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 5, address } as dns2.Packet.Resource);
      const next = response.toBuffer();
      if (next.length > limit) {
        response.answers.pop();
        response.header.tc = 1;
        buffer = response.toBuffer();
        break;
      }
      buffer = next;
    }
    return buffer;
  };
  const udp = dgram.createSocket('udp4');
  udp.on('message', (raw, from) => {
    let query: dns2.Packet;
    try {
      query = Packet.parse(raw);
    } catch {
      return;
    }
    const opt = query.additionals.find((r) => r.type === Packet.TYPE.EDNS) as { class?: number } | undefined;
    udp.send(answer(query, Math.max(512, opt?.class ?? 512)), from.port, from.address);
  });
  await new Promise<void>((resolve) => udp.bind(port, host, resolve));
  const tcp = net.createServer((socket) => {
    let received = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 2 || received.length < 2 + received.readUInt16BE(0)) return;
      const out = answer(Packet.parse(received.subarray(2, 2 + received.readUInt16BE(0))), 65535);
      const length = Buffer.alloc(2);
      length.writeUInt16BE(out.length);
      socket.end(Buffer.concat([length, out]));
    });
  });
  await new Promise<void>((resolve) => tcp.listen(port, host, resolve));
  return {
    close: () => {
      udp.close();
      tcp.close();
    },
  };
}

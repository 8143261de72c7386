import { isIP } from 'node:net';
import { errorMessage } from '@kube-node-ready/core';
import { formatHostPort, formatServiceRef, type HostPort } from '../config.js';
import { readyEndpoints, slicePort } from '../kube/objects.js';
import { MIN_EDNS_BUFFER, queryDns, type DnsAnswer, type QueryOptions } from '../net/dns-client.js';
import { readNoPmtuDisc, readPodLink } from '../net/pod-link.js';
import { verdict, type Check, type CheckContext } from './types.js';

/** An answer larger than this does not fit one packet of the usual 1500-byte MTU. */
export const LARGE_ANSWER_BYTES = 1500;
/** The MTU tested when the pod's cannot be read. */
export const FALLBACK_MTU = 1500;

const IP_HEADER = { 4: 20, 6: 40 } as const;
const UDP_HEADER = 8;

interface Target {
  /** "nameserver 10.96.0.10:53" or "DNS pod 10.244.1.5:53 on node-b". */
  label: string;
  server: HostPort;
}

interface Probe {
  /** What was sent, as the message says it: "a 1472-byte query", "a large answer over udp (1232-byte buffer)". */
  what: string;
  /** small: the baseline; padded: the MTU-sized query; large-udp, large-tcp: the answer for mtu.largeName. */
  kind: 'small' | 'padded' | 'large-udp' | 'large-tcp';
  /** Which direction a loss points to. */
  direction: 'from this pod' | 'to this pod';
  /** The size that must get through, in bytes of IP packet, for the message. */
  packetBytes?: number;
  /** large-udp: the EDNS buffer offered, which the server fills: the size of the answer that must arrive. */
  answerBytes?: number;
  ok: boolean;
  answer?: DnsAnswer;
  error?: string;
  tooLarge?: boolean;
}

/**
 * mtu: full-size packets both ways between this pod and each nameserver and each cluster DNS pod.
 *
 * From the pod: a DNS query padded (EDNS0 padding, RFC 7830) to the pod's MTU, next to a small one.
 * To the pod (with mtu.largeName, a name whose answer is larger than 1500 bytes): the answer over
 * UDP with a 1232-byte EDNS buffer, over UDP with a buffer of the pod's MTU, and over TCP. A size
 * that gets no answer while a small query to the same server does is a packet-size fault (an
 * overlay MTU larger than the path carries, a path-MTU blackhole), not a dead server: that one is
 * the dns and podnet checks' finding.
 */
export const mtuCheck: Check = async (ctx) => {
  const { config, signal } = ctx;
  const warnings: string[] = [];
  const read = config.mtu.mtu !== undefined ? { interface: undefined, mtu: config.mtu.mtu } : readPodLink();
  // Without the pod's own MTU the common Ethernet size is tested: a smaller pod MTU makes the
  // kernel fragment the query (don't-fragment is only set on datagrams that fit), so it cannot
  // fail a healthy node; the warning says what was not tested.
  if ('error' in read) warnings.push(`${read.error}; tested with ${FALLBACK_MTU}-byte packets`);
  const link = 'error' in read ? { interface: undefined, mtu: FALLBACK_MTU } : read;
  const noPmtuDisc = readNoPmtuDisc();
  if (noPmtuDisc !== undefined && noPmtuDisc !== 0) {
    warnings.push(`don't-fragment is off for UDP (net.ipv4.ip_no_pmtu_disc=${noPmtuDisc}): a large query may have passed in fragments`);
  }
  const { targets, notes } = await targetsOf(ctx);
  const question = config.dns.names[0] ?? `kubernetes.default.svc.${config.clusterDomain}`;
  const details: Record<string, unknown> = {
    mtu: link.mtu,
    mtuFrom: link.interface ? `/sys/class/net/${link.interface}/mtu` : config.mtu.mtu !== undefined ? 'mtu.mtu' : 'fallback (the pod MTU could not be read)',
    dontFragment: noPmtuDisc === undefined ? 'unknown' : noPmtuDisc === 0 ? 'set when the datagram fits the path MTU (ip_no_pmtu_disc=0)' : `off (ip_no_pmtu_disc=${noPmtuDisc})`,
    largeName: config.mtu.largeName ?? 'not set: answers larger than a small packet are not tested (mtu.largeName)',
    ...(notes.length > 0 ? { notes } : {}),
  };
  if (targets.length === 0) return verdict([`not tested: ${notes.join('; ') || 'no nameserver and no DNS pod to send to'}`], details, warnings);

  const results = await Promise.all(targets.map((t) => probeTarget(t, question, config.mtu.largeName, link.mtu, signal)));
  const problems: string[] = [];
  const untested: string[] = [];
  for (const { target, small, probes } of results) {
    if (!small.ok) {
      untested.push(target.label);
      continue;
    }
    const lost = probes.filter((p) => !p.ok);
    if (lost.length > 0) problems.push(describeLoss(target, small, probes, lost, link.mtu));
    for (const p of probes) {
      if (p.ok && p.direction === 'to this pod' && p.answer?.transport === 'tcp' && p.answer.answerSize <= LARGE_ANSWER_BYTES) {
        warnings.push(`mtu.largeName ${config.mtu.largeName ?? ''} answers with only ${p.answer.answerSize} bytes over tcp: too small to test large answers (it needs more than ${LARGE_ANSWER_BYTES})`);
      }
    }
  }
  if (untested.length === results.length) problems.push(`not tested: no nameserver or DNS pod answered even a small query (${untested.join(', ')})`);
  details.targets = results.map(({ target, small, probes }) => ({
    target: target.label,
    ...(small.ok ? {} : { untested: `no answer to a small query: ${small.error ?? ''}` }),
    probes: [small, ...probes].map(report),
  }));
  return verdict(problems, details, [...new Set(warnings)]);
};

async function targetsOf({ config, nameservers, cluster, signal }: CheckContext): Promise<{ targets: Target[]; notes: string[] }> {
  const notes: string[] = [];
  const targets: Target[] = [];
  if ('error' in nameservers) notes.push(`nameservers not tested: ${nameservers.error}`);
  else targets.push(...nameservers.servers.map((server) => ({ label: `nameserver ${formatHostPort(server)}`, server })));
  if (cluster) {
    try {
      const { body: slices } = await cluster.endpointSlices(config.dnsService, signal);
      for (const slice of slices) {
        const port = slicePort(slice, 'dns', 'UDP') ?? 53;
        for (const e of readyEndpoints(slice)) {
          const server = { host: e.address, port };
          targets.push({ label: `DNS pod ${formatHostPort(server)}${e.nodeName ? ` on ${e.nodeName}` : ''}`, server });
        }
      }
    } catch (err) {
      notes.push(`DNS pods of Service ${formatServiceRef(config.dnsService)} not tested: ${errorMessage(err)}`);
    }
  }
  return { targets, notes };
}

async function probeTarget(target: Target, question: string, largeName: string | undefined, mtu: number, signal: AbortSignal) {
  const family = isIP(target.server.host) === 6 ? 6 : 4;
  const payload = mtu - IP_HEADER[family] - UDP_HEADER;
  const send = async (name: string, partial: Omit<Probe, 'ok'>, options: QueryOptions): Promise<Probe> => {
    try {
      return { ...partial, ok: true, answer: await queryDns(target.server, name, 'A', signal, options) };
    } catch (err) {
      return { ...partial, ok: false, error: errorMessage(err), ...((err as { kind?: string }).kind === 'size' ? { tooLarge: true } : {}) };
    }
  };
  const udpOnly = { transport: 'udp-only' } as const;
  const small = send(question, { what: 'a small query', kind: 'small', direction: 'from this pod' }, { ...udpOnly, ednsBufferSize: MIN_EDNS_BUFFER });
  const probes: Array<Promise<Probe>> = [
    send(
      question,
      { what: `a ${payload}-byte query (${mtu}-byte packets, the pod MTU)`, kind: 'padded', direction: 'from this pod', packetBytes: mtu },
      { ...udpOnly, ednsBufferSize: MIN_EDNS_BUFFER, padTo: payload },
    ),
  ];
  if (largeName) {
    const buffers = payload > MIN_EDNS_BUFFER ? [MIN_EDNS_BUFFER, payload] : [payload];
    for (const size of buffers) {
      const packetBytes = size + IP_HEADER[family] + UDP_HEADER;
      const what = `a query for the large answer over udp (${size}-byte EDNS buffer)`;
      probes.push(send(largeName, { what, kind: 'large-udp', direction: 'to this pod', packetBytes, answerBytes: size }, { ...udpOnly, ednsBufferSize: size }));
    }
    probes.push(send(largeName, { what: 'a query for the large answer over tcp', kind: 'large-tcp', direction: 'to this pod' }, { transport: 'tcp' }));
  }
  return { target, small: await small, probes: await Promise.all(probes) };
}

/**
 * "nameserver 10.96.0.10:53: 1500-byte packets from this pod are lost (an overlay MTU larger than
 * the path carries, or a path-MTU blackhole): no reply to a 1472-byte query (...) (timeout: ...);
 * replies to: a small query (65 bytes), ..." (sizes: of the query sent from the pod, of the reply
 * sent to it). When only the large answers over UDP are lost: "large DNS answers (1232 bytes over
 * UDP) are lost between the DNS server and this pod while small ones, and the same answer over
 * TCP, arrive (likely a path MTU smaller than the pod MTU ...)".
 */
function describeLoss(target: Target, small: Probe, probes: Probe[], lost: Probe[], mtu: number): string {
  const errors = [...new Set(lost.map((p) => p.error ?? 'no answer'))].join('; ');
  const through = [small, ...probes]
    .filter((p) => p.ok && p.answer)
    .map((p) => `${p.what} (${p.direction === 'from this pod' ? p.answer?.querySize : p.answer?.answerSize} bytes)`)
    .join(', ');
  return `${target.label}: ${lossCause(probes, lost, mtu)}: no reply to ${lost.map((p) => p.what).join(', ')} (${errors}); replies to: ${through}`;
}

function lossCause(probes: Probe[], lost: Probe[], mtu: number): string {
  // Only the large answers over UDP are lost: what applications see (a lookup of a name with many
  // records times out), said in those terms. TCP getting through points at the packet size, not
  // the server: TCP adapts its segments to the path (path-MTU discovery, MSS clamping), a UDP
  // answer is sent whole.
  const tcpArrived = probes.some((p) => p.kind === 'large-tcp' && p.ok);
  if (tcpArrived && lost.every((p) => p.kind === 'large-udp')) {
    const bytes = Math.min(...lost.map((p) => p.answerBytes ?? 0));
    return (
      `large DNS answers (${bytes} bytes over UDP) are lost between the DNS server and this pod while small ones, and the same answer over TCP, arrive ` +
      `(likely a path MTU smaller than the pod MTU of ${mtu} bytes, as when an overlay MTU is larger than the underlay carries: TCP adapts its segments to the path, UDP answers do not)`
    );
  }
  const directions = [...new Set(lost.map((p) => p.direction))].join(' and ');
  if (lost.some((p) => p.tooLarge)) return `the path MTU is smaller than the pod MTU (packets ${directions})`;
  const largest = Math.max(...lost.map((p) => p.packetBytes ?? 0));
  return `${largest > 0 ? `${largest}-byte` : 'large'} packets ${directions} are lost (an overlay MTU larger than the path carries, or a path-MTU blackhole)`;
}

function report(p: Probe): Record<string, unknown> {
  return {
    probe: p.what,
    ok: p.ok,
    ...(p.answer
      ? { rcode: p.answer.rcode, querySize: p.answer.querySize, answerSize: p.answer.answerSize, truncated: p.answer.truncated, transport: p.answer.transport, latencyMs: p.answer.latencyMs }
      : {}),
    ...(p.error !== undefined ? { error: p.error } : {}),
  };
}

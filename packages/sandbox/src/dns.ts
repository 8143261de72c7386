import dns2 from 'dns2';
import type { Logger } from '@kube-node-ready/core';
import type { SandboxLayout } from './layout.js';
import { readyAddresses, type ServiceCatalog } from './catalog.js';
import { k8s, listWatch } from './kube.js';

const { Packet } = dns2;

/**
 * Failure modes of the cluster DNS (the kube-dns ClusterIP and the DNS "pods"), switched at run
 * time through the ConfigMap kube-system/sandbox-dns:
 *   data.mode: ok | servfail | timeout | wrong | truncate
 *   data.deadPods: comma-separated DNS pod IPs that do not answer (pod-network faults)
 */
export type DnsMode = 'ok' | 'servfail' | 'timeout' | 'wrong' | 'truncate';
export const DNS_CONFIGMAP = 'sandbox-dns';

interface Records {
  /** fqdn (lower case, no trailing dot) -> IPv4 addresses */
  a: Map<string, string[]>;
}

type Role = 'cluster' | 'blackhole' | 'lying';

/**
 * The sandbox's cluster DNS: answers `<svc>.<ns>.svc.<domain>` from the Services in the API
 * (ClusterIP, or ready endpoint addresses of a headless Service's EndpointSlices). Names outside
 * the cluster domain get NXDOMAIN: nothing is forwarded anywhere.
 */
export class ClusterDns {
  private records: Records = { a: new Map() };
  private mode: DnsMode = 'ok';
  private deadPods = new Set<string>();
  /** Whether the kube-dns Service has a ready endpoint: without one its ClusterIP answers nothing (as kube-proxy with no backend). */
  private serviceHasEndpoints = true;
  private servers: Array<{ close: () => void }> = [];
  private watches: Array<{ stop: () => void }> = [];
  queries = 0;

  constructor(
    private readonly layout: SandboxLayout,
    private readonly kc: k8s.KubeConfig,
    private readonly catalog: ServiceCatalog,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    const core = this.kc.makeApiClient(k8s.CoreV1Api);
    this.catalog.onChange(() => this.rebuild());
    this.rebuild();
    this.watches.push(
      listWatch<k8s.V1ConfigMap>(
        this.kc,
        `/api/v1/namespaces/kube-system/configmaps?fieldSelector=metadata.name%3D${DNS_CONFIGMAP}`,
        () => core.listNamespacedConfigMap({ namespace: 'kube-system', fieldSelector: `metadata.name=${DNS_CONFIGMAP}` }),
        (type, cm) => this.applyConfig(type === 'DELETED' ? undefined : cm),
        (items) => this.applyConfig(items[0]),
      ),
    );
    const L = this.layout;
    for (const ip of [L.clusterDnsIp, ...L.dnsPodIps]) await this.listen(ip, 'cluster');
    await this.listen(L.blackholeDnsIp, 'blackhole');
    await this.listen(L.lyingDnsIp, 'lying');
    // L.deadDnsIp is deliberately left unbound: queries get ICMP port unreachable.
  }

  stop(): void {
    for (const w of this.watches) w.stop();
    for (const s of this.servers) s.close();
  }

  private applyConfig(cm: k8s.V1ConfigMap | undefined): void {
    const mode = (cm?.data?.mode ?? 'ok') as DnsMode;
    this.mode = ['ok', 'servfail', 'timeout', 'wrong', 'truncate'].includes(mode) ? mode : 'ok';
    this.deadPods = new Set((cm?.data?.deadPods ?? '').split(',').map((s) => s.trim()).filter(Boolean));
    this.log.info({ mode: this.mode, deadPods: [...this.deadPods] }, 'cluster DNS mode');
  }

  private rebuild(): void {
    const a = new Map<string, string[]>();
    const domain = this.layout.clusterDomain;
    for (const svc of this.catalog.services.values()) {
      const name = `${svc.metadata?.name}.${svc.metadata?.namespace}.svc.${domain}`.toLowerCase();
      const ip = svc.spec?.clusterIP;
      if (ip && ip !== 'None') {
        a.set(name, [ip]);
        continue;
      }
      const addrs = this.catalog.slicesOf(svc.metadata?.namespace, svc.metadata?.name).flatMap(readyAddresses);
      if (addrs.length) a.set(name, addrs);
    }
    this.records = { a };
    this.serviceHasEndpoints = this.catalog.slicesOf('kube-system', 'kube-dns').flatMap(readyAddresses).length > 0;
  }

  /** What the cluster DNS answers for a name right now (used by tests of the sandbox itself). */
  lookup(name: string): string[] | undefined {
    return this.records.a.get(name.toLowerCase().replace(/\.$/, ''));
  }

  private async listen(ip: string, role: Role): Promise<void> {
    const udp = dns2.createUDPServer((req, send) => this.handle(req, replyOrDrop(send, this.log), ip, role, 'udp'));
    const tcp = dns2.createTCPServer((req, send) => this.handle(req, replyOrDrop(send, this.log), ip, role, 'tcp'));
    udp.on('requestError', (err: Error) => this.log.debug({ err: err.message, ip }, 'bad DNS request'));
    tcp.on('requestError', (err: Error) => this.log.debug({ err: err.message, ip }, 'bad DNS request'));
    await udp.listen(53, ip);
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(53, ip, () => resolve());
    });
    this.servers.push({ close: () => udp.close() }, { close: () => tcp.close() });
  }

  private handle(req: dns2.Packet, send: (r: dns2.Packet) => void, ip: string, role: Role, proto: 'udp' | 'tcp'): void {
    this.queries++;
    if (role === 'blackhole') return;
    if (role === 'cluster' && this.deadPods.has(ip)) return;
    if (role === 'cluster' && this.mode === 'timeout') return;
    // A Service without a ready endpoint: kube-proxy has nowhere to send the query (a real one
    // rejects it with ICMP; here it goes unanswered, a timeout for the worker).
    if (role === 'cluster' && ip === this.layout.clusterDnsIp && !this.serviceHasEndpoints) return;
    const res = Packet.createResponseFromRequest(req);
    const q = req.questions[0];
    if (!q) return send(res);
    const name = q.name.toLowerCase().replace(/\.$/, '');
    if (role === 'cluster' && this.mode === 'servfail') {
      res.header.rcode = Packet.RCODE.SERVFAIL;
      return send(res);
    }
    if (role === 'cluster' && this.mode === 'truncate' && proto === 'udp') {
      res.header.tc = 1;
      return send(res);
    }
    const lie = role === 'lying' || (role === 'cluster' && this.mode === 'wrong');
    const addrs = lie ? [this.layout.lyingAnswer] : this.records.a.get(name);
    if (!addrs) {
      res.header.rcode = Packet.RCODE.NXDOMAIN;
      return send(res);
    }
    if (q.type === Packet.TYPE.A || q.type === Packet.TYPE.ANY) {
      for (const address of addrs) res.answers.push({ name: q.name, type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 5, address } as dns2.Packet.Resource);
    }
    send(res);
  }
}

/**
 * dns2's send, for a handler that does not wait for it: a reply that cannot be sent is dropped and
 * logged, as a real server drops it. dns2's UDP send rejects when the client is gone (its pod and
 * route deleted: EHOSTUNREACH); unhandled, that rejection ended the sandbox daemon, and with it the
 * whole test cluster.
 */
export function replyOrDrop(send: (r: dns2.Packet) => unknown, log: Pick<Logger, 'debug'>): (r: dns2.Packet) => void {
  return (r) => {
    Promise.resolve()
      .then(() => send(r))
      .catch((err: unknown) => log.debug({ err: String(err) }, 'DNS reply not sent (client gone)'));
  };
}

import { createConnection, createServer, type Server } from 'node:net';
import type { Logger } from '@kube-node-ready/core';
import type { SandboxLayout } from './layout.js';
import type { ServiceCatalog } from './catalog.js';
import type { k8s } from './kube.js';

/**
 * The sandbox's kube-proxy: for every Service with a ClusterIP it listens on ClusterIP:port (TCP)
 * and forwards each connection to a ready endpoint from the Service's EndpointSlices, round robin.
 * ClusterIPs are local addresses inside the sandbox's network namespace. The cluster DNS Service
 * is served by the DNS server itself (UDP and TCP), so it is skipped here.
 */
export class ServiceProxy {
  private listeners = new Map<string, { server: Server; svc: string; port: k8s.V1ServicePort }>();
  private rr = 0;

  constructor(
    private readonly layout: SandboxLayout,
    private readonly catalog: ServiceCatalog,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.catalog.onChange(() => this.sync());
    this.sync();
  }

  stop(): void {
    for (const l of this.listeners.values()) l.server.close();
    this.listeners.clear();
  }

  private sync(): void {
    const want = new Map<string, { svc: k8s.V1Service; port: k8s.V1ServicePort; ip: string }>();
    for (const svc of this.catalog.services.values()) {
      const ip = svc.spec?.clusterIP;
      if (!ip || ip === 'None' || ip === this.layout.clusterDnsIp) continue;
      for (const port of svc.spec?.ports ?? []) {
        if ((port.protocol ?? 'TCP') !== 'TCP') continue;
        want.set(`${ip}:${port.port}`, { svc, port, ip });
      }
    }
    for (const [addr, l] of this.listeners) {
      if (!want.has(addr)) {
        l.server.close();
        this.listeners.delete(addr);
      }
    }
    for (const [addr, { svc, port, ip }] of want) {
      const svcKey = `${svc.metadata?.namespace}/${svc.metadata?.name}`;
      const existing = this.listeners.get(addr);
      if (existing) {
        existing.port = port;
        existing.svc = svcKey;
        continue;
      }
      const entry = { server: createServer(), svc: svcKey, port };
      entry.server.on('connection', (client) => {
        const target = this.pickEndpoint(entry.svc, entry.port);
        if (!target) {
          client.destroy();
          return;
        }
        const upstream = createConnection({ host: target.ip, port: target.port });
        client.pipe(upstream).pipe(client);
        const close = () => {
          client.destroy();
          upstream.destroy();
        };
        client.on('error', close);
        upstream.on('error', close);
        client.on('close', close);
        upstream.on('close', close);
      });
      entry.server.on('error', (err) => this.log.warn({ addr, err: err.message }, 'service proxy listener failed'));
      entry.server.listen(port.port, ip);
      this.listeners.set(addr, entry);
    }
  }

  private pickEndpoint(svcKey: string, port: k8s.V1ServicePort): { ip: string; port: number } | undefined {
    const [ns, name] = svcKey.split('/');
    const candidates: Array<{ ip: string; port: number }> = [];
    for (const s of this.catalog.slicesOf(ns, name)) {
      const sp = (s.ports ?? []).find((p) => (p.name ?? '') === (port.name ?? '')) ?? s.ports?.[0];
      const targetPort = sp?.port ?? (typeof port.targetPort === 'number' ? port.targetPort : port.port);
      for (const ep of s.endpoints ?? []) {
        if (ep.conditions?.ready === false) continue;
        for (const ip of ep.addresses) candidates.push({ ip, port: targetPort });
      }
    }
    if (!candidates.length) return undefined;
    return candidates[this.rr++ % candidates.length];
  }
}

import type { Logger } from '@kube-node-ready/core';
import type { SandboxLayout } from './layout.js';
import { readyAddresses, type ServiceCatalog } from './catalog.js';
import type { k8s } from './kube.js';
import { inNetns } from './netns.js';
import { run } from './proc.js';
import { NFT } from './runtime/pod-network.js';

/** The nftables table the proxy owns in the sandbox's network namespace. */
export const NFT_TABLE = 'knr-services';
/** Packet mark of hairpin connections (a pod reaching itself through a Service), masqueraded. */
const MASQUERADE_MARK = '0x4000';

export interface ServiceEndpoint {
  ip: string;
  port: number;
}

/** One ClusterIP:port (TCP) and the ready endpoints it is sent to. */
export interface ServiceRule {
  /** namespace/name:port-name, for the rule's comment. */
  id: string;
  clusterIp: string;
  port: number;
  endpoints: ServiceEndpoint[];
}

/**
 * The sandbox's kube-proxy, as kube-proxy's nftables mode does it: for every Service with a
 * ClusterIP, each TCP port is DNATed in the kernel to one of the Service's ready endpoints, chosen
 * at random per connection (numgen random vmap), in the sandbox's network namespace (prerouting for
 * the pods' traffic, output for the namespace's own). A port without a ready endpoint has no rule:
 * the ClusterIP is a local address there, so a connection is refused, as kube-proxy rejects it.
 * A pod reaching itself through a Service is masqueraded (hairpin). The cluster DNS Service is
 * served by the DNS server itself (UDP and TCP), so it is skipped here.
 *
 * The whole table is replaced in one `nft -f` transaction on every catalog change (coalesced), run
 * with nsenter into the sandbox's namespace: nothing is ever written to the host's ruleset. No
 * process is in the data path: Service traffic never waits on the daemon's event loop.
 */
export class ServiceProxy {
  private applying = false;
  private dirty = false;
  private lastApplied = '';
  private stopped = false;

  constructor(
    private readonly layout: SandboxLayout,
    private readonly catalog: ServiceCatalog,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.catalog.onChange(() => void this.sync());
    void this.sync();
  }

  /** Stops following the catalog. The table stays until the sandbox's namespace is deleted (a restarted daemon replaces it). */
  stop(): void {
    this.stopped = true;
  }

  /** Rewrites the table from the catalog; one `nft` at a time, the latest state always applied last. */
  private async sync(): Promise<void> {
    if (this.applying) {
      this.dirty = true;
      return;
    }
    this.applying = true;
    try {
      do {
        this.dirty = false;
        if (this.stopped) return;
        const text = renderRuleset(serviceRules(this.catalog, this.layout.clusterDnsIp));
        if (text === this.lastApplied) continue;
        const [cmd, ...args] = inNetns(this.layout, [NFT, '-f', '-']);
        const r = await run(cmd!, args, { input: text });
        if (r.code === 0) this.lastApplied = text;
        else this.log.warn({ err: r.stderr.trim() }, 'service proxy: nft refused the ruleset (Service traffic keeps the previous rules)');
      } while (this.dirty);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'service proxy: cannot run nft (is the nftables package installed?)');
    } finally {
      this.applying = false;
    }
  }
}

/** Every TCP port of every Service with a ClusterIP (but the cluster DNS), with its ready endpoints. */
export function serviceRules(catalog: Pick<ServiceCatalog, 'services' | 'slicesOf'>, clusterDnsIp: string): ServiceRule[] {
  const rules: ServiceRule[] = [];
  for (const svc of catalog.services.values()) {
    const ip = svc.spec?.clusterIP;
    if (!ip || ip === 'None' || ip === clusterDnsIp) continue;
    const slices = catalog.slicesOf(svc.metadata?.namespace, svc.metadata?.name);
    for (const port of svc.spec?.ports ?? []) {
      if ((port.protocol ?? 'TCP') !== 'TCP') continue;
      rules.push({ id: `${svc.metadata?.namespace}/${svc.metadata?.name}:${port.name ?? port.port}`, clusterIp: ip, port: port.port, endpoints: endpointsOf(slices, port) });
    }
  }
  return rules.sort((a, b) => a.id.localeCompare(b.id));
}

function endpointsOf(slices: k8s.V1EndpointSlice[], port: k8s.V1ServicePort): ServiceEndpoint[] {
  return slices.flatMap((s) => {
    const sp = (s.ports ?? []).find((p) => (p.name ?? '') === (port.name ?? '')) ?? s.ports?.[0];
    const targetPort = sp?.port ?? (typeof port.targetPort === 'number' ? port.targetPort : port.port);
    return readyAddresses(s).map((ip) => ({ ip, port: targetPort }));
  });
}

/** The table as one `nft -f` document: created if missing, emptied, then filled (atomically). */
export function renderRuleset(rules: readonly ServiceRule[]): string {
  const lines = [
    `table ip ${NFT_TABLE}`,
    `delete table ip ${NFT_TABLE}`,
    `table ip ${NFT_TABLE} {`,
    '  chain prerouting {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    '    jump services',
    '  }',
    '  chain output {',
    '    type nat hook output priority -100; policy accept;',
    '    jump services',
    '  }',
    '  chain postrouting {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    `    meta mark & ${MASQUERADE_MARK} == ${MASQUERADE_MARK} masquerade`,
    '  }',
  ];
  const services: string[] = [];
  rules.forEach((rule, i) => {
    if (rule.endpoints.length === 0) return;
    const svc = `svc-${i}`;
    const targets = rule.endpoints.map((ep, j) => {
      const chain = `${svc}-ep-${j}`;
      lines.push(
        `  chain ${chain} {`,
        `    ip saddr ${ep.ip} meta mark set meta mark | ${MASQUERADE_MARK}`,
        `    meta l4proto tcp dnat to ${ep.ip}:${ep.port}`,
        '  }',
      );
      return `${j} : goto ${chain}`;
    });
    lines.push(`  chain ${svc} {`, `    numgen random mod ${targets.length} vmap { ${targets.join(', ')} }`, '  }');
    services.push(`    ip daddr ${rule.clusterIp} tcp dport ${rule.port} goto ${svc} comment ${JSON.stringify(rule.id)}`);
  });
  lines.push('  chain services {', ...services, '  }', '}');
  return lines.join('\n') + '\n';
}

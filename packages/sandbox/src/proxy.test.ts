import { describe, expect, it } from 'vitest';
import type { k8s } from './kube.js';
import { renderRuleset, serviceRules } from './proxy.js';

const DNS_IP = '10.96.0.10';

function catalog(services: k8s.V1Service[], slices: k8s.V1EndpointSlice[]) {
  return {
    services: new Map(services.map((s) => [`${s.metadata?.namespace}/${s.metadata?.name}`, s])),
    slicesOf: (ns: string | undefined, name: string | undefined) => slices.filter((s) => s.metadata?.namespace === ns && s.metadata?.labels?.['kubernetes.io/service-name'] === name),
  };
}
const svc = (name: string, clusterIP: string, ports: k8s.V1ServicePort[]): k8s.V1Service => ({ metadata: { namespace: 'ns', name }, spec: { clusterIP, ports } });
const slice = (service: string, endpoints: Array<[string, boolean]>, port = 8080, portName = 'http'): k8s.V1EndpointSlice => ({
  addressType: 'IPv4',
  metadata: { namespace: 'ns', name: `${service}-1`, labels: { 'kubernetes.io/service-name': service } },
  endpoints: endpoints.map(([ip, ready]) => ({ addresses: [ip], conditions: { ready } })),
  ports: [{ name: portName, port, protocol: 'TCP' }],
});

describe('the sandbox service proxy (nftables, as kube-proxy)', () => {
  it('one rule per TCP port of a ClusterIP Service, with its ready endpoints and their target port; headless, UDP and the cluster DNS are left out', () => {
    const rules = serviceRules(
      catalog(
        [
          svc('web', '10.96.1.1', [{ name: 'http', port: 80, protocol: 'TCP' }, { name: 'dns', port: 53, protocol: 'UDP' }]),
          svc('headless', 'None', [{ name: 'http', port: 80 }]),
          svc('kube-dns', DNS_IP, [{ name: 'dns-tcp', port: 53, protocol: 'TCP' }]),
          svc('empty', '10.96.1.2', [{ port: 443 }]),
        ],
        [slice('web', [['10.244.0.5', true], ['10.244.0.6', false], ['10.244.0.7', true]])],
      ),
      DNS_IP,
    );
    expect(rules).toEqual([
      { id: 'ns/empty:443', clusterIp: '10.96.1.2', port: 443, endpoints: [] },
      { id: 'ns/web:http', clusterIp: '10.96.1.1', port: 80, endpoints: [{ ip: '10.244.0.5', port: 8080 }, { ip: '10.244.0.7', port: 8080 }] },
    ]);
  });

  it('renders DNAT to a random ready endpoint, hairpin masquerade, and no rule (refused) without endpoints', () => {
    const text = renderRuleset([
      { id: 'ns/empty:443', clusterIp: '10.96.1.2', port: 443, endpoints: [] },
      { id: 'ns/web:http', clusterIp: '10.96.1.1', port: 80, endpoints: [{ ip: '10.244.0.5', port: 8080 }, { ip: '10.244.0.7', port: 8080 }] },
    ]);
    // Replaced as a whole: created if missing, deleted, defined again, in one transaction.
    expect(text.split('\n').slice(0, 3)).toEqual(['table ip knr-services', 'delete table ip knr-services', 'table ip knr-services {']);
    expect(text).toContain('type nat hook prerouting priority dstnat; policy accept;');
    expect(text).toContain('type nat hook output priority -100; policy accept;');
    expect(text).toContain('numgen random mod 2 vmap { 0 : goto svc-1-ep-0, 1 : goto svc-1-ep-1 }');
    expect(text).toContain('meta l4proto tcp dnat to 10.244.0.7:8080');
    expect(text).toContain('ip saddr 10.244.0.5 meta mark set meta mark | 0x4000');
    expect(text).toContain('ip daddr 10.96.1.1 tcp dport 80 goto svc-1 comment "ns/web:http"');
    expect(text).not.toContain('10.96.1.2');
  });
});

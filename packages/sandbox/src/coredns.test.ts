import { describe, expect, it } from 'vitest';
import { CLUSTER_DNS, COREDNS_APP, corefile, coreDnsObjects, SYSTEM_NODE_LABEL, SYSTEM_NODE_TAINT } from './coredns.js';
import { sandboxLayout } from './layout.js';
import type { k8s } from './kube.js';

const layout = sandboxLayout('/tmp/knr-coredns-test', 3);

describe('the real nodes\' CoreDNS', () => {
  it('the Corefile serves the cluster domain and the reverse zones from the API and forwards nothing', () => {
    const text = corefile('cluster.local');
    expect(text).toContain('kubernetes cluster.local in-addr.arpa ip6.arpa {');
    expect(text).toContain('fallthrough in-addr.arpa ip6.arpa');
    for (const plugin of ['errors', 'health', 'ready', 'cache 30', 'loop', 'reload', 'loadbalance']) expect(text).toMatch(new RegExp(`^\\s+${plugin}\\b`, 'm'));
    expect(text).not.toMatch(/forward|\/etc\/resolv\.conf/);
    expect(text).not.toContain('hosts');
  });

  it('hosts entries go before the kubernetes plugin and fall through to it', () => {
    const text = corefile('cluster.local', ['10.0.0.7 upstream.example']);
    expect(text.indexOf('hosts {')).toBeGreaterThan(-1);
    expect(text.indexOf('hosts {')).toBeLessThan(text.indexOf('kubernetes cluster.local'));
    expect(text).toMatch(/hosts \{\n\s+10\.0\.0\.7 upstream\.example\n\s+fallthrough\n\s+\}/);
  });

  it('its Service has a fixed ClusterIP of its own inside the service CIDR', () => {
    const service = coreDnsObjects({ image: 'x', clusterDomain: 'cluster.local' }).find((o) => o.kind === 'Service') as k8s.V1Service;
    expect(service.spec?.clusterIP).toBe(CLUSTER_DNS.ip);
    const [net, bits] = layout.serviceCidr.split('/') as [string, string];
    const toInt = (ip: string) => ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
    const mask = 2 ** 32 - 2 ** (32 - Number(bits));
    expect((toInt(CLUSTER_DNS.ip) & mask) >>> 0).toBe(toInt(net));
    expect([layout.kubernetesServiceIp, layout.clusterDnsIp]).not.toContain(CLUSTER_DNS.ip);
    expect(service.spec?.selector).toEqual({ 'k8s-app': COREDNS_APP });
  });

  it('its Deployment runs on the system node with kubeadm\'s probes and security context', () => {
    const deployment = coreDnsObjects({ image: 'reg/coredns:v1', clusterDomain: 'cluster.local' }).find((o) => o.kind === 'Deployment') as k8s.V1Deployment;
    const pod = deployment.spec!.template.spec!;
    expect(pod.nodeSelector?.[SYSTEM_NODE_LABEL]).toBe('true');
    expect(pod.tolerations).toContainEqual({ key: SYSTEM_NODE_TAINT.key, operator: 'Exists' });
    const c = pod.containers[0]!;
    expect(c.image).toBe('reg/coredns:v1');
    expect(c.readinessProbe).toMatchObject({ httpGet: { path: '/ready', port: 'readiness-probe' }, periodSeconds: 10, failureThreshold: 3 });
    expect(c.livenessProbe).toMatchObject({ httpGet: { path: '/health', port: 'liveness-probe' }, initialDelaySeconds: 60, failureThreshold: 5 });
    expect(c.ports).toContainEqual({ containerPort: 8181, name: 'readiness-probe', protocol: 'TCP' });
    expect(c.ports).toContainEqual({ containerPort: 8080, name: 'liveness-probe', protocol: 'TCP' });
    expect(c.securityContext).toEqual({ allowPrivilegeEscalation: false, capabilities: { add: ['NET_BIND_SERVICE'], drop: ['ALL'] }, readOnlyRootFilesystem: true });
  });
});

import { describe, expect, it } from 'vitest';
import { sandboxLayout } from '../layout.js';
import { cidrsExcept, dnsFaultRules, podCidr, podIndex } from './pod-network.js';

describe('cidrsExcept', () => {
  it('keeps all of 10.0.0.0/8 but the pod CIDR, in six prefixes', () => {
    expect(cidrsExcept('10.0.0.0/8', '10.244.0.0/14')).toEqual(['10.0.0.0/9', '10.128.0.0/10', '10.192.0.0/11', '10.224.0.0/12', '10.248.0.0/13', '10.240.0.0/14']);
  });

  it('covers the outer range exactly once, without the inner one', () => {
    const parts = cidrsExcept('10.0.0.0/8', '10.244.0.0/14');
    const size = (c: string) => 2 ** (32 - Number(c.split('/')[1]));
    expect(parts.reduce((n, c) => n + size(c), 0)).toBe(size('10.0.0.0/8') - size('10.244.0.0/14'));
    const contains = (c: string, ip: string) => {
      const [base, len] = c.split('/');
      const n = (s: string) => s.split('.').reduce((a, o) => a * 256 + Number(o), 0);
      return Math.floor(n(ip) / 2 ** (32 - Number(len))) === Math.floor(n(base!) / 2 ** (32 - Number(len)));
    };
    for (const ip of ['10.0.0.1', '10.1.0.5', '10.96.0.10', '10.53.1.1', '10.66.66.66', '10.243.255.255', '10.248.0.0', '10.255.255.255']) {
      expect(parts.filter((c) => contains(c, ip)), ip).toHaveLength(1);
    }
    for (const ip of ['10.244.0.2', '10.247.255.255']) expect(parts.filter((c) => contains(c, ip)), ip).toHaveLength(0);
  });

  it('rejects an inner range outside the outer one', () => {
    expect(() => cidrsExcept('10.0.0.0/8', '192.168.0.0/16')).toThrow(/not inside/);
    expect(() => cidrsExcept('10.0.0.0/16', '10.0.0.0/8')).toThrow(/not inside/);
  });
});

describe('podIndex', () => {
  const layout = sandboxLayout('/tmp/knr-test', 7);
  it('numbers pod IPs within the pod CIDR (names of namespace and veth)', () => {
    expect(podCidr(layout)).toBe('10.244.0.0/14');
    expect(podIndex(layout, '10.244.0.2')).toBe(2);
    expect(podIndex(layout, '10.244.1.0')).toBe(256);
    expect(podIndex(layout, '10.247.255.255')).toBe(2 ** 18 - 1);
    expect(`knr${layout.slot}p${podIndex(layout, '10.247.255.255')}`.length).toBeLessThanOrEqual(15);
  });
  it('rejects addresses outside the pod CIDR', () => {
    expect(() => podIndex(layout, '10.248.0.1')).toThrow(/not in the pod CIDR/);
    expect(() => podIndex(layout, '10.0.0.1')).toThrow(/not in the pod CIDR/);
  });
});

describe('dnsFaultRules (a node fault on the path to the cluster DNS, in the pod namespace)', () => {
  it('sends DNS to the cluster DNS address, UDP and TCP, to the fault server with an output DNAT', () => {
    expect(dnsFaultRules({ clusterDnsIp: '10.96.0.10', to: '10.53.0.1' })).toBe(
      'table ip knr-node-fault {\n  chain dns { type nat hook output priority -100; policy accept; ip daddr 10.96.0.10 meta l4proto { tcp, udp } th dport 53 dnat to 10.53.0.1; }\n}\n',
    );
  });
});

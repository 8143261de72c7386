import { describe, expect, it } from 'vitest';
import { COMMAND_USAGE } from './args.js';
import { parseFaultSpec, REAL_NODE_FAULTS } from './real-node-faults.js';

describe('real-node faults on the command line', () => {
  it('FAULT and FAULT=VALUE: a value only where the fault takes one, pod-mtu within 576..1500', () => {
    expect(parseFaultSpec('dns-blocked')).toEqual({ fault: 'dns-blocked' });
    expect(parseFaultSpec('pod-mtu=1400')).toEqual({ fault: 'pod-mtu', value: '1400' });
    expect(() => parseFaultSpec('pod-mtu')).toThrow('pod-mtu needs a value: pod-mtu BYTES');
    expect(() => parseFaultSpec('pod-mtu=9000')).toThrow('expected BYTES between 576 and 1500');
    expect(() => parseFaultSpec('pod-mtu=14o0')).toThrow('expected BYTES between 576 and 1500');
    expect(() => parseFaultSpec('dns-blocked=1')).toThrow('dns-blocked takes no value');
    expect(() => parseFaultSpec('dns-broken')).toThrow(`unknown real-node fault "dns-broken": known are ${REAL_NODE_FAULTS.join(', ')}`);
  });

  it('sandbox fault --help describes every fault', () => {
    const help = COMMAND_USAGE.fault.join('\n');
    for (const fault of REAL_NODE_FAULTS) expect(help).toMatch(new RegExp(`\\s${fault}( BYTES)?: `));
  });
});

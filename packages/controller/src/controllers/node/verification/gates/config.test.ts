import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { gatesSchema, hasGates, parseGatesConfig } from './config.js';

const problems = (input: unknown): string[] => {
  const result = gatesSchema.safeParse(input);
  return result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('gatesSchema', () => {
  it('defaults: mode before, no gate', () => {
    const gates = parseGatesConfig({});
    expect(gates).toEqual({ mode: 'before', requireDaemonSets: [], requireCSIDrivers: [], requireResources: {} });
    expect(hasGates(gates)).toBe(false);
  });

  it('reads each gate; a quantity written as a YAML number becomes a string', () => {
    const gates = parseGatesConfig({
      mode: 'parallel',
      requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }, { namespace: 'kube-system', selector: { matchLabels: { 'example.com/node-critical': 'true' } } }],
      requireCSIDrivers: ['ebs.csi.aws.com'],
      requireResources: { 'nvidia.com/gpu': 1, 'hugepages-2Mi': '512Mi' },
    });
    expect(gates.requireResources).toEqual({ 'nvidia.com/gpu': '1', 'hugepages-2Mi': '512Mi' });
    expect(hasGates(gates)).toBe(true);
  });

  it.each<[string, unknown, RegExp]>([
    ['a DaemonSet with neither name nor selector', { requireDaemonSets: [{ namespace: 'kube-system' }] }, /requireDaemonSets\.0: give either name or selector/],
    ['a DaemonSet with both', { requireDaemonSets: [{ namespace: 'kube-system', name: 'a', selector: {} }] }, /give either name or selector/],
    ['a namespace that is not a DNS label', { requireDaemonSets: [{ namespace: 'Kube_System', name: 'a' }] }, /requireDaemonSets\.0\.namespace: expected a lowercase DNS label/],
    ['an unknown key', { requireDaemonSets: [{ namespace: 'kube-system', name: 'a', kind: 'DaemonSet' }] }, /Unrecognized key/],
    ['In without values', { requireDaemonSets: [{ namespace: 'a', selector: { matchExpressions: [{ key: 'k', operator: 'In' }] } }] }, /operator In needs at least one value/],
    ['a CSI driver name with a space', { requireCSIDrivers: ['ebs csi'] }, /expected a CSI driver name/],
    ['a quantity that is not one', { requireResources: { 'nvidia.com/gpu': 'one' } }, /requireResources\.nvidia\.com\/gpu: expected a Kubernetes quantity/],
    ['a negative quantity', { requireResources: { 'nvidia.com/gpu': -1 } }, /expected a Kubernetes quantity/],
    ['a resource name that is not a qualified name', { requireResources: { 'nvidia.com/gpu/x': '1' } }, /expected a resource name/],
    ['an unknown mode', { mode: 'after' }, /mode: /],
  ])('refuses %s', (_name, input, message) => {
    expect(problems(input).join('\n')).toMatch(message);
  });

  it('describes every field (the generated docs read the descriptions)', () => {
    const schema = z.toJSONSchema(gatesSchema, { io: 'input', unrepresentable: 'any' }) as { properties: Record<string, { description?: string }> };
    for (const [key, field] of Object.entries(schema.properties)) expect(field.description, key).toBeTruthy();
  });
});

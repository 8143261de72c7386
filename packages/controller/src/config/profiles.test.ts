import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { WorkerConfigMap } from '../controllers/node/verification/worker-config.js';
import { parseConfig } from './load.js';
import { Profiles, selectorMatcher } from './profiles.js';

const node = (labels: Record<string, string>): V1Node => ({ metadata: { name: 'n', labels } });

describe('selectorMatcher (metav1.LabelSelector semantics)', () => {
  const cases: Array<[string, Parameters<typeof selectorMatcher>[0], Record<string, string>, boolean]> = [
    ['empty selects every node', {}, {}, true],
    ['matchLabels: equal value', { matchLabels: { pool: 'gpu' } }, { pool: 'gpu' }, true],
    ['matchLabels: other value', { matchLabels: { pool: 'gpu' } }, { pool: 'cpu' }, false],
    ['matchLabels: label absent', { matchLabels: { pool: 'gpu' } }, {}, false],
    ['In: one of the values', { matchExpressions: [{ key: 'pool', operator: 'In', values: ['a', 'b'] }] }, { pool: 'b' }, true],
    ['In: label absent', { matchExpressions: [{ key: 'pool', operator: 'In', values: ['a'] }] }, {}, false],
    ['NotIn: label absent selects', { matchExpressions: [{ key: 'pool', operator: 'NotIn', values: ['a'] }] }, {}, true],
    ['NotIn: listed value', { matchExpressions: [{ key: 'pool', operator: 'NotIn', values: ['a'] }] }, { pool: 'a' }, false],
    ['Exists', { matchExpressions: [{ key: 'gpu', operator: 'Exists' }] }, { gpu: '' }, true],
    ['DoesNotExist', { matchExpressions: [{ key: 'gpu', operator: 'DoesNotExist' }] }, { gpu: '' }, false],
    ['every requirement must hold', { matchLabels: { pool: 'gpu' }, matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }, { pool: 'gpu', zone: 'b' }, false],
  ];
  it.each(cases)('%s', (_name, selector, labels, expected) => {
    expect(selectorMatcher(selector)(labels)).toBe(expected);
  });
});

describe('Profiles', () => {
  const config = parseConfig({
    worker: { timeout: '60s', checks: { enabled: ['dns', 'api', 'tcp'], dns: { names: ['kubernetes.default.svc.cluster.local'], slowAfter: '1s' } } },
    reconciliation: { maxRetries: 5 },
    profiles: [
      {
        name: 'gpu',
        nodeSelector: { matchLabels: { 'karpenter.sh/nodepool': 'gpu' } },
        worker: { timeout: '2m', checks: { enabled: ['dns'], dns: { slowAfter: '3s' } }, resources: { limits: { memory: '256Mi' } } },
        reconciliation: { maxRetries: 1 },
        nodeManagement: { deleteFailedNodes: true },
      },
      { name: 'anything-gpu', nodeSelector: { matchExpressions: [{ key: 'karpenter.sh/nodepool', operator: 'Exists' }] } },
    ],
  });
  const profiles = new Profiles(config);

  it('the first profile that selects the node applies; a node none selects gets the top-level settings, "default"', () => {
    expect(profiles.of(node({ 'karpenter.sh/nodepool': 'gpu' })).name).toBe('gpu');
    expect(profiles.of(node({ 'karpenter.sh/nodepool': 'general' })).name).toBe('anything-gpu');
    expect(profiles.of(node({})).name).toBe('default');
    expect(profiles.of(node({})).config).toBe(config);
    expect(profiles.names()).toEqual(['gpu', 'anything-gpu', 'default']);
  });

  it("a profile's settings replace the ones it names; mappings merge key by key, lists replace, the rest is inherited", () => {
    const gpu = profiles.of(node({ 'karpenter.sh/nodepool': 'gpu' })).config;
    expect(gpu.worker.timeout).toBe(120_000);
    expect(gpu.worker.checks).toEqual({ enabled: ['dns'], dns: { names: ['kubernetes.default.svc.cluster.local'], slowAfter: '3s' } });
    expect(gpu.worker.resources).toEqual({ requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } });
    expect(gpu.reconciliation.maxRetries).toBe(1);
    expect(gpu.reconciliation.initialBackoff).toBe(config.reconciliation.initialBackoff);
    expect(gpu.nodeManagement.deleteFailedNodes).toBe(true);
    expect(gpu.nodeManagement.taints).toEqual(config.nodeManagement.taints);
    // The top-level configuration is not touched by the merge.
    expect(config.worker.timeout).toBe(60_000);
    expect(config.nodeManagement.deleteFailedNodes).toBe(false);
    // A profile that sets nothing runs with exactly the top-level settings.
    expect(profiles.of(node({ 'karpenter.sh/nodepool': 'x' })).config).toEqual(config);
    // Its configuration still tells a node's profile (the store's NodeVerification, the agent).
    expect(new Profiles(gpu).of(node({ 'karpenter.sh/nodepool': 'gpu' })).name).toBe('gpu');
  });

  it('the worker ConfigMap has each profile\'s checks under a key of its own', () => {
    const map = new WorkerConfigMap(profiles);
    expect(Object.keys(map.data())).toEqual(['worker.gpu.yaml', 'worker.anything-gpu.yaml', 'worker.yaml']);
    expect(parseYaml(map.data()['worker.gpu.yaml'] ?? '')).toEqual({ enabled: ['dns'], dns: { names: ['kubernetes.default.svc.cluster.local'], slowAfter: '3s' } });
    expect(map.of('gpu').hash).not.toBe(map.of('default').hash);
    expect(map.of('anything-gpu').hash).toBe(map.of('default').hash); // same checks, same content
    expect(map.of('gone').key).toBe('worker.yaml');
  });
});

describe('profiles: what the configuration refuses', () => {
  const problems = (profiles: unknown[]): string => {
    try {
      parseConfig({ profiles });
      return '';
    } catch (err) {
      return String(err);
    }
  };

  it('a setting that is the installation\'s, not a pool\'s, names the keys a profile may set', () => {
    expect(problems([{ name: 'a', nodeSelector: {}, nodeManagement: { taints: [] } }])).toContain('profiles[0].nodeManagement.taints: unknown key; allowed keys here: bringUpTimeout, startupTimeout, onStartupTimeout, deleteFailedNodes');
    expect(problems([{ name: 'a', nodeSelector: {}, leaderElection: {} }])).toContain('profiles[0].leaderElection: unknown key');
  });

  it('bad values say where they are', () => {
    expect(problems([{ name: 'a', nodeSelector: {}, worker: { timeout: 'soon' } }])).toContain('profiles[0].worker.timeout: expected a duration');
    expect(problems([{ name: 'a', nodeSelector: { matchExpressions: [{ key: 'k', operator: 'In' }] } }])).toContain('profiles[0].nodeSelector.matchExpressions[0].values: operator In needs at least one value');
    expect(problems([{ name: 'a', nodeSelector: { matchExpressions: [{ key: 'k', operator: 'Exists', values: ['x'] }] } }])).toContain('operator Exists takes no values');
    expect(problems([{ name: 'a' }])).toContain('profiles[0].nodeSelector: required');
    expect(problems([{ name: 'Bad_Name', nodeSelector: {} }])).toContain('profiles[0].name');
  });

  it('names are unique and not "default"; at most 20 profiles (the metrics\' profile label stays bounded)', () => {
    expect(problems([{ name: 'default', nodeSelector: {} }])).toContain('"default" names the top-level settings');
    expect(problems([{ name: 'a', nodeSelector: {} }, { name: 'a', nodeSelector: {} }])).toContain('profiles[1].name: profile "a" is defined twice');
    expect(problems(Array.from({ length: 21 }, (_, i) => ({ name: `p${i}`, nodeSelector: {} })))).toContain('profiles');
    expect(problems(Array.from({ length: 20 }, (_, i) => ({ name: `p${i}`, nodeSelector: {} })))).toBe('');
  });

  it('onStartupTimeout "replace" needs remediation on for the same nodes, a profile inheriting either setting included', () => {
    expect(problems([])).toBe('');
    const top = (() => {
      try {
        parseConfig({ nodeManagement: { startupTimeout: '30m', onStartupTimeout: 'replace' } });
        return '';
      } catch (err) {
        return String(err);
      }
    })();
    expect(top).toContain('nodeManagement.onStartupTimeout: "replace" deletes nodes through remediation, which is off for these nodes; set nodeManagement.deleteFailedNodes: true');
    expect(problems([{ name: 'gpu', nodeSelector: {}, nodeManagement: { startupTimeout: '30m', onStartupTimeout: 'replace' } }])).toContain('profiles[0] (gpu): nodeManagement.onStartupTimeout');
    expect(problems([{ name: 'gpu', nodeSelector: {}, nodeManagement: { startupTimeout: '30m', onStartupTimeout: 'replace', deleteFailedNodes: true } }])).toBe('');
  });

  it('a failed taint under readiness.k8s.io/ is refused: Karpenter would keep counting the failed node as capacity', () => {
    let message = '';
    try {
      parseConfig({ nodeManagement: { failedTaint: { key: 'readiness.k8s.io/failed' } } });
    } catch (err) {
      message = String(err);
    }
    expect(message).toContain('nodeManagement.failedTaint.key: the failed taint must not be under readiness.k8s.io/');
  });
});

// The files in examples/ are valid for what reads them: the controller's loadConfig, the real
// Karpenter NodePool CRD, the Node Readiness Controller's API, and they name our real defaults.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { configJsonSchema, type JsonSchemaNode } from '../../packages/controller/src/config/json-schema.js';
import { loadConfig, parseConfig } from '../../packages/controller/src/config/load.js';
import { CRD_SOURCES, loadCrd, servedSchema, validateAgainstSchema, type OpenApiSchema } from './crds.js';
import { loadWorkerConfig } from '../../packages/worker/src/config.js';
import { find, REPO_ROOT, template, type KubeObject } from './helm.js';

const example = (name: string) => join(REPO_ROOT, 'examples', name);
const readYaml = <T>(name: string) => parseYaml(readFileSync(example(name), 'utf8')) as T;
const DEFAULTS = parseConfig({});
const OUR_TAINT = DEFAULTS.nodeManagement.taints[0] as { key: string; value: string; effect: string };

interface Taint {
  key: string;
  value?: string;
  effect: string;
}

describe('examples/controller-config.yaml', () => {
  it('is accepted by the controller (loadConfig)', () => {
    const config = loadConfig(example('controller-config.yaml'));
    expect(config.nodeManagement.taints).toEqual(DEFAULTS.nodeManagement.taints);
    expect(config.worker.tolerations).toHaveLength(1);
  });

  it('sets every key of the controller schema', () => {
    const document = readYaml<Record<string, unknown>>('controller-config.yaml');
    const missing: string[] = [];
    const walk = (node: JsonSchemaNode, value: unknown, path: string) => {
      for (const [key, child] of Object.entries(node.properties ?? {})) {
        const here = `${path}${key}`;
        if (typeof value !== 'object' || value === null || !(key in value)) {
          missing.push(here);
          continue;
        }
        if (child.type === 'object' && child.properties && Object.keys(child.properties).length > 0) walk(child, (value as Record<string, unknown>)[key], `${here}.`);
      }
    };
    walk(configJsonSchema(), document, '');
    expect(missing).toEqual([]);
  });

  it('its worker.checks are accepted by the worker', async () => {
    const mod = (await import('../../packages/worker/src/config.js').catch(() => ({}))) as { workerConfigSchema?: { safeParse: (v: unknown) => { success: boolean; error?: unknown } } };
    expect(mod.workerConfigSchema, 'packages/worker/src/config.ts exports workerConfigSchema').toBeDefined();
    const result = mod.workerConfigSchema?.safeParse(readYaml<{ worker: { checks: unknown } }>('controller-config.yaml').worker.checks);
    expect(result?.success, JSON.stringify(result?.error)).toBe(true);
  });
});

describe('examples/karpenter-nodepool.yaml', () => {
  const nodePool = readYaml<{ apiVersion: string; kind: string; spec: { template: { spec: { startupTaints?: Taint[]; taints?: Taint[] } } } }>('karpenter-nodepool.yaml');

  it('is a karpenter.sh/v1 NodePool with our taint under startupTaints, never taints', () => {
    expect(nodePool.apiVersion).toBe('karpenter.sh/v1');
    expect(nodePool.kind).toBe('NodePool');
    expect(nodePool.spec.template.spec.startupTaints).toContainEqual(OUR_TAINT);
    expect((nodePool.spec.template.spec.taints ?? []).map((t) => t.key)).not.toContain(OUR_TAINT.key);
  });

  // The CRD comes from the Go module cache; a first `go mod download` on a busy machine takes longer than 5 s.
  it('is valid against the NodePool CRD of sigs.k8s.io/karpenter', { timeout: 120_000 }, async (ctx) => {
    const loaded = await loadCrd(CRD_SOURCES.nodePool);
    if ('skip' in loaded) return ctx.skip(loaded.skip);
    expect(validateAgainstSchema(nodePool, servedSchema(loaded.crd, 'v1'))).toEqual([]);
    // The validator does find mistakes: the reference README's v1beta1-era field layout fails.
    const wrong = structuredClone(nodePool) as unknown as { spec: { template: { spec: Record<string, unknown> } } };
    wrong.spec.template.spec.startupTaint = wrong.spec.template.spec.startupTaints;
    expect(validateAgainstSchema(wrong, servedSchema(loaded.crd, 'v1'))).toContain('spec.template.spec.startupTaint: unknown field');
  });
});

describe('examples/karpenter-nodepool-readiness-taint.yaml and examples/values-readiness-taint.yaml', () => {
  const docs = parseAllDocuments(readFileSync(example('karpenter-nodepool-readiness-taint.yaml'), 'utf8')).map((d) => d.toJS() as { apiVersion: string; kind: string; spec: Record<string, unknown> });
  const nodePool = docs.find((d) => d.kind === 'NodePool') as unknown as { apiVersion: string; spec: { template: { spec: { startupTaints?: Taint[]; taints?: Taint[] } } } };
  const policy = JSON.stringify(docs.find((d) => d.kind === 'MutatingAdmissionPolicy'));
  const values = readYaml<{ config: { nodeManagement: { taints: Taint[] } } }>('values-readiness-taint.yaml');
  const taint = values.config.nodeManagement.taints[0] as Taint;

  it('the values name one readiness.k8s.io/ taint, accepted by the controller, and leave the failed taint outside that prefix', () => {
    const config = parseConfig(values.config);
    expect(config.nodeManagement.taints).toEqual([taint]);
    expect(taint.key.startsWith('readiness.k8s.io/')).toBe(true);
    expect(config.nodeManagement.failedTaint.key.startsWith('readiness.k8s.io/')).toBe(false);
  });

  it('the NodePool lists the taint nowhere; the policy and its binding put exactly that taint on at Node creation', () => {
    expect(docs.map((d) => `${d.apiVersion} ${d.kind}`)).toEqual([
      'karpenter.sh/v1 NodePool',
      'admissionregistration.k8s.io/v1 MutatingAdmissionPolicy',
      'admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding',
    ]);
    const spec = nodePool.spec.template.spec;
    expect([...(spec.startupTaints ?? []), ...(spec.taints ?? [])].map((t) => t.key)).not.toContain(taint.key);
    expect(policy).toContain(`key: '${taint.key}', value: '${taint.value}', effect: '${taint.effect}'`);
    expect(policy).toContain('"operations":["CREATE"]');
  });

  it('the NodePool is valid against the NodePool CRD of sigs.k8s.io/karpenter', { timeout: 120_000 }, async (ctx) => {
    const loaded = await loadCrd(CRD_SOURCES.nodePool);
    if ('skip' in loaded) return ctx.skip(loaded.skip);
    expect(validateAgainstSchema(nodePool, servedSchema(loaded.crd, 'v1'))).toEqual([]);
  });

  it('renders a release whose verification taint is the readiness.k8s.io/ one', async () => {
    const objects = await template(values as unknown as Record<string, unknown>);
    const config = (find(objects, 'ConfigMap', 'kube-node-ready-config') as KubeObject & { data: Record<string, string> }).data['config.yaml'] ?? '';
    const dir = mkdtempSync(join(tmpdir(), 'knr-example-'));
    try {
      writeFileSync(join(dir, 'config.yaml'), config);
      expect(loadConfig(join(dir, 'config.yaml')).nodeManagement.taints).toEqual([taint]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('examples/node-readiness-rule.yaml', () => {
  const rule = readYaml<{ apiVersion: string; kind: string; spec: { conditions: Array<{ type: string; requiredStatus: string }>; taint: Taint; enforcementMode: string } }>('node-readiness-rule.yaml');

  // The NodeReadinessRule API (readiness.node.x-k8s.io/v1alpha1, kubernetes-sigs/node-readiness-controller
  // api/v1alpha1/nodereadinessrule_types.go), as far as this example uses it. Its module is not on
  // the Go proxy, so the CRD cannot be fetched; this mirrors the Go types' validation markers.
  const NODE_READINESS_RULE: OpenApiSchema = {
    type: 'object',
    required: ['spec'],
    properties: {
      spec: {
        type: 'object',
        required: ['conditions', 'taint', 'nodeSelector'],
        properties: {
          conditions: {
            type: 'array',
            minItems: 1,
            maxItems: 32,
            items: {
              type: 'object',
              required: ['type', 'requiredStatus'],
              properties: { type: { type: 'string', minLength: 1, maxLength: 316 }, requiredStatus: { type: 'string', enum: ['True', 'False', 'Unknown'] } },
            },
          },
          enforcementMode: { type: 'string', enum: ['bootstrap-only', 'continuous'] },
          taint: {
            type: 'object',
            required: ['key', 'effect'],
            properties: { key: { type: 'string' }, value: { type: 'string' }, effect: { type: 'string', enum: ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] } },
          },
          nodeSelector: { type: 'object', properties: { matchLabels: { type: 'object', additionalProperties: { type: 'string' } }, matchExpressions: { type: 'array', items: { type: 'object' } } } },
          dryRun: { type: 'boolean' },
        },
      },
    },
  };

  it('consumes the condition type the controller writes, requiring True', () => {
    expect(rule.apiVersion).toBe('readiness.node.x-k8s.io/v1alpha1');
    expect(rule.kind).toBe('NodeReadinessRule');
    expect(DEFAULTS.nodeManagement.condition.enabled).toBe(true);
    expect(rule.spec.conditions).toContainEqual({ type: DEFAULTS.nodeManagement.condition.type, requiredStatus: 'True' });
  });

  it('manages its own taint, not ours (each controller removes only its own taint)', () => {
    expect(rule.spec.taint.key).not.toBe(OUR_TAINT.key);
    expect(rule.spec.enforcementMode).toBe('bootstrap-only');
    expect(validateAgainstSchema(rule, NODE_READINESS_RULE)).toEqual([]);
  });

  it('the toleration it tells users to add is accepted by the controller', () => {
    const text = readFileSync(example('node-readiness-rule.yaml'), 'utf8');
    const json = /config\.worker\.tolerations=(\[.*\])'/.exec(text)?.[1];
    expect(json).toBeDefined();
    const config = parseConfig({ worker: { tolerations: JSON.parse(json as string) } });
    expect(config.worker.tolerations).toEqual([{ key: rule.spec.taint.key, operator: 'Exists', effect: rule.spec.taint.effect }]);
  });
});

describe('examples/cluster-autoscaler.md', () => {
  const text = readFileSync(example('cluster-autoscaler.md'), 'utf8');

  it('shows the kubelet flag with our default taint, the startup-taint prefix and --startup-taint', () => {
    expect(text).toContain(`--register-with-taints=${OUR_TAINT.key}=${OUR_TAINT.value}:${OUR_TAINT.effect}`);
    expect(text).toContain('startup-taint.cluster-autoscaler.kubernetes.io/');
    expect(text).toContain(`--startup-taint=${OUR_TAINT.key}`);
  });

  it('its prefixed taint key is a valid controller taint', () => {
    const key = /--register-with-taints=(startup-taint\.cluster-autoscaler\.kubernetes\.io\/[^=]+)=/.exec(text)?.[1];
    expect(key).toBeDefined();
    expect(parseConfig({ nodeManagement: { taints: [{ key, value: 'true', effect: 'NoSchedule' }] } }).nodeManagement.taints[0]?.key).toBe(key);
  });
});

describe('examples/values-daemonset.yaml', () => {
  it('renders a DaemonSet release whose configuration the agent accepts (controller settings and worker checks)', async () => {
    const objects = await template(readYaml<Record<string, unknown>>('values-daemonset.yaml'));
    expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(['DaemonSet', 'PodMonitor', 'PrometheusRule']));
    expect(objects.map((o) => o.kind)).not.toContain('Deployment');
    const config = (find(objects, 'ConfigMap', 'kube-node-ready-config') as KubeObject & { data: Record<string, string> }).data['config.yaml'] ?? '';
    const dir = mkdtempSync(join(tmpdir(), 'knr-example-'));
    try {
      writeFileSync(join(dir, 'config.yaml'), config);
      expect(loadConfig(join(dir, 'config.yaml')).reconciliation.maxRetries).toBe(3);
      const checks = loadWorkerConfig(['--config', join(dir, 'config.yaml')], {});
      expect(checks.kind === 'run' && checks.config.enabled).toEqual(['dns', 'api', 'tcp', 'service']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('examples/values-gates.yaml', () => {
  it('renders a release whose configuration the controller accepts, with the gates\' permissions in the namespaces they name', async () => {
    const objects = await template(readYaml<Record<string, unknown>>('values-gates.yaml'));
    const roles = objects.filter((o) => o.kind === 'Role' && o.metadata.name === 'kube-node-ready-gates').map((o) => o.metadata.namespace).sort();
    expect(roles).toEqual(['gpu-operator', 'kube-system']);
    const config = (find(objects, 'ConfigMap', 'kube-node-ready-config') as KubeObject & { data: Record<string, string> }).data['config.yaml'] ?? '';
    const dir = mkdtempSync(join(tmpdir(), 'knr-example-'));
    try {
      writeFileSync(join(dir, 'config.yaml'), config);
      const loaded = loadConfig(join(dir, 'config.yaml'));
      expect(loaded.gates.requireCSIDrivers).toEqual(['ebs.csi.aws.com']);
      expect(loaded.profiles[0]?.gates).toMatchObject({ mode: 'parallel', requireResources: { 'nvidia.com/gpu': '1' } });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

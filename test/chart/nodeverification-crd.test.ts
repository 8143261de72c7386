// The NodeVerification CRD (deploy/helm/kube-node-ready/crds/): how Helm ships it, that it names
// the resource as the controller addresses it, and that its schema takes exactly what the product
// writes (api/nodeverification.ts). The API server's own validation of those writes, CEL rules
// included: admission.sandbox.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { MAX_MESSAGE, NodeVerificationApi, newNodeVerification, statusOf, VERIFIED_CONDITION } from '../../packages/controller/src/api/nodeverification.js';
import { Outcome, Phase, type VerificationState } from '../../packages/controller/src/controllers/node/verification/types.js';
import { validateAgainstSchema, type OpenApiSchema } from './crds.js';
import { CHART_DIR, find, findAll, helm, parseManifests, template } from './helm.js';

interface Schema extends OpenApiSchema {
  properties?: Record<string, Schema>;
  items?: Schema;
  minimum?: number;
  format?: string;
  'x-kubernetes-validations'?: Array<{ rule: string; message: string }>;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
}
interface CrdFile {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: Record<string, unknown>;
    versions: Array<{
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: Record<string, unknown>;
      additionalPrinterColumns: Array<{ name: string; type: string; jsonPath: string; priority?: number }>;
      schema: { openAPIV3Schema: Schema };
    }>;
  };
}

const FILE = join(CHART_DIR, 'crds', 'nodeverifications.kube-node-ready.io.yaml');
const crd = parseYaml(readFileSync(FILE, 'utf8')) as CrdFile;
const version = crd.spec.versions[0]!;
const schema = version.schema.openAPIV3Schema;
const status = schema.properties!.status!;
const at = (s: Schema, path: string): Schema =>
  path.split('.').reduce<Schema>((node, key) => {
    const next = key === '[]' ? node.items : node.properties?.[key];
    if (!next) throw new Error(`no ${path} in the schema (at ${key})`);
    return next;
  }, s);

const node: V1Node = {
  metadata: { name: 'ip-10-0-1-17.eu-west-1.compute.internal', uid: '5d2c1d8e-1111-2222-3333-444455556666', creationTimestamp: new Date('2025-01-01T10:00:00Z') },
};
const T = Date.parse('2025-01-01T10:05:00.250Z');
/** A state with every field the status carries. */
const fullState = (): VerificationState => ({
  uid: node.metadata!.uid!,
  attempt: 3,
  failures: 2,
  phase: Phase.Backoff,
  nextAttemptAt: T + 30_000,
  lastOutcome: Outcome.ChecksFailed,
  lastMessage: 'checks failed: dns (10.96.0.10:53: timeout)',
  lastAttempt: 3,
  lastChecks: [
    { name: 'dns', ok: false, durationMs: 5000.4, error: `timeout ${'x'.repeat(2 * MAX_MESSAGE)}`, target: '10.96.0.10:53' },
    { name: 'api', ok: true, durationMs: 12.6 },
  ],
  lastFinishedAt: T,
  pod: 'kube-node-ready-worker/knr-worker-ip-10-0-1-17-3',
  launchableAt: T - 240_000,
  firstLaunchAt: T - 200_000,
  verifiedAt: T - 100_000,
  failedAt: T - 50_000,
  failing: { since: T - 200_000, at: T, checks: { dns: '10.96.0.10:53' } },
});

describe('the NodeVerification CRD (crds/)', () => {
  it("is in Helm's crds/ directory: `helm show crds` gives it as it is, `helm template` only with --include-crds", async () => {
    expect(findAll(await template(), 'CustomResourceDefinition')).toEqual([]);
    expect(find(await template({}, { extraArgs: ['--include-crds'] }), 'CustomResourceDefinition', crd.metadata.name)).toEqual(crd);
    const shown = await helm(['show', 'crds', CHART_DIR]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(parseManifests(shown.stdout)).toEqual([crd]);
  });

  it('names the resource as the controller addresses it: cluster-scoped, kube-node-ready.io/v1alpha1 nodeverifications (nv), without a status subresource (created with its status: ADR 0006)', () => {
    expect(crd.apiVersion).toBe('apiextensions.k8s.io/v1');
    expect(crd.metadata.name).toBe(`${NodeVerificationApi.plural}.${NodeVerificationApi.group}`);
    expect(crd.spec.group).toBe(NodeVerificationApi.group);
    expect(crd.spec.scope).toBe('Cluster');
    expect(crd.spec.names).toEqual({ kind: NodeVerificationApi.kind, listKind: 'NodeVerificationList', plural: NodeVerificationApi.plural, singular: 'nodeverification', shortNames: ['nv'] });
    expect(crd.spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([[NodeVerificationApi.version, true, true]]);
    expect(version.subresources).toBeUndefined();
  });

  it('`kubectl get nv` shows phase, profile, attempt, failures, last outcome, verified and age; -o wide the message and the worker pod', () => {
    expect(version.additionalPrinterColumns.map((c) => `${c.name} ${c.type} ${c.jsonPath}${c.priority ? ` wide` : ''}`)).toEqual([
      'Phase string .status.phase',
      'Profile string .status.profile',
      'Attempt integer .status.attempt',
      'Failures integer .status.failures',
      'Outcome string .status.lastAttempt.reason',
      'Verified date .status.verifiedAt',
      'Age date .metadata.creationTimestamp',
      'Message string .status.conditions[0].message wide',
      'Pod string .status.workerPod wide',
    ]);
  });

  it('the schema bounds what the controller bounds: the phases, MAX_MESSAGE, list sizes, conditions keyed by type', () => {
    expect(at(status, 'phase').enum).toEqual(Object.values(Phase));
    for (const path of ['lastAttempt.message', 'lastAttempt.checks.[].error', 'conditions.[].message']) expect(at(status, path).maxLength, path).toBe(MAX_MESSAGE);
    expect(at(status, 'lastAttempt.checks').maxItems).toBe(32);
    expect(at(status, 'conditions').maxItems).toBe(8);
    expect(at(status, 'conditions')['x-kubernetes-list-type']).toBe('map');
    expect(at(status, 'conditions')['x-kubernetes-list-map-keys']).toEqual(['type']);
    for (const path of ['attempt', 'failures', 'lastAttempt.attempt', 'lastAttempt.checks.[].durationMs']) expect(at(status, path).minimum, path).toBe(0);
    for (const path of ['nextAttemptAt', 'nodeCreatedAt', 'launchableAt', 'firstLaunchAt', 'verifiedAt', 'failedAt', 'lastAttempt.finishedAt', 'failing.since', 'failing.at', 'conditions.[].lastTransitionTime']) {
      expect(at(status, path).format, path).toBe('date-time');
    }
    // Every string and list is bounded, so the CEL rules stay within the API server's cost budget.
    const unbounded: string[] = [];
    const walk = (s: Schema, path: string) => {
      if (s.type === 'string' && s.maxLength === undefined && s.enum === undefined && s.format !== 'date-time' && !['apiVersion', 'kind'].includes(path)) unbounded.push(path);
      if (s.type === 'array' && s.maxItems === undefined) unbounded.push(path);
      for (const [k, child] of Object.entries(s.properties ?? {})) walk(child, path ? `${path}.${k}` : k);
      if (s.items) walk(s.items, `${path}[]`);
      if (typeof s.additionalProperties === 'object') walk(s.additionalProperties as Schema, `${path}.*`);
    };
    walk(schema, '');
    expect(unbounded).toEqual([]);
  });

  it('CEL: the object is named after its node, the spec is immutable', () => {
    expect(schema['x-kubernetes-validations']?.map((v) => v.rule)).toEqual(['self.metadata.name == self.spec.nodeName']);
    expect(schema.properties!.spec!['x-kubernetes-validations']?.map((v) => v.rule)).toEqual(['self == oldSelf']);
    expect(schema.required).toEqual(['spec']);
    expect(schema.properties!.spec!.required).toEqual(['nodeName', 'nodeUID']);
  });

  it('takes what the product writes: newNodeVerification, and statusOf with every field (messages cut to MAX_MESSAGE)', () => {
    const nv = newNodeVerification(node);
    expect(nv.metadata?.name).toBe(nv.spec?.nodeName);
    const written = statusOf(fullState(), node, { type: VERIFIED_CONDITION, status: 'False', reason: 'ChecksFailed', message: `attempt 3 of 6 failed: ${'y'.repeat(2 * MAX_MESSAGE)}` }, { ...nv, metadata: { ...nv.metadata, generation: 1 } }, T, 'gpu');
    // Every field the schema knows is written here, so an unknown field or a changed type in the product shows.
    expect(Object.keys(written).sort()).toEqual(Object.keys(status.properties!).sort());
    expect(validateAgainstSchema({ ...nv, status: written }, schema)).toEqual([]);
  });

  it('refuses what it should: an unknown field, an unknown phase, an over-long message', () => {
    const nv = newNodeVerification(node);
    const ok = statusOf(fullState(), node, { type: VERIFIED_CONDITION, status: 'False', reason: 'ChecksFailed', message: 'x' }, nv, T);
    expect(validateAgainstSchema({ ...nv, status: { ...ok, attempts: 3 } }, schema)).toEqual(['status.attempts: unknown field']);
    expect(validateAgainstSchema({ ...nv, status: { ...ok, phase: 'Running' } }, schema)).toEqual([expect.stringContaining('status.phase: "Running" is not one of')]);
    const long = { ...ok, lastAttempt: { ...ok.lastAttempt!, message: 'm'.repeat(MAX_MESSAGE + 1) } };
    expect(validateAgainstSchema({ ...nv, status: long }, schema)).toEqual([`status.lastAttempt.message: longer than ${MAX_MESSAGE}`]);
  });
});

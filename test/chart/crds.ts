// CustomResourceDefinitions of the third-party kinds the chart and the examples use, taken from
// their projects' Go modules through the Go module proxy (pinned, downloaded at test time into the
// Go module cache, never committed). Returns undefined, with the reason, when `go` or the proxy
// is unavailable, so tests can skip those kinds explicitly.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';

const run = promisify(execFile);

export const CRD_SOURCES = {
  /** karpenter.sh/v1 NodePool (examples/karpenter-nodepool.yaml). */
  /** The version the sandbox runs (packages/sandbox/go/karpenter/go.mod). */
  nodePool: { module: 'sigs.k8s.io/karpenter', version: 'v1.15.0', file: 'pkg/apis/crds/karpenter.sh_nodepools.yaml' },
  /** monitoring.coreos.com/v1 ServiceMonitor and PrometheusRule (the chart's optional objects). */
  serviceMonitor: { module: 'github.com/prometheus-operator/prometheus-operator', version: 'v0.85.0', file: 'example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml' },
  prometheusRule: { module: 'github.com/prometheus-operator/prometheus-operator', version: 'v0.85.0', file: 'example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml' },
} as const;

export interface Crd {
  apiVersion: string;
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: { group: string; names: { kind: string }; versions: Array<{ name: string; served: boolean; schema: { openAPIV3Schema: OpenApiSchema } }> };
}

export interface OpenApiSchema {
  type?: string;
  properties?: Record<string, OpenApiSchema>;
  additionalProperties?: OpenApiSchema | boolean;
  items?: OpenApiSchema;
  required?: string[];
  enum?: unknown[];
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  anyOf?: OpenApiSchema[];
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}

const cache = new Map<string, Promise<string>>();

/**
 * The module's directory in the Go module cache (downloads it through GOPROXY once). GOTOOLCHAIN=auto:
 * a module whose go.mod asks for a newer Go than the local one (Karpenter) is read with that toolchain,
 * fetched through the module proxy as the sandbox build does.
 */
function moduleDir(module: string, version: string): Promise<string> {
  const key = `${module}@${version}`;
  let dir = cache.get(key);
  if (!dir) {
    dir = run('go', ['mod', 'download', '-json', key], { cwd: tmpdir(), env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'auto' }, maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => {
      const info = JSON.parse(stdout) as { Dir?: string; Error?: string };
      if (!info.Dir || info.Error) throw new Error(info.Error ?? `go mod download ${key}: no directory`);
      return info.Dir;
    });
    cache.set(key, dir);
  }
  return dir;
}

export type CrdResult = { crd: Crd; text: string } | { skip: string };

export async function loadCrd(source: (typeof CRD_SOURCES)[keyof typeof CRD_SOURCES]): Promise<CrdResult> {
  try {
    const dir = await moduleDir(source.module, source.version);
    const path = join(dir, source.file);
    if (!existsSync(path)) return { skip: `${source.file} is not in ${source.module}@${source.version}` };
    const text = readFileSync(path, 'utf8');
    return { crd: parseYaml(text) as Crd, text };
  } catch (err) {
    return { skip: `cannot fetch ${source.module}@${source.version} through the Go module proxy: ${(err as Error).message.split('\n')[0]}` };
  }
}

/**
 * Structural validation of an object against a CRD version's openAPIV3Schema, the checks the API
 * server's structural schema does without CEL: unknown fields, types, required fields, enums,
 * patterns and list/string bounds. Returns the problems found, each with its field path.
 */
export function validateAgainstSchema(value: unknown, schema: OpenApiSchema, path = ''): string[] {
  const at = path || '(root)';
  if (schema.anyOf && !schema.type) {
    const results = schema.anyOf.map((s) => validateAgainstSchema(value, s, path));
    if (!results.some((r) => r.length === 0) && !schema['x-kubernetes-int-or-string']) return [`${at}: matches none of anyOf`];
  }
  if (schema['x-kubernetes-int-or-string']) {
    return typeof value === 'string' || Number.isInteger(value) ? [] : [`${at}: expected an integer or a string`];
  }
  const problems: string[] = [];
  switch (schema.type) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${at}: expected an object`];
      const object = value as Record<string, unknown>;
      for (const key of schema.required ?? []) if (!(key in object)) problems.push(`${path ? `${path}.` : ''}${key}: required`);
      for (const [key, child] of Object.entries(object)) {
        const childPath = path ? `${path}.${key}` : key;
        const childSchema = schema.properties?.[key];
        if (childSchema) problems.push(...validateAgainstSchema(child, childSchema, childPath));
        else if (typeof schema.additionalProperties === 'object') problems.push(...validateAgainstSchema(child, schema.additionalProperties, childPath));
        else if (schema.properties && !schema['x-kubernetes-preserve-unknown-fields'] && !(path === '' && (key === 'apiVersion' || key === 'kind' || key === 'metadata'))) {
          problems.push(`${childPath}: unknown field`);
        }
      }
      return problems;
    }
    case 'array': {
      if (!Array.isArray(value)) return [`${at}: expected a list`];
      if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${at}: at least ${schema.minItems} items`);
      if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${at}: at most ${schema.maxItems} items`);
      if (schema.items) value.forEach((item, i) => problems.push(...validateAgainstSchema(item, schema.items as OpenApiSchema, `${path}[${i}]`)));
      return problems;
    }
    case 'string': {
      if (typeof value !== 'string') return [`${at}: expected a string`];
      if (schema.enum && !schema.enum.includes(value)) problems.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
      if (schema.minLength !== undefined && value.length < schema.minLength) problems.push(`${at}: shorter than ${schema.minLength}`);
      if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${at}: longer than ${schema.maxLength}`);
      if (schema.pattern) {
        let re: RegExp | undefined;
        try {
          re = new RegExp(schema.pattern);
        } catch {
          re = undefined; // an RE2 construct JavaScript does not know: not checked here
        }
        if (re && !re.test(value)) problems.push(`${at}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
      }
      return problems;
    }
    case 'integer':
      return Number.isInteger(value) ? [] : [`${at}: expected an integer`];
    case 'number':
      return typeof value === 'number' ? [] : [`${at}: expected a number`];
    case 'boolean':
      return typeof value === 'boolean' ? [] : [`${at}: expected true or false`];
    default:
      return [];
  }
}

export function servedSchema(crd: Crd, version: string): OpenApiSchema {
  const v = crd.spec.versions.find((x) => x.name === version && x.served);
  if (!v) throw new Error(`${crd.metadata.name} does not serve ${version}`);
  return v.schema.openAPIV3Schema;
}

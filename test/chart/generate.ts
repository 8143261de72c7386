// Generated parts of the Helm chart, from two sources of truth:
//   - the controller's configuration schema (packages/controller/src/config/schema.ts) gives the
//     `config:` section of values.yaml (keys, defaults, descriptions) and its part of values.schema.json;
//   - the "# --" comments of values.yaml give the table of values in the chart README.
// generated.test.ts fails when a committed file differs and rewrites it with `-u` (see REGENERATE).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { z } from 'zod';
import { configJsonSchema, describeAllowed, type JsonSchemaNode } from '../../packages/controller/src/config/json-schema.js';
import { workerConfigSchema } from '../../packages/worker/src/config.js';
import { CHART_DIR } from './helm.js';

export const REGENERATE = 'npx vitest run --project unit test/chart/generated.test.ts -u';
export const VALUES_FILE = join(CHART_DIR, 'values.yaml');
export const SCHEMA_FILE = join(CHART_DIR, 'values.schema.json');
export const README_FILE = join(CHART_DIR, 'README.md');

const BEGIN_CONFIG = '  # BEGIN GENERATED CONFIG';
const END_CONFIG = '  # END GENERATED CONFIG';
const BEGIN_VALUES = '<!-- BEGIN GENERATED VALUES';
const END_VALUES = '<!-- END GENERATED VALUES -->';

/**
 * Controller keys whose value the chart fills in when it is left empty in values.yaml (the
 * controller's own default would be wrong for a Helm release). Everything else in `config:` is
 * the controller's default, unchanged.
 */
export const CHART_FILLED: Readonly<Record<string, { value: unknown; note: string; relax: (node: JsonSchemaNode) => JsonSchemaNode }>> = {
  'worker.namespace': {
    value: '',
    note: 'Chart: empty means `<fullname>-worker`, which the chart creates (`workerNamespace.create`), or the release namespace when `workerNamespace.create` is false.',
    relax: (node) => ({ ...node, pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$' }),
  },
  'worker.image.repository': {
    value: '',
    note: 'Chart: empty means `image.repository` (controller and worker run the same image).',
    relax: (node) => {
      const { minLength: _minLength, ...rest } = node as JsonSchemaNode & { minLength?: number };
      return rest;
    },
  },
  'worker.image.tag': {
    value: '',
    note: "Chart: empty means `image.tag`, else the chart's appVersion.",
    relax: (node) => node,
  },
  'worker.image.digest': {
    value: '',
    note: 'Chart: empty means `image.digest`.',
    relax: (node) => node,
  },
  'worker.imagePullSecrets': {
    value: [],
    note: 'Chart: empty means the names in `imagePullSecrets`.',
    relax: (node) => node,
  },
};

// ---------------------------------------------------------------------------------------------
// values.yaml: the generated `config:` section

function isSection(node: JsonSchemaNode): boolean {
  return node.type === 'object' && node.properties !== undefined && Object.keys(node.properties).length > 0;
}

function needsAllowed(node: JsonSchemaNode): boolean {
  if (node['x-allowed']) return !node['x-duration'];
  return Boolean(node.enum || node.minimum !== undefined || node.maximum !== undefined || node.minItems);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

export function renderConfigValues(): string[] {
  const lines: string[] = [];
  const walk = (node: JsonSchemaNode, path: string[], indent: string) => {
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      const full = [...path, key].join('.');
      if (isSection(child)) {
        if (child.description) lines.push(`${indent}# ${oneLine(child.description)}`);
        lines.push(`${indent}${key}:`);
        walk(child, [...path, key], `${indent}  `);
        continue;
      }
      const filled = CHART_FILLED[full];
      const doc = [
        child.description ?? '',
        needsAllowed(child) ? `Allowed: ${describeAllowed(child)}.` : '',
        filled ? filled.note : '',
      ]
        .filter(Boolean)
        .join(' ');
      lines.push(`${indent}# -- ${oneLine(doc)}`);
      const value = filled ? filled.value : child.default;
      const text = toYaml({ [key]: value }, { lineWidth: 0 }).trimEnd();
      for (const line of text.split('\n')) lines.push(`${indent}${line}`);
    }
  };
  walk(configJsonSchema(), [], '  ');
  return lines;
}

/** values.yaml with its config section regenerated (the rest is kept as written). */
export function renderValuesFile(current: string): string {
  const lines = current.split('\n');
  const begin = lines.indexOf(BEGIN_CONFIG);
  const end = lines.indexOf(END_CONFIG);
  if (begin < 0 || end < begin) throw new Error(`values.yaml must contain the lines "${BEGIN_CONFIG}" and "${END_CONFIG}"`);
  return [
    ...lines.slice(0, begin + 1),
    `  # Generated from packages/controller/src/config/schema.ts; do not edit, regenerate: ${REGENERATE}`,
    ...renderConfigValues(),
    ...lines.slice(end),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// values.schema.json

type Schema = Record<string, unknown>;

const str = (extra: Schema = {}): Schema => ({ type: 'string', ...extra });
const bool = (): Schema => ({ type: 'boolean' });
const int = (minimum = 0, extra: Schema = {}): Schema => ({ type: 'integer', minimum, ...extra });
const strict = (properties: Record<string, Schema>, extra: Schema = {}): Schema => ({
  type: 'object',
  additionalProperties: false,
  properties,
  ...extra,
});
/** A free-form Kubernetes object (affinity, resources, a probe...): the API server validates it. */
const kobj = (): Schema => ({ type: 'object' });
const stringMap = (): Schema => ({ type: 'object', additionalProperties: { type: 'string' } });
const list = (items: Schema = { type: 'object' }): Schema => ({ type: 'array', items });
const DURATION = '^(0|([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$';
/** Prometheus' own duration syntax (alert `for`, range windows, scrape intervals). */
const PROM_DURATION = '^([0-9]+(ms|s|m|h|d|w|y))+$';
const OPTIONAL_NAME = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$';

/** Alerts whose `for:` prometheusRule.alertFor may set (the other two have pendingFor and untrackedFor). */
export const ALERTS_WITH_FIXED_FOR = [
  'KubeNodeReadyNodeVerificationFailed',
  'KubeNodeReadyHighFailureRate',
  'KubeNodeReadyClusterWideFault',
  'KubeNodeReadyRemediationBlocked',
  'KubeNodeReadyRemediationLedgerUnavailable',
  'KubeNodeReadyControllerDown',
  'KubeNodeReadyNoLeader',
  'KubeNodeReadyControllerUnhealthy',
];

/** The chart's own values (everything but `config`). */
function chartValuesSchema(): Record<string, Schema> {
  return {
    global: { type: 'object' },
    nameOverride: str({ pattern: OPTIONAL_NAME, maxLength: 63 }),
    fullnameOverride: str({ pattern: OPTIONAL_NAME, maxLength: 63 }),
    commonLabels: stringMap(),
    deploymentMode: str({ enum: ['controller', 'daemonset'] }),
    image: strict({
      repository: str({ minLength: 1 }),
      tag: str(),
      digest: str({ pattern: '^(sha256:[a-f0-9]{64})?$' }),
      pullPolicy: str({ enum: ['Always', 'IfNotPresent', 'Never'] }),
    }),
    imagePullSecrets: list(strict({ name: str({ minLength: 1 }) }, { required: ['name'] })),
    controller: strict({
      replicas: int(1),
      priorityClassName: str({ pattern: OPTIONAL_NAME }),
      resources: kobj(),
      extraArgs: list(str()),
      extraEnv: list(),
      listenOnPodIP: bool(),
      podAnnotations: stringMap(),
      podLabels: stringMap(),
      podSecurityContext: kobj(),
      securityContext: kobj(),
      nodeSelector: stringMap(),
      tolerations: list(),
      affinity: kobj(),
      topologySpreadConstraints: list(),
      terminationGracePeriodSeconds: int(0),
      revisionHistoryLimit: int(0),
      livenessProbe: kobj(),
      readinessProbe: kobj(),
    }),
    daemonset: strict({
      serviceAccountName: str({ pattern: OPTIONAL_NAME }),
      priorityClassName: str({ pattern: OPTIONAL_NAME }),
      resources: kobj(),
      tolerations: list(),
      nodeSelector: stringMap(),
      podAnnotations: stringMap(),
      podLabels: stringMap(),
      updateStrategy: kobj(),
      terminationGracePeriodSeconds: int(0),
    }),
    podMonitor: strict({
      enabled: bool(),
      namespace: str({ pattern: OPTIONAL_NAME }),
      labels: stringMap(),
      interval: str({ pattern: PROM_DURATION }),
    }),
    serviceAccount: strict({
      controller: strict({ create: bool(), name: str({ pattern: OPTIONAL_NAME }), annotations: stringMap() }),
      worker: strict({ create: bool(), annotations: stringMap() }),
    }),
    workerPriorityClass: strict({ create: bool(), value: int(1, { maximum: 1_000_000_000 }) }),
    rbac: strict({ create: bool() }),
    workerNamespace: strict({ create: bool() }),
    largeDnsAnswer: strict({ enabled: bool() }),
    admissionPolicies: strict({
      enabled: bool(),
      validationActions: { ...list(str({ enum: ['Deny', 'Warn', 'Audit'] })), minItems: 1, uniqueItems: true },
    }),
    podDisruptionBudget: strict({
      enabled: bool(),
      maxUnavailable: { anyOf: [int(0), str({ pattern: '^[0-9]+%$' })] },
    }),
    metrics: strict({
      service: strict({
        type: str({ enum: ['ClusterIP', 'NodePort', 'LoadBalancer'] }),
        annotations: stringMap(),
        labels: stringMap(),
      }),
    }),
    serviceMonitor: strict({
      enabled: bool(),
      namespace: str({ pattern: OPTIONAL_NAME }),
      labels: stringMap(),
      interval: str({ pattern: PROM_DURATION }),
      scrapeTimeout: str({ pattern: PROM_DURATION }),
      relabelings: list(),
      metricRelabelings: list(),
    }),
    prometheusRule: strict({
      enabled: bool(),
      namespace: str({ pattern: OPTIONAL_NAME }),
      labels: stringMap(),
      alertLabels: stringMap(),
      runbookBaseUrl: str({ minLength: 1 }),
      targetSelector: str(),
      pendingFor: str({ pattern: PROM_DURATION }),
      untrackedFor: str({ pattern: PROM_DURATION }),
      failureRate: strict({
        threshold: { type: 'number', exclusiveMinimum: 0, maximum: 1 },
        window: str({ pattern: PROM_DURATION }),
        minAttempts: int(1),
      }),
      alertFor: {
        type: 'object',
        propertyNames: { enum: ALERTS_WITH_FIXED_FOR },
        additionalProperties: str({ pattern: PROM_DURATION }),
      },
      disabledAlerts: list(str()),
    }),
    grafanaDashboard: strict({
      enabled: bool(),
      namespace: str({ pattern: OPTIONAL_NAME }),
      labels: stringMap(),
      annotations: stringMap(),
    }),
  };
}

/** The controller's JSON schema, made fit for Helm: no defaults or x- keys, durations checked. */
function helmConfigSchema(node: JsonSchemaNode, path: string[] = []): Schema {
  const out: Schema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$schema' || key === 'default' || key.startsWith('x-')) continue;
    // zod lists every enum key of a record as required; the keys are optional.
    if (key === 'required' && node.propertyNames) continue;
    // zod writes the safe-integer range on every integer.
    if ((key === 'maximum' || key === 'minimum') && Math.abs(value as number) >= Number.MAX_SAFE_INTEGER) continue;
    if (key === 'properties') {
      out.properties = Object.fromEntries(
        Object.entries(value as Record<string, JsonSchemaNode>).map(([name, child]) => [name, helmConfigSchema(child, [...path, name])]),
      );
    } else if (key === 'items' || (key === 'additionalProperties' && typeof value === 'object')) {
      out[key] = helmConfigSchema(value as JsonSchemaNode, path);
    } else {
      out[key] = value;
    }
  }
  if (node['x-duration']) out.pattern = DURATION;
  const filled = CHART_FILLED[path.join('.')];
  if (filled) return filled.relax(out as JsonSchemaNode) as Schema;
  // The controller passes worker.checks through to the worker, which validates it only when a
  // worker pod starts: check it at install time with the worker's own schema instead.
  if (path.join('.') === 'worker.checks') {
    const worker = helmConfigSchema(z.toJSONSchema(workerConfigSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchemaNode);
    return { ...worker, description: out.description };
  }
  return out;
}

export function renderValuesSchema(): string {
  const schema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'kube-node-ready Helm chart values',
    description: `Generated by test/chart/generate.ts; do not edit, regenerate: ${REGENERATE}`,
    type: 'object',
    additionalProperties: false,
    properties: { ...chartValuesSchema(), config: helmConfigSchema(configJsonSchema()) },
  };
  return `${JSON.stringify(schema, null, 2)}\n`;
}

// ---------------------------------------------------------------------------------------------
// README: the table of values, from the "# --" comments of values.yaml

export interface DocumentedValue {
  key: string;
  value: unknown;
  description: string;
}

/**
 * Every documented value of values.yaml, in file order. A key with a "# --" comment right above it
 * is a documented value (its whole value, even a map or a list, is its default); a key without one
 * must hold a map of further keys. Anything else is an undocumented value and an error.
 */
export function documentedValues(text: string): DocumentedValue[] {
  const values = parseYaml(text) as Record<string, unknown>;
  const out: DocumentedValue[] = [];
  const stack: Array<{ indent: number; key: string }> = [];
  let comment: string[] = [];
  let skipDeeperThan: number | undefined;
  const lines = text.split('\n');
  for (const [index, line] of lines.entries()) {
    const trimmed = line.trim();
    const indent = line.length - line.trimStart().length;
    if (skipDeeperThan !== undefined) {
      if (trimmed === '' || indent > skipDeeperThan || trimmed.startsWith('- ')) continue;
      skipDeeperThan = undefined;
    }
    if (trimmed === '') {
      comment = [];
      continue;
    }
    if (trimmed.startsWith('#')) {
      comment.push(trimmed.replace(/^#\s?/, ''));
      continue;
    }
    const m = /^(\s*)([A-Za-z0-9_]+):(.*)$/.exec(line);
    if (!m) throw new Error(`values.yaml line ${index + 1}: cannot read "${line}"`);
    while (stack.length > 0 && (stack.at(-1) as { indent: number }).indent >= indent) stack.pop();
    const path = [...stack.map((s) => s.key), m[2] as string];
    const key = path.join('.');
    const start = comment.findLastIndex((c) => c.startsWith('-- '));
    const description = start >= 0 ? comment.slice(start).join(' ').slice(3).trim() : undefined;
    comment = [];
    const value = path.reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], values);
    if (description !== undefined) {
      out.push({ key, value, description });
      skipDeeperThan = indent;
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value) || Object.keys(value).length === 0) {
      throw new Error(`values.yaml line ${index + 1}: "${key}" has no "# --" comment`);
    }
    stack.push({ indent, key: m[2] as string });
  }
  return out;
}

function typeOf(value: unknown): string {
  if (Array.isArray(value)) return 'list';
  if (value === null) return 'null';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'object') return 'object';
  return typeof value;
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|');
}

export function renderValuesTable(valuesText: string): string[] {
  const rows = documentedValues(valuesText).map(
    (v) => `| \`${v.key}\` | ${typeOf(v.value)} | \`${cell(JSON.stringify(v.value))}\` | ${cell(v.description)} |`,
  );
  return ['| Key | Type | Default | Description |', '| --- | --- | --- | --- |', ...rows];
}

/** The chart README with its table of values regenerated (the rest is kept as written). */
export function renderReadme(current: string, valuesText: string): string {
  const lines = current.split('\n');
  const begin = lines.findIndex((l) => l.startsWith(BEGIN_VALUES));
  const end = lines.indexOf(END_VALUES);
  if (begin < 0 || end < begin) throw new Error(`README.md must contain "${BEGIN_VALUES} ... -->" and "${END_VALUES}"`);
  return [
    ...lines.slice(0, begin),
    `${BEGIN_VALUES}: generated from the comments of values.yaml; regenerate: ${REGENERATE} -->`,
    ...renderValuesTable(valuesText),
    ...lines.slice(end),
  ].join('\n');
}

export function readText(path: string): string {
  return readFileSync(path, 'utf8');
}

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@kube-node-ready/core';
import { parse as parseYaml } from 'yaml';
import { afterAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { fuzz, isReplay } from '../../../core/src/testing/fuzz.js';
import { configText, schemaPaths, type ConfigShape } from '../../../core/src/testing/yaml-inputs.js';
import { configJsonSchema, type JsonSchemaNode } from './json-schema.js';
import { formatPath, loadConfig } from './load.js';
import type { ControllerConfig } from './schema.js';

// A wall-clock budget far above Vitest's default 5 s: the fuzz loops are bounded by count and by
// CPU time (hangAfterCpuMs), so their wall time says only how loaded the machine is.
vi.setConfig({ testTimeout: 120_000 });

/**
 * Fuzz test of the controller's config loader (seeded: a failure names its seed, and
 * KNR_FUZZ_SEED=<seed> replays that case alone). Whatever the file holds, loadConfig returns a
 * configuration within the schema's bounds or throws a ConfigError naming the field, the file or
 * the YAML problem; never another exception, never a hang (the loader is synchronous: the hang
 * guard is a watchdog thread counting CPU time).
 */

const dir = mkdtempSync(join(tmpdir(), 'knr-config-fuzz-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'config.yaml');

const schema = configJsonSchema();
const DURATION_SAMPLES = ['10s', '1m', '90s', '1h30m', '500ms', '2m'];
const shape: ConfigShape = {
  schema,
  samples: {
    'worker.timeout': DURATION_SAMPLES,
    'worker.scheduleTimeout': DURATION_SAMPLES,
    'worker.startTimeout': DURATION_SAMPLES,
    'worker.namespace': ['kube-system', 'node-ready'],
    'worker.imagePullSecrets[]': ['regcred', 'pull.secret'],
    'worker.tolerations[]': [{ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }, { operator: 'Exists' }],
    'worker.resources.requests': [{ cpu: '100m' }, { memory: '1Gi', 'ephemeral-storage': '1G' }],
    'worker.checks': [{ dns: { names: ['kubernetes.default.svc.cluster.local'] } }, {}],
    'reconciliation.initialBackoff': DURATION_SAMPLES,
    'reconciliation.maxBackoff': DURATION_SAMPLES,
    'reconciliation.resyncInterval': DURATION_SAMPLES,
    'nodeManagement.taints[]': [{ key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' }, { key: 'example.com/x', effect: 'NoExecute' }],
    'nodeManagement.nodeSelector': ['', 'pool in (a,b)', 'a=1,!b'],
    'leaderElection.leaseDuration': ['15s', '30s'],
    'leaderElection.renewDeadline': ['10s', '12s'],
    'leaderElection.retryPeriod': ['2s', '1s'],
    'metrics.bindAddress': [':8080', '127.0.0.1:0'],
    'health.bindAddress': ['', ':8081'],
  },
};

/** Every path the schema knows, list indexes written "[]" (as in error messages, with the numbers taken out). */
const SCHEMA_PATHS = new Set(schemaPaths(schema));

/** The paths present in a parsed document, written as error messages write them. */
function documentPaths(value: unknown, prefix: PropertyKey[] = [], out = new Set<string>(), open = new Set<unknown>()): Set<string> {
  if (typeof value !== 'object' || value === null || open.has(value)) return out;
  open.add(value);
  for (const [key, child] of Object.entries(value)) {
    const path = [...prefix, Array.isArray(value) ? Number(key) : key];
    out.add(formatPath(path));
    documentPaths(child, path, out, open);
  }
  open.delete(value);
  return out;
}

/** An issue line names a field: one of the document (an unknown key, a bad value) or one the schema has. */
function namesAField(line: string, documentFields: Set<string>): boolean {
  if (line.startsWith('(top level): ')) return true;
  for (let colon = line.indexOf(': '); colon > 0; colon = line.indexOf(': ', colon + 1)) {
    const field = line.slice(0, colon);
    if (documentFields.has(field) || SCHEMA_PATHS.has(field.replace(/\[\d+\]/g, '[]'))) return true;
  }
  return false;
}

function expectNamedProblem(err: unknown, content: string | Buffer): void {
  if (!(err instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`, { cause: err });
  const { message } = err;
  expect(message).not.toMatch(/\n\s+at /);
  if (
    message.startsWith(`config file ${file} is not valid YAML: `) ||
    message === `config file ${file} must contain a mapping at the top level (worker:, reconciliation:, ...)` ||
    /^config file \S+: \S.* refers back to a mapping or list that contains it/.test(message)
  ) {
    return;
  }
  const lines = message.startsWith(`invalid ${file}:\n`)
    ? message.split('\n').slice(1).map((l) => l.replace(/^ {2}- /, ''))
    : message.startsWith(`invalid ${file}: `)
      ? [message.slice(`invalid ${file}: `.length)]
      : undefined;
  if (!lines) throw new Error(`the message names neither a field nor the file: ${message.slice(0, 300)}`);
  const fields = documentPaths(parseYaml(content.toString(), { schema: 'core', resolveKnownTags: false, logLevel: 'silent' }));
  for (const line of lines) expect(namesAField(line, fields), `issue names no field: ${line.slice(0, 200)}`).toBe(true);
}

/** The configuration satisfies the schema it came from: types, enums, bounds, patterns, no stray keys. */
function expectWithinSchema(node: JsonSchemaNode & { pattern?: string; minLength?: number; 'x-duration'?: boolean }, value: unknown, path: string): void {
  const where = path || '(top level)';
  if (node['x-duration']) {
    expect(Number.isSafeInteger(value) && (value as number) >= 0, `${where}: a duration in ms, got ${String(value)}`).toBe(true);
    return;
  }
  if (node.enum) expect(node.enum, where).toContain(value);
  const type = Array.isArray(node.type) ? node.type[0] : node.type;
  switch (type) {
    case 'integer':
    case 'number': {
      expect(typeof value === 'number' && Number.isFinite(value), `${where}: finite number`).toBe(true);
      const n = value as number;
      if (type === 'integer') expect(Number.isInteger(n), `${where}: integer`).toBe(true);
      if (node.minimum !== undefined) expect(n, where).toBeGreaterThanOrEqual(node.minimum);
      if (node.maximum !== undefined) expect(n, where).toBeLessThanOrEqual(node.maximum);
      if (node.exclusiveMinimum !== undefined) expect(n, where).toBeGreaterThan(node.exclusiveMinimum);
      return;
    }
    case 'string': {
      expect(typeof value, where).toBe('string');
      const s = value as string;
      if (node.maxLength !== undefined) expect(s.length, where).toBeLessThanOrEqual(node.maxLength);
      if (node.minLength !== undefined) expect(s.length, where).toBeGreaterThanOrEqual(node.minLength);
      if (node.pattern !== undefined) expect(s, where).toMatch(new RegExp(node.pattern));
      return;
    }
    case 'boolean':
      expect(typeof value, where).toBe('boolean');
      return;
    case 'array': {
      expect(Array.isArray(value), `${where}: a list`).toBe(true);
      const items = value as unknown[];
      if (node.minItems !== undefined) expect(items.length, where).toBeGreaterThanOrEqual(node.minItems);
      if (node.items) items.forEach((item, i) => expectWithinSchema(node.items as JsonSchemaNode, item, `${path}[${i}]`));
      return;
    }
    case 'object': {
      expect(typeof value === 'object' && value !== null && !Array.isArray(value), `${where}: a mapping`).toBe(true);
      const entries = Object.entries(value as Record<string, unknown>);
      for (const [key, child] of entries) {
        const childPath = path ? `${path}.${key}` : key;
        const childNode = node.properties?.[key] ?? (typeof node.additionalProperties === 'object' ? node.additionalProperties : undefined);
        if (node.properties && !node.properties[key] && node.additionalProperties === false) throw new Error(`${childPath}: a key the schema does not have`);
        if (node.propertyNames?.enum) expect(node.propertyNames.enum, childPath).toContain(key);
        if (childNode) expectWithinSchema(childNode, child, childPath);
      }
      return;
    }
    default:
      return; // no type: any value (worker.checks entries)
  }
}

function expectUsable(config: Readonly<ControllerConfig>): void {
  expectWithinSchema(schema, config, '');
  expect(Object.isFrozen(config) && Object.isFrozen(config.worker) && Object.isFrozen(config.nodeManagement.taints)).toBe(true);
  const le = config.leaderElection;
  expect(le.renewDeadline).toBeLessThan(le.leaseDuration);
  expect(le.renewDeadline).toBeGreaterThan(1.2 * le.retryPeriod);
}

describe('loadConfig on any file (fuzz)', () => {
  it('returns a configuration within the schema or throws a ConfigError naming the field, the file or the YAML problem', () => {
    const kinds = new Map<string, { loaded: number; rejected: number }>();
    // The yaml package reports unresolved tags through process.emitWarning: keep the output readable.
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    onTestFinished(() => warnings.mockRestore());
    fuzz(
      0xc0f000,
      1000,
      (r) => {
        const { kind, content } = configText(r, shape);
        writeFileSync(file, content);
        const tally = kinds.get(kind.replace(/ \(.*| under .*/, '')) ?? { loaded: 0, rejected: 0 };
        kinds.set(kind.replace(/ \(.*| under .*/, ''), tally);
        let config: Readonly<ControllerConfig>;
        try {
          config = loadConfig(file);
        } catch (err) {
          tally.rejected++;
          try {
            expectNamedProblem(err, content);
          } catch (failure) {
            throw new Error(`${kind}: ${(failure as Error).message}\n--- file (first 300 characters) ---\n${content.toString().slice(0, 300)}`, { cause: failure });
          }
          return;
        }
        tally.loaded++;
        expectUsable(config);
      },
      { hangAfterCpuMs: 20_000 },
    );
    // The generators reach both sides: valid files load, broken ones are rejected.
    if (isReplay()) return;
    expect(kinds.get('valid')?.loaded).toBeGreaterThan(0);
    expect(kinds.get('random bytes')?.rejected).toBeGreaterThan(0);
    expect(kinds.get('alias bomb')?.rejected).toBeGreaterThan(0);
  }, 120_000);
});

describe('loadConfig regressions found by fuzzing', () => {
  function loadError(text: string): string {
    writeFileSync(file, text);
    try {
      loadConfig(file);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
    throw new Error('expected a ConfigError');
  }

  it('rejects an alias inside its own anchor (a cyclic value), naming where', () => {
    expect(loadError('&c\nnodeManagement: *c\n')).toBe(
      `config file ${file}: nodeManagement refers back to a mapping or list that contains it (an alias inside its own anchor); aliases must not form a cycle`,
    );
    // worker.checks takes any mapping: the cycle is caught here, not left for the worker to fail on.
    expect(loadError('worker:\n  checks: &c\n    dns: [*c]\n')).toMatch(/: worker\.checks\.dns\[0\] refers back to a mapping or list/);
  });

  it('reads YAML 1.2 core types only: a tag or a YAML 1.1 directive gives no binary, set or date value', () => {
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    onTestFinished(() => warnings.mockRestore());
    // !!binary would make a Buffer, whose prototype's methods the schema would report as unknown keys.
    expect(loadError('nodeManagement:\n  remediation: !!binary aGVsbG8=\n')).toBe(
      `invalid ${file}: nodeManagement.remediation: expected a mapping, got "aGVsbG8="`,
    );
    writeFileSync(file, '%YAML 1.1\n---\nworker:\n  image:\n    tag: 2001-12-14\n');
    expect(loadConfig(file).worker.image.tag).toBe('2001-12-14');
  });

  it('quotes odd keys, so that every problem stays on one line and names the key', () => {
    expect(loadError('leaderElection:\n  "a\\nb": 1\n  enabled: true\n  x: 2\n').split('\n')).toEqual([
      `invalid ${file}:`,
      '  - leaderElection."a\\nb": unknown key; allowed keys here: enabled, leaseName, namespace, leaseDuration, renewDeadline, retryPeriod',
      '  - leaderElection.x: unknown key; allowed keys here: enabled, leaseName, namespace, leaseDuration, renewDeadline, retryPeriod',
    ]);
    // An empty key stays in the path: the message names it, not its parent.
    expect(loadError('worker:\n  "": 1\n')).toMatch(/: worker\."": unknown key/);
    expect(loadError(`logging:\n  ? ${'k'.repeat(100_000)}\n  : 1\n`)).toBe(
      `invalid ${file}: logging."${'k'.repeat(59)}…": unknown key; allowed keys here: format, level`,
    );
  });

  it('ends an alias bomb with a clean error', () => {
    const lines = ['a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
    for (const [i, name] of ['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'].entries()) lines.push(`${name}: &${name} [${Array(10).fill(`*${'abcdefghi'[i]}`).join(', ')}]`);
    expect(loadError(lines.join('\n'))).toMatch(/is not valid YAML: Excessive alias count indicates a resource exhaustion attack/);
  });
});

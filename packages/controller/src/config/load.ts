import { readFileSync } from 'node:fs';
import { ConfigError, cyclePath, errorMessage } from '@kube-node-ready/core';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { configJsonSchema, describeAllowed, schemaAt, type JsonSchemaNode } from './json-schema.js';
import { Profiles } from './profiles.js';
import { configSchema, DEFAULT_PROFILE, RENAMED_KEYS, type ControllerConfig, type ControllerConfigInput } from './schema.js';

/** Values from flags; they win over the file. Same shape as the file, every field optional. */
export type ConfigOverrides = DeepPartial<ControllerConfigInput>;
type DeepPartial<T> = T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]?: DeepPartial<T[K]> } : T;

/**
 * Reads the YAML file (if any), applies overrides, validates against the one schema and returns a
 * frozen configuration. Throws ConfigError naming every bad field and what it allows.
 */
export function loadConfig(path: string | undefined, overrides: ConfigOverrides = {}): Readonly<ControllerConfig> {
  const fromFile = path === undefined ? {} : readYamlFile(path);
  return parseConfig(mergeOverrides(fromFile, overrides), path ?? 'configuration');
}

/** Validates an already parsed document (tests, and the file contents above). */
export function parseConfig(document: unknown, source = 'configuration'): Readonly<ControllerConfig> {
  const result = configSchema.safeParse(document ?? {}, { reportInput: true });
  if (!result.success) {
    const lines = formatIssues(result.error.issues);
    const message =
      lines.length === 1 ? `invalid ${source}: ${lines[0]}` : `invalid ${source}:\n${lines.map((l) => `  - ${l}`).join('\n')}`;
    throw new ConfigError(message);
  }
  const problems = settingProblems(result.data);
  if (problems.length > 0) {
    throw new ConfigError(problems.length === 1 ? `invalid ${source}: ${problems[0]}` : `invalid ${source}:\n${problems.map((l) => `  - ${l}`).join('\n')}`);
  }
  return deepFreeze(result.data);
}

/**
 * Rules across fields that hold for the settings every node runs with: the top-level ones and
 * each profile's merged with them (a profile can break a rule with a setting it inherits).
 */
function settingProblems(config: ControllerConfig): string[] {
  const problems: string[] = [];
  for (const profile of new Profiles(config).all()) {
    const nm = profile.config.nodeManagement;
    const where = profile.name === DEFAULT_PROFILE ? 'nodeManagement' : `profiles[${config.profiles.findIndex((p) => p.name === profile.name)}] (${profile.name}): nodeManagement`;
    if (nm.startupTimeout > 0 && nm.onStartupTimeout === 'replace' && !nm.deleteFailedNodes) {
      problems.push(`${where}.onStartupTimeout: "replace" deletes nodes through remediation, which is off for these nodes; set nodeManagement.deleteFailedNodes: true (its guards: nodeManagement.remediation), or choose "keep" or "open"`);
    }
  }
  return problems;
}

function readYamlFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${errorMessage(err)}`);
  }
  let document: unknown;
  try {
    // YAML 1.2 core types only, whatever the file declares: no Date, Set, Map or binary values
    // from tags (!!binary, !!set, %YAML 1.1 timestamps), which the schema would take for mappings.
    document = parseYaml(text, { prettyErrors: true, schema: 'core', resolveKnownTags: false });
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid YAML: ${errorMessage(err)}`);
  }
  if (document === null || document === undefined) return {};
  if (typeof document !== 'object' || Array.isArray(document)) {
    throw new ConfigError(`config file ${path} must contain a mapping at the top level (worker:, reconciliation:, ...)`);
  }
  const cycle = cyclePath(document);
  if (cycle) {
    throw new ConfigError(
      `config file ${path}: ${formatPath(cycle)} refers back to a mapping or list that contains it (an alias inside its own anchor); aliases must not form a cycle`,
    );
  }
  return document;
}

/** Deep merge of plain objects; arrays and scalars from the override replace. */
function mergeOverrides(base: unknown, override: unknown): unknown {
  if (!isPlainObject(override)) return override === undefined ? base : override;
  const out: Record<string, unknown> = isPlainObject(base) ? { ...base } : {};
  for (const [key, value] of Object.entries(override)) {
    if (value === undefined) continue;
    out[key] = mergeOverrides(out[key], value);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Error messages: "reconciliation.maxRetries: expected an integer between 0 and 1000, got "abc""

export function formatIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  const schema = configJsonSchema();
  return issues.flatMap((issue) => formatIssue(schema, issue));
}

function formatIssue(schema: JsonSchemaNode, issue: z.core.$ZodIssue): string[] {
  const where = formatPath(issue.path) || '(top level)';
  const node = schemaAt(schema, issue.path);
  const input = (issue as { input?: unknown }).input;
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => {
        const full = formatPath([...issue.path, key]);
        const hint = RENAMED_KEYS[full];
        if (hint) return `${full}: unknown key; ${hint}`;
        const allowed = Object.keys(node?.properties ?? {});
        return `${full}: unknown key${allowed.length ? `; allowed keys here: ${allowed.join(', ')}` : ''}`;
      });
    case 'invalid_type':
    case 'invalid_value':
      if (input === undefined) return [`${where}: required; expected ${describeAllowed(node)}`];
      return [`${where}: expected ${describeAllowed(node)}, got ${showInput(input)}`];
    case 'too_small':
    case 'too_big':
      return [`${where}: expected ${describeAllowed(node)}, got ${showInput(input)}`];
    default: {
      // Our own refinements say "expected ..." themselves; others ("must be less than ...") stand alone.
      const got = input !== undefined && issue.message.startsWith('expected') ? `, got ${showInput(input)}` : '';
      return [`${where}: ${issue.message}${got}`];
    }
  }
}

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out ? `.${showKey(String(segment))}` : showKey(String(segment));
  }
  return out;
}

/**
 * A key as messages write it: a plain key as it is, any other quoted and cut short, so that an
 * odd key (empty, with dots, newlines or a megabyte long) cannot break a message into lines.
 */
function showKey(key: string): string {
  if (key.length > 60) {
    const cut = key.slice(0, 59);
    return JSON.stringify(`${/[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut}…`);
  }
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
}

function showInput(input: unknown): string {
  if (Array.isArray(input)) return 'a list';
  if (isPlainObject(input)) return 'a mapping';
  const text = JSON.stringify(input) ?? String(input);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

import { stringify as toYaml } from 'yaml';
import { configJsonSchema, describeAllowed, typeName, type JsonSchemaNode } from './json-schema.js';

/**
 * docs/configuration.md, generated from the schema (src/config/schema.ts). A unit test
 * (docs.test.ts) fails when the committed file differs; it prints the command that rewrites it.
 */
export function renderConfigDocs(): string {
  const root = configJsonSchema();
  const out: string[] = [
    '# Controller configuration',
    '',
    '<!-- Generated from packages/controller/src/config/schema.ts by renderConfigDocs(). Do not edit by hand:',
    '     npx vitest run --project unit packages/controller/src/config/docs.test.ts -u -->',
    '',
    'The controller reads one YAML file, given with `--config` (the Helm chart mounts it from a ConfigMap).',
    'Every key is optional; the defaults below are safe for production. Unknown keys and invalid values',
    'stop the controller at start-up with exit code 2 and a message naming the field and what it allows,',
    'for example `reconciliation.maxRetries: expected an integer between 0 and 1000, got "abc"`.',
    '',
    'Durations are written like Kubernetes ones: `500ms`, `10s`, `2m`, `1h30m`; at most `596h` (the longest timer Node.js can set).',
    'Command-line flags (`--dry-run`, `--log-level`, `--log-format`, `--metrics-bind-address`,',
    '`--leader-elect`) override the file.',
    '',
  ];
  const sections = Object.entries(root.properties ?? {});
  for (const [section, node] of sections.filter(([, n]) => isSection(n))) {
    out.push(`## \`${section}\``, '');
    if (node.description) out.push(node.description, '');
    out.push(TABLE_HEAD, TABLE_RULE, ...rows(section, node), '');
  }
  const scalars = sections.filter(([, n]) => !isSection(n));
  if (scalars.length > 0) {
    out.push('## Top-level keys', '', TABLE_HEAD, TABLE_RULE, ...scalars.flatMap(([key, n]) => rows(key, n)), '');
  }
  out.push('## Every default', '', 'The configuration the controller runs with when the file is empty:', '', '```yaml');
  out.push(toYaml(defaultsOf(root), { lineWidth: 0 }).trimEnd());
  out.push('```', '');
  return out.join('\n');
}

const TABLE_HEAD = '| Key | Type | Default | Description |';
const TABLE_RULE = '| --- | --- | --- | --- |';

/** An object with named fields (documented field by field), as opposed to a map or a scalar. */
function isSection(node: JsonSchemaNode): boolean {
  return node.type === 'object' && node.properties !== undefined && Object.keys(node.properties).length > 0;
}

function rows(path: string, node: JsonSchemaNode): string[] {
  if (isSection(node) && node.properties) {
    return Object.entries(node.properties).flatMap(([key, child]) => rows(`${path}.${key}`, child));
  }
  const out = [row(path, node)];
  if (node.type === 'array' && node.items?.properties) {
    for (const [key, child] of Object.entries(node.items.properties)) out.push(...rows(`${path}[].${key}`, child));
  }
  return out;
}

function row(path: string, node: JsonSchemaNode): string {
  const type = typeName(node);
  const defaultValue = 'default' in node ? code(formatDefault(node.default)) : '';
  const allowed = describeAllowed(node);
  const description = [node.description ?? '', needsAllowed(node) ? `Allowed: ${allowed}.` : '']
    .filter(Boolean)
    .join(' ');
  return `| \`${path}\` | ${type} | ${defaultValue} | ${cell(description)} |`;
}

/** Spell out the allowed values where the type column does not already say everything. */
function needsAllowed(node: JsonSchemaNode): boolean {
  if (node['x-allowed']) return !node['x-duration'];
  if (node.enum || node.minimum !== undefined || node.maximum !== undefined || node.minItems) return true;
  return false;
}

function formatDefault(value: unknown): string {
  return JSON.stringify(value) ?? '';
}

function code(text: string): string {
  return text === '' ? '' : `\`${text.replaceAll('|', '\\|')}\``;
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** The input-side defaults, as a user would write them. */
function defaultsOf(node: JsonSchemaNode): unknown {
  if (isSection(node) && node.properties) {
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(node.properties)) {
      const value = defaultsOf(child);
      if (value !== undefined) out[key] = value;
    }
    return out;
  }
  return node.default;
}

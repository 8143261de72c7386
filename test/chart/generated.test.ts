// The generated parts of the chart are up to date with their sources (the controller's config
// schema; the comments of values.yaml). `-u` rewrites them: see REGENERATE.
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { configJsonSchema } from '../../packages/controller/src/config/json-schema.js';
import { parseConfig } from '../../packages/controller/src/config/load.js';
import {
  CHART_FILLED,
  README_FILE,
  REGENERATE,
  SCHEMA_FILE,
  VALUES_FILE,
  documentedValues,
  readText,
  renderReadme,
  renderValuesFile,
  renderValuesSchema,
} from './generate.js';

const outOfDate = (file: string) => `${file} is out of date; regenerate it with: ${REGENERATE}`;

describe('generated chart files', () => {
  it('values.yaml: the config section is the controller schema (keys, defaults, descriptions)', async () => {
    await expect(renderValuesFile(readText(VALUES_FILE)), outOfDate('values.yaml')).toMatchFileSnapshot(VALUES_FILE);
  });

  it('values.schema.json: the chart values plus the controller schema', async () => {
    await expect(renderValuesSchema(), outOfDate('values.schema.json')).toMatchFileSnapshot(SCHEMA_FILE);
  });

  it('README.md: every value of values.yaml in the table', async () => {
    const values = renderValuesFile(readText(VALUES_FILE));
    await expect(renderReadme(readText(README_FILE), values), outOfDate('README.md')).toMatchFileSnapshot(README_FILE);
  });
});

describe('values.yaml', () => {
  const text = readText(VALUES_FILE);
  const values = parseYaml(text) as { config: Record<string, unknown> };

  it('documents every value with a "# --" comment', () => {
    const documented = documentedValues(text);
    expect(documented.length).toBeGreaterThan(80);
    for (const v of documented) expect(v.description.length, v.key).toBeGreaterThan(10);
    expect(documented.map((v) => v.key)).toEqual(expect.arrayContaining(['controller.replicas', 'config.reconciliation.maxRetries', 'config.nodeManagement.taints']));
  });

  it('config holds the controller defaults, except the keys the chart fills in', () => {
    const defaults = parseConfig({});
    const fromValues = structuredClone(values.config) as { worker: { namespace: string; image: Record<string, string>; imagePullSecrets: string[] } };
    // What the chart leaves empty in values.yaml and fills in at render time.
    expect(Object.keys(CHART_FILLED).sort()).toEqual(['worker.image.digest', 'worker.image.repository', 'worker.image.tag', 'worker.imagePullSecrets', 'worker.namespace']);
    fromValues.worker.namespace = defaults.worker.namespace;
    fromValues.worker.image.repository = defaults.worker.image.repository;
    expect(parseConfig(fromValues)).toEqual(defaults);
  });

  it('config covers every key of the controller schema', () => {
    const keys = (node: ReturnType<typeof configJsonSchema>, value: unknown, path: string): string[] =>
      Object.entries(node.properties ?? {}).flatMap(([key, child]) => {
        const here = `${path}${key}`;
        expect(value, here).toHaveProperty([key]);
        const sub = (value as Record<string, unknown>)[key];
        return child.type === 'object' && child.properties && Object.keys(child.properties).length > 0 ? keys(child, sub, `${here}.`) : [here];
      });
    expect(keys(configJsonSchema(), values.config, '').length).toBeGreaterThan(30);
  });
});

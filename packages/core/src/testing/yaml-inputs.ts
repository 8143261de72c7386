import { stringify } from 'yaml';
import type { Rng } from './fuzz.js';

/**
 * Configuration files for fuzz tests of the config loaders: random bytes and token soup, YAML of
 * the wrong types, deep nesting, alias bombs and cycles, huge and odd scalars, unknown keys at
 * every level, and valid files with one field changed. Keys and valid values come from the
 * loader's JSON schema (z.toJSONSchema, io: 'input') plus examples for fields it does not describe.
 */

export interface SchemaLike {
  type?: string | string[];
  properties?: Record<string, SchemaLike>;
  items?: SchemaLike;
  enum?: unknown[];
  default?: unknown;
  additionalProperties?: SchemaLike | boolean;
  propertyNames?: SchemaLike;
}

export interface ConfigShape {
  schema: SchemaLike;
  /** Valid values by path ("worker.timeout", list items as "dns.servers[]"), beyond enums and defaults. */
  samples?: Record<string, readonly unknown[]>;
}

export interface ConfigText {
  kind: string;
  content: string | Buffer;
}

const DURATIONS = ['99999999999h', '-1s', '1e309s', '0', '0s', '1.5h', '1h-1m', ' 10s ', '10S', '∞s', '1ns', '1µs', '9007199254740993ms', `1${'0'.repeat(400)}s`, '1h'.repeat(500), '596h', '597h', '2147483647ms', '2147483648ms', '1m30s', 'PT5S', '5 s'];
const YAML_WORDS = ['yes', 'no', 'on', 'off', 'y', 'n', '~', 'null', 'Null', 'true', 'False', '.inf', '-.inf', '.nan', '.NaN', '0x1F', '0o17', '017', '1_000', '12:30:00', '2001-12-14', '-0', '+1', '1e309', '-1e309', '0.', '.5', '', ' ', '#', '- a', 'a: b'];
const NUMBERS = [0, -0, 1, -1, 0.5, -7.25, 1e21, 2 ** 31, 2 ** 53 + 2, -(2 ** 63), Number.MAX_VALUE, Number.MIN_VALUE, Infinity, -Infinity, NaN, 65536, 99999999999];
const CHARS = ['a', 'Z', '0', '-', '.', '/', ':', ' ', '_', 'é', '中', '😀', '"', "'", '\\', '\n', '\t', '#', '&', '*', '!', '|', '>', '%', '@', '`', '{', '}', '[', ']', ',', '?', '\u0000', '\u0085', '\u2028', '\ufeff'];

export function randomString(r: Rng, max = 20): string {
  let out = '';
  const length = r.int(max + 1);
  for (let i = 0; i < length; i++) out += r.pick(CHARS);
  return out;
}

/** Any value a YAML file can hold (as the yaml package reads it), up to the given depth. */
export function randomValue(r: Rng, depth = 2): unknown {
  switch (r.int(depth > 0 ? 10 : 8)) {
    case 0:
      return null;
    case 1:
      return r.chance(0.5);
    case 2:
      return r.pick(NUMBERS);
    case 3:
      return r.int(2000) - 1000;
    case 4:
      return randomString(r);
    case 5:
      return r.pick(YAML_WORDS);
    case 6:
      return r.pick(DURATIONS);
    case 7:
      return r.chance(0.5) ? 'x'.repeat(r.pick([100, 10_000, 300_000])) : '9'.repeat(r.pick([20, 400, 5000]));
    case 8:
      return Array.from({ length: r.int(4) }, () => randomValue(r, depth - 1));
    default:
      return Object.fromEntries(Array.from({ length: r.int(4) }, () => [r.chance(0.7) ? randomString(r, 8) : r.pick(YAML_WORDS), randomValue(r, depth - 1)]));
  }
}

/** Every key path of the schema: "worker", "worker.image", ... (list items as "[]"). */
export function schemaPaths(schema: SchemaLike, prefix = ''): string[] {
  const out: string[] = [];
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    const path = prefix ? `${prefix}.${key}` : key;
    out.push(path, ...schemaPaths(child, path));
    if (child.items) out.push(`${path}[]`, ...schemaPaths(child.items, `${path}[]`));
  }
  return out;
}

function nodeAt(schema: SchemaLike, path: string): SchemaLike | undefined {
  let node: SchemaLike | undefined = schema;
  for (const part of path.split('.')) {
    const key = part.replace(/\[\]$/, '');
    node = node?.properties?.[key];
    if (part.endsWith('[]')) node = node?.items;
  }
  return node;
}

/** A valid value for the field at `path`, when the schema or the samples know one. */
function validValue(r: Rng, shape: ConfigShape, path: string): { value: unknown } | undefined {
  const samples = shape.samples?.[path];
  if (samples && samples.length > 0) return { value: r.pick(samples) };
  const node = nodeAt(shape.schema, path);
  if (node?.enum && node.enum.length > 0) return { value: r.pick(node.enum) };
  if (node && node.default !== undefined) return { value: structuredClone(node.default) };
  return undefined;
}

/** A document of valid values for a random subset of the schema's leaf fields. */
function validDocument(r: Rng, shape: ConfigShape, node: SchemaLike = shape.schema, prefix = ''): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(node.properties ?? {})) {
    if (!r.chance(0.5)) continue;
    const path = prefix ? `${prefix}.${key}` : key;
    if (child.properties && !shape.samples?.[path]) {
      doc[key] = validDocument(r, shape, child, path);
      continue;
    }
    const itemSamples = shape.samples?.[`${path}[]`];
    if (child.items && itemSamples) {
      doc[key] = Array.from({ length: r.between(1, 3) }, () => r.pick(itemSamples));
      continue;
    }
    const valid = validValue(r, shape, path);
    if (valid) doc[key] = valid.value;
  }
  return doc;
}

/** Every mapping / list position of a document, to change one of them. */
function positions(value: unknown, out: Array<{ parent: Record<string, unknown> | unknown[]; key: string | number }> = []) {
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      out.push({ parent: value, key: i });
      positions(item, out);
    });
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      out.push({ parent: value as Record<string, unknown>, key });
      positions(item, out);
    }
  }
  return out;
}

/** A path into the schema's mappings where a random key can go. */
function randomMappingPath(r: Rng, schema: SchemaLike): string[] {
  const path: string[] = [];
  let node = schema;
  while (node.properties && r.chance(0.6)) {
    const entries = Object.entries(node.properties).filter(([, child]) => child.properties);
    if (entries.length === 0) break;
    const [key, child] = r.pick(entries);
    path.push(key);
    node = child;
  }
  return path;
}

function nest(path: readonly string[], value: unknown): unknown {
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value);
}

function emit(r: Rng, doc: unknown): string {
  // JSON is YAML too; the yaml package writes Infinity / NaN as .inf / .nan.
  if (r.chance(0.15)) return JSON.stringify(doc) ?? 'null';
  return stringify(doc, { lineWidth: 0 });
}

const TOKENS = [':', ': ', '- ', '-', '[', ']', '{', '}', ',', '&a ', '*a', '&b ', '*b', '!!str ', '!!int ', '!!map ', '!!binary ', '!custom ', '|', '>-', "'", '"', '#', '\n', '\n  ', '\n    ', '  ', '\t', '---\n', '...\n', '%YAML 1.2\n', '%TAG ! tag:x,2000:\n', '? ', '<<: ', '@', '`', '%'];

/** One configuration file. */
export function configText(r: Rng, shape: ConfigShape): ConfigText {
  const keys = schemaPaths(shape.schema).filter((p) => !p.includes('[]'));
  const leafKey = () => r.pick(keys).split('.').at(-1) as string;
  switch (r.int(17)) {
    case 0:
      return { kind: 'random bytes', content: r.bytes(r.int(2000)) };
    case 1: {
      const words = [...TOKENS, ...YAML_WORDS, ...DURATIONS.slice(0, 8)];
      const parts = Array.from({ length: r.int(80) }, () => (r.chance(0.3) ? `${leafKey()}: ` : r.pick(words)));
      return { kind: 'token soup', content: parts.join(r.pick(['', ' ', '\n'])) };
    }
    case 2: {
      // Valid YAML, wrong types: random values under the schema's own keys.
      const doc: Record<string, unknown> = {};
      for (let i = r.int(6); i >= 0; i--) {
        const path = r.pick(keys).split('.');
        const value = randomValue(r);
        let target = doc;
        for (const key of path.slice(0, -1)) target = (target[key] = typeof target[key] === 'object' && target[key] !== null && !Array.isArray(target[key]) ? target[key] : {}) as Record<string, unknown>;
        target[path.at(-1) as string] = value;
      }
      return { kind: 'wrong types', content: emit(r, doc) };
    }
    case 3: {
      const depth = r.pick([50, 300, 1000, 3000]);
      const under = randomMappingPath(r, shape.schema);
      const indent = (i: number) => ' '.repeat(i);
      if (r.chance(0.5)) {
        const flow = r.chance(0.5) ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{a: '.repeat(depth)}1${'}'.repeat(depth)}`;
        return { kind: `deep flow nesting (${depth})`, content: emit(r, nest(under, 'PLACEHOLDER')).replace(/"?PLACEHOLDER"?/, flow) };
      }
      const lines = Array.from({ length: Math.min(depth, 600) }, (_, i) => `${indent(i)}${r.chance(0.5) ? 'a:' : '-'}`);
      return { kind: `deep block nesting (${lines.length})`, content: lines.join('\n') };
    }
    case 4: {
      // "Billion laughs": each anchor aliases the previous one ten times.
      const levels = r.between(5, 12);
      const lines = ['l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
      for (let i = 1; i < levels; i++) lines.push(`l${i}: &l${i} [${Array(10).fill(`*l${i - 1}`).join(', ')}]`);
      const under = randomMappingPath(r, shape.schema);
      const body = lines.join('\n');
      if (under.length === 0) return { kind: 'alias bomb', content: body };
      return { kind: `alias bomb under ${under.join('.')}`, content: `${under.map((k, i) => `${'  '.repeat(i)}${k}:`).join('\n')}\n${body.replace(/^/gm, '  '.repeat(under.length))}` };
    }
    case 5: {
      // One big anchored mapping, aliased many times.
      const size = r.pick([50, 300]);
      const copies = r.pick([10, 99, 150]);
      const base = `base: &big {${Array.from({ length: size }, (_, i) => `k${i}: ${i}`).join(', ')}}`;
      const refs = Array.from({ length: copies }, (_, i) => `${r.chance(0.5) ? 'r' : leafKey()}${i}: *big`);
      return { kind: `wide alias (${size} keys x ${copies})`, content: [base, ...refs].join('\n') };
    }
    case 6: {
      // An alias inside its own anchor: a cycle.
      const key = r.chance(0.5) ? r.pick(keys) : randomString(r, 5).replace(/\W/g, '') || 'x';
      const path = key.split('.');
      const text = [
        `${path[0]}: &c\n  ${path[1] ?? 'child'}: *c`,
        `${path[0]}: &c [*c]`,
        `&c\n${path[0]}: *c`,
        `${path[0]}:\n  ${path[1] ?? 'a'}: &c\n    x: [1, *c]`,
      ];
      return { kind: 'alias cycle', content: r.pick(text) };
    }
    case 7: {
      const size = r.pick([10_000, 100_000, 1_000_000]);
      const huge = r.pick(['x', 'é', ' ', '9']).repeat(size);
      const where = r.int(3);
      if (where === 0) return { kind: 'huge value', content: emit(r, nest(r.pick(keys).split('.'), huge)) };
      if (where === 1) return { kind: 'huge key', content: `${huge}: 1\n` };
      return { kind: 'huge comment', content: `# ${huge}\n${leafKey()}: 1\n` };
    }
    case 8:
      return { kind: 'multiple documents', content: `${leafKey()}: 1\n---\n${leafKey()}: 2\n` };
    case 9: {
      const tag = r.pick(['!!binary aGVsbG8=', '!!set {a, b}', '!!omap [a: 1]', '!!timestamp 2001-12-14', '!custom x', '!!js/function "f"', '!!str 10s', '!!int "5"', '!!float 1', '!!null', '!!bool yes', '!<tag:yaml.org,2002:str> x']);
      const v11 = r.chance(0.5) ? '%YAML 1.1\n---\n' : '';
      return { kind: `tag ${tag}${v11 ? ' (YAML 1.1)' : ''}`, content: `${v11}${emit(r, nest(r.pick(keys).split('.'), 'PLACEHOLDER')).replace(/"?PLACEHOLDER"?/, tag)}` };
    }
    case 10: {
      const key = leafKey();
      return { kind: 'duplicate key', content: `${key}: 1\n${key}: 2\n` };
    }
    case 11: {
      const path = r.pick(keys).split('.');
      return { kind: 'merge key', content: `base: &b\n  ${path.at(-1)}: x\n${path[0]}:\n  <<: *b\n` };
    }
    case 12: {
      // Unknown keys at every level of an otherwise valid document.
      const doc = validDocument(r, shape);
      const at = positions(doc).filter((p) => typeof p.parent === 'object' && !Array.isArray(p.parent));
      const target = at.length > 0 && r.chance(0.8) ? (r.pick(at).parent as Record<string, unknown>) : doc;
      target[r.chance(0.5) ? randomString(r, 10) : r.pick(['__proto__', 'constructor', 'toString', 'hasOwnProperty', '<<', ''])] = randomValue(r, 1);
      return { kind: 'unknown key', content: emit(r, doc) };
    }
    case 13:
    case 14: {
      // A valid document with one value replaced.
      const doc = validDocument(r, shape);
      const at = positions(doc);
      if (at.length === 0) return { kind: 'valid (empty)', content: emit(r, doc) };
      const { parent, key } = r.pick(at);
      (parent as Record<string | number, unknown>)[key] = randomValue(r);
      return { kind: 'one field mutated', content: emit(r, doc) };
    }
    case 15: {
      // A scalar, list or nothing at the top level.
      return { kind: 'not a mapping', content: r.pick(['', '\n', '# only a comment\n', '~', 'null', '42', '"text"', '- a\n- b\n', '[]', '{}', '---\n', '...\n', 'true']) };
    }
    default:
      return { kind: 'valid', content: emit(r, validDocument(r, shape)) };
  }
}

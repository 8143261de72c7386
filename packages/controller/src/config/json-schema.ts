import { z } from 'zod';
import { configSchema } from './schema.js';

/**
 * The input-side JSON schema of the configuration: the single source for the generated docs and
 * for describing allowed values in error messages (so both say the same thing).
 */
export interface JsonSchemaNode {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  maxLength?: number;
  minItems?: number;
  properties?: Record<string, JsonSchemaNode>;
  items?: JsonSchemaNode;
  additionalProperties?: JsonSchemaNode | boolean;
  propertyNames?: JsonSchemaNode;
  required?: string[];
  'x-allowed'?: string;
  'x-duration'?: boolean;
}

export function configJsonSchema(): JsonSchemaNode {
  return z.toJSONSchema(configSchema, {
    io: 'input',
    unrepresentable: 'any',
    // zod leaves out the default of a field whose value contains a transform (the profiles' durations)
    // in input mode; the default is what a user leaves out, so it is said all the same.
    override: (ctx) => {
      const def = ctx.zodSchema._zod.def as { type: string; defaultValue?: unknown };
      if (def.type === 'default' && ctx.jsonSchema.default === undefined) ctx.jsonSchema.default = structuredClone(def.defaultValue);
    },
  }) as JsonSchemaNode;
}

/** The schema node at a zod issue path (array indexes step into `items`). */
export function schemaAt(root: JsonSchemaNode, path: readonly PropertyKey[]): JsonSchemaNode | undefined {
  let node: JsonSchemaNode | undefined = root;
  for (const segment of path) {
    if (!node) return undefined;
    if (typeof segment === 'number') node = node.items;
    else if (node.properties && typeof segment === 'string' && segment in node.properties) node = node.properties[segment];
    else if (typeof node.additionalProperties === 'object') node = node.additionalProperties;
    else return undefined;
  }
  return node;
}

/** zod writes the safe-integer range as bounds of every integer; those are not worth showing. */
function bounded(value: number | undefined): number | undefined {
  return value !== undefined && Math.abs(value) < Number.MAX_SAFE_INTEGER ? value : undefined;
}

/** "an integer >= 0", "one of "json", "pretty"", "a duration like ..." */
export function describeAllowed(node: JsonSchemaNode | undefined): string {
  if (!node) return 'a valid value';
  if (node['x-allowed']) return node['x-allowed'];
  if (node.enum) return `one of ${node.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  const type = Array.isArray(node.type) ? node.type[0] : node.type;
  switch (type) {
    case 'integer':
    case 'number': {
      const noun = type === 'integer' ? 'an integer' : 'a number';
      const lower = bounded(node.minimum);
      const max = bounded(node.maximum);
      if (node.exclusiveMinimum !== undefined) {
        return max !== undefined ? `${noun} > ${node.exclusiveMinimum} and <= ${max}` : `${noun} > ${node.exclusiveMinimum}`;
      }
      if (lower !== undefined && max !== undefined) return `${noun} between ${lower} and ${max}`;
      if (lower !== undefined) return `${noun} >= ${lower}`;
      if (max !== undefined) return `${noun} <= ${max}`;
      return noun;
    }
    case 'boolean':
      return 'true or false';
    case 'string':
      return 'a string';
    case 'array':
      return node.minItems ? `a list of at least ${node.minItems}` : 'a list';
    case 'object':
      return 'a mapping';
    default:
      return 'a valid value';
  }
}

/** Short type name for the docs table. */
export function typeName(node: JsonSchemaNode): string {
  if (node['x-duration']) return 'duration';
  if (node.enum) return 'enum';
  const type = Array.isArray(node.type) ? node.type.join(' | ') : (node.type ?? 'any');
  if (type === 'array' && node.items) {
    return node.items.properties ? 'list of objects' : `list of ${typeName(node.items)}`;
  }
  if (type === 'object' && !node.properties) return 'map';
  return type;
}

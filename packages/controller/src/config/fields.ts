import { MAX_DURATION_MS, parseDuration } from '@kube-node-ready/core';
import { z } from 'zod';

/**
 * Field builders shared by the configuration schemas (config/schema.ts and the remediation
 * section), in a module of their own so the section schemas can use them without an import cycle.
 */

/** Metadata keys we add to the JSON schema (read by docs.ts and the error formatter). */
export interface FieldMeta {
  description: string;
  /** Human wording of the allowed values where the type alone does not say it. */
  'x-allowed'?: string;
  /** The field is a duration string. */
  'x-duration'?: true;
  [key: string]: unknown;
}

export const DURATION_ALLOWED = 'a duration like "500ms", "10s", "2m" or "1h30m"';

/**
 * A duration string parsed to milliseconds; default given as a string, as users write it.
 * `min` is a lower bound; with `zeroAllowed`, "0" is accepted below it (the setting is off).
 */
export function duration(defaultValue: string, description: string, opts: { min?: number; zeroAllowed?: boolean } = {}) {
  return z
    .string()
    .transform((text, ctx) => {
      let ms: number;
      try {
        ms = parseDuration(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: `expected ${DURATION_ALLOWED}`, input: text });
        return z.NEVER;
      }
      if (ms > MAX_DURATION_MS) {
        ctx.addIssue({ code: 'custom', message: 'expected a duration of at most 596h (the longest timer Node.js can set)', input: text });
        return z.NEVER;
      }
      if (opts.min !== undefined && ms < opts.min && !(opts.zeroAllowed && ms === 0)) {
        ctx.addIssue({ code: 'custom', message: `expected a duration of at least ${opts.min}ms${opts.zeroAllowed ? ' (or 0 to turn it off)' : ''}`, input: text });
        return z.NEVER;
      }
      return ms;
    })
    .prefault(defaultValue)
    .meta({ description, 'x-duration': true, 'x-allowed': DURATION_ALLOWED } satisfies FieldMeta);
}

/** An integer with a default, a lower and an optional upper bound. */
export const int = (defaultValue: number, description: string, min: number, max?: number) => {
  let schema = z.number().int().min(min);
  if (max !== undefined) schema = schema.max(max);
  return schema.default(defaultValue).meta({ description });
};

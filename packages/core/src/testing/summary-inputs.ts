import type { CheckSummary, WorkerSummary } from '../summary.js';
import type { Rng } from './fuzz.js';

/**
 * Termination messages for fuzz tests of parseSummary and of the controller reading a worker pod:
 * valid summaries, and every kind of unusable text (docs/worker.md, "Termination message").
 */

/** The summary format of docs/worker.md, checked by hand (independently of summary.ts's schema). */
export function isValidSummaryDoc(doc: unknown): doc is WorkerSummary {
  if (!isObject(doc)) return false;
  const optionalString = (v: unknown) => v === undefined || typeof v === 'string';
  const check = (c: unknown) =>
    isObject(c) && typeof c.name === 'string' && typeof c.ok === 'boolean' && Number.isFinite(c.durationMs) && optionalString(c.error);
  return (
    doc.v === 1 &&
    typeof doc.ok === 'boolean' &&
    optionalString(doc.node) &&
    Number.isFinite(doc.durationMs) &&
    Array.isArray(doc.checks) &&
    doc.checks.every(check) &&
    optionalString(doc.error) &&
    (doc.omittedChecks === undefined || (Number.isSafeInteger(doc.omittedChecks) && (doc.omittedChecks as number) >= 0))
  );
}

/** The summary parseSummary should return for a valid document: its known keys only. */
export function knownKeys(doc: WorkerSummary): WorkerSummary {
  const pick = <T extends object>(o: T, keys: readonly (keyof T)[]) =>
    Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) as T;
  return {
    ...pick(doc, ['v', 'ok', 'node', 'durationMs', 'error', 'omittedChecks']),
    checks: doc.checks.map((c) => pick<CheckSummary>(c, ['name', 'ok', 'durationMs', 'error'])),
  };
}

// ASCII, multibyte UTF-8, characters JSON escapes, a lone surrogate, a NUL.
const CHARS = ['a', 'Z', '7', ' ', '.', ':', 'é', 'ж', '中', '😀', '"', '\\', '\n', '\t', '\u0001', '\ud800', '\udc00', '\u0000', '…'];

export function randomText(r: Rng, maxLength: number): string {
  let out = '';
  const length = r.int(maxLength + 1);
  for (let i = 0; i < length; i++) out += r.pick(CHARS);
  return out;
}

export function randomSummary(r: Rng, opts: { maxChecks?: number; maxText?: number } = {}): WorkerSummary {
  const maxText = opts.maxText ?? 40;
  const checks: CheckSummary[] = Array.from({ length: r.int((opts.maxChecks ?? 8) + 1) }, () => {
    const ok = r.chance(0.6);
    return {
      name: r.chance(0.8) ? r.pick(['dns', 'api', 'tcp', 'service', 'podnet']) : randomText(r, 12),
      ok,
      durationMs: r.int(100_000),
      ...(!ok && r.chance(0.8) ? { error: randomText(r, maxText) } : {}),
    };
  });
  return {
    v: 1,
    ok: r.chance(0.3) ? r.chance(0.5) : checks.every((c) => c.ok),
    ...(r.chance(0.7) ? { node: randomText(r, 30) } : {}),
    durationMs: r.int(1_000_000),
    checks,
    ...(r.chance(0.2) ? { error: randomText(r, maxText) } : {}),
    ...(r.chance(0.1) ? { omittedChecks: r.between(1, 5) } : {}),
  };
}

/** Any JSON value, of the given maximum depth. */
export function randomJson(r: Rng, depth = 3): unknown {
  switch (r.int(depth > 0 ? 9 : 7)) {
    case 0:
      return null;
    case 1:
      return r.chance(0.5);
    case 2:
      return r.pick([0, -1, 1, 1.5, -0.5, 2 ** 53, 1e300, -1e300, 4096, Number.MAX_SAFE_INTEGER]);
    case 3:
      return r.int(1000) - 500;
    case 4:
      return randomText(r, 20);
    case 5:
      return r.pick(['1', 'true', 'null', '', ' ', 'NaN', 'Infinity', '1e999']);
    case 6:
      return 1;
    case 7:
      return Array.from({ length: r.int(4) }, () => randomJson(r, depth - 1));
    default:
      return Object.fromEntries(Array.from({ length: r.int(4) }, () => [r.pick(['v', 'ok', 'checks', 'name', 'x', randomText(r, 5)]), randomJson(r, depth - 1)]));
  }
}

/** A valid summary with one field changed, dropped or added, anywhere in it (may stay valid). */
export function mutatedSummary(r: Rng): unknown {
  const doc = JSON.parse(JSON.stringify(randomSummary(r))) as Record<string, unknown> & { checks: Record<string, unknown>[] };
  const target: Record<string, unknown> = doc.checks.length > 0 && r.chance(0.4) ? r.pick(doc.checks) : doc;
  const keys = target === doc ? ['v', 'ok', 'node', 'durationMs', 'checks', 'error', 'omittedChecks'] : ['name', 'ok', 'durationMs', 'error'];
  const key = r.chance(0.1) ? randomText(r, 6) : r.pick(keys);
  if (r.chance(0.2)) delete target[key];
  else target[key] = randomJson(r);
  return doc;
}

/** JSON text in which a number is written the way JSON.stringify never writes it (1e999, -0, 1E+2). */
function oddNumbers(r: Rng, text: string): string {
  return text.replace(/"durationMs":\d+/, `"durationMs":${r.pick(['1e999', '-1e999', '-0', '1E+2', '0.0000001', '123456789012345678901234567890'])}`);
}

const TOKENS = ['{', '}', '[', ']', ',', ':', '"v"', '"ok"', '"checks"', '"durationMs"', '"name"', '1', '0', '-1', 'true', 'false', 'null', '"x"', ' ', '\n', '"', '\\', '1e999', 'NaN', '//', '\u00a0', '\ufeff'];

/** One termination message: valid or not, of any of the kinds above. `kind` says which. */
export function terminationMessage(r: Rng): { kind: string; text: string } {
  switch (r.int(12)) {
    case 0:
      return { kind: 'valid summary', text: JSON.stringify(randomSummary(r)) };
    case 1:
      return { kind: 'mutated summary', text: JSON.stringify(mutatedSummary(r)) };
    case 2: {
      const full = JSON.stringify(randomSummary(r));
      return { kind: 'truncated summary', text: full.slice(0, r.int(full.length)) };
    }
    case 3:
      return { kind: 'random bytes', text: r.bytes(r.int(300)).toString(r.pick(['utf8', 'latin1'] as const)) };
    case 4:
      return { kind: 'token soup', text: Array.from({ length: r.int(60) }, () => r.pick(TOKENS)).join('') };
    case 5:
      return { kind: 'wrong shape', text: JSON.stringify(randomJson(r, 4)) ?? 'null' };
    case 6: {
      const huge = 'x'.repeat(r.pick([4096, 100_000, 1_000_000]));
      const where = r.int(4);
      const s = randomSummary(r);
      if (where === 0) return { kind: 'huge string', text: huge };
      if (where === 1) return { kind: 'huge error', text: JSON.stringify({ ...s, error: huge }) };
      if (where === 2) return { kind: 'huge version', text: JSON.stringify({ ...s, v: huge }) };
      return { kind: 'huge check name', text: JSON.stringify({ ...s, checks: [{ name: huge, ok: true, durationMs: 1 }] }) };
    }
    case 7: {
      const depth = r.pick([100, 10_000, 200_000]);
      const nested = `${'['.repeat(depth)}${']'.repeat(depth)}`;
      const s = JSON.stringify(randomSummary(r));
      const key = r.pick(['v', 'ok', 'durationMs', 'checks', 'node', 'error', 'omittedChecks', 'extra']);
      // After the summary's own keys: JSON.parse keeps the last of duplicate keys.
      return { kind: `deeply nested ${key}`, text: r.chance(0.2) ? nested : `${s.slice(0, -1)},"${key}":${nested}}` };
    }
    case 8:
      return { kind: 'odd number', text: oddNumbers(r, JSON.stringify(randomSummary(r))) };
    case 9:
      return { kind: 'whitespace around a summary', text: `${r.pick([' ', '\n', '\t', '\ufeff'])}${JSON.stringify(randomSummary(r))}${r.pick([' ', '\n', ''])}` };
    case 10:
      return { kind: 'two summaries', text: JSON.stringify(randomSummary(r)) + JSON.stringify(randomSummary(r)) };
    default:
      return { kind: 'empty or blank', text: r.pick(['', ' ', '\n\n', '\t', 'null', '""', '{}', '[]']) };
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

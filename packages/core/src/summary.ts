import * as z from 'zod/mini';

/**
 * The worker's termination message: a compact JSON summary the controller reads from the
 * terminated container's status instead of the logs. The kubelet keeps at most 4096 bytes of it,
 * so encodeSummary never produces more (docs/worker.md, "Summary").
 */
export const SUMMARY_MAX_BYTES = 4096;

export interface CheckSummary {
  name: string;
  ok: boolean;
  durationMs: number;
  /** The check's error (possibly truncated), only on failed checks. */
  error?: string;
  /**
   * What the failed check failed against (`10.96.0.10:53`), where the check knows it. Optional:
   * readers that do not know the field ignore it. Cut and dropped with the errors for space.
   */
  target?: string;
  /**
   * The HTTP status the Kubernetes API answered with, when that answer is what failed the check
   * (`503`, `429`): the node reached the API, the API refused. Optional like `target`.
   */
  httpStatus?: number;
  /**
   * The Services (`namespace/name`) whose EndpointSlices, read from the API, list no ready endpoint,
   * when that alone failed the check: a fact about the cluster, not about the node. Optional like `target`.
   */
  noReadyEndpoints?: string[];
}

export interface WorkerSummary {
  v: 1;
  ok: boolean;
  node?: string;
  durationMs: number;
  checks: CheckSummary[];
  /** A failure of the worker itself (configuration, internal error), not of one check. */
  error?: string;
  /** Checks left out to fit the size limit (failed checks are kept first). */
  omittedChecks?: number;
  /**
   * Findings that did not fail the node, each prefixed with its check ("dns: ... slow: 3.5s ...").
   * Optional: readers that do not know the field ignore it. They give way to errors for space.
   */
  warnings?: string[];
}

export type SummaryParse = { ok: true; summary: WorkerSummary } | { ok: false; reason: string };

const ELLIPSIS = '…';

/**
 * Serializes a summary in at most SUMMARY_MAX_BYTES bytes of UTF-8. When the full summary is too
 * large it keeps as much of every error as fits (the same cap for all errors, found by bisection),
 * then drops passed checks, then failed ones from the end, then the node name.
 */
export function encodeSummary(summary: WorkerSummary): string {
  const full = serialize(summary);
  if (fits(full)) return full;
  if (summary.warnings !== undefined) {
    // Errors first: warnings (each cut short) are kept in order while the errors still fit whole.
    const { warnings, ...rest } = summary;
    let text = serialize(rest);
    if (!fits(text)) return encodeErrors(rest);
    const kept: string[] = [];
    for (const warning of warnings) {
      const candidate = serialize({ ...rest, warnings: [...kept, truncate(warning, MAX_WARNING_CODE_POINTS)] });
      if (!fits(candidate)) break;
      kept.push(truncate(warning, MAX_WARNING_CODE_POINTS));
      text = candidate;
    }
    return text;
  }
  return encodeErrors(summary);
}

/** Longest warning kept when the summary has to be shortened. */
const MAX_WARNING_CODE_POINTS = 300;

function encodeErrors(summary: WorkerSummary): string {
  const full = serialize(summary);
  if (fits(full)) return full;

  // No error longer than the whole budget can survive: clip first, so each trial below is cheap.
  const clipped = capErrors(summary, SUMMARY_MAX_BYTES);
  const longest = Math.max(0, ...textsOf(clipped).map(codePointLength));
  const best = largestFitting(longest, (cap) => fits(serialize(capErrors(clipped, cap))));
  if (best !== undefined) return serialize(capErrors(clipped, best));

  // Even without error texts it is too large: keep failed checks (they say why), drop the rest.
  const bare = capErrors(summary, 0);
  const ordered = [...bare.checks.filter((c) => !c.ok), ...bare.checks.filter((c) => c.ok)];
  for (let keep = ordered.length - 1; keep >= 0; keep--) {
    const kept = new Set(ordered.slice(0, keep));
    const candidate: WorkerSummary = {
      ...bare,
      checks: bare.checks.filter((c) => kept.has(c)),
      omittedChecks: (summary.omittedChecks ?? 0) + summary.checks.length - keep,
    };
    const text = serialize(candidate);
    if (fits(text)) return text;
  }
  // Only an absurd node name (or omittedChecks) can get here; drop everything optional.
  return serialize({
    v: 1,
    ok: summary.ok,
    durationMs: finiteOr0(summary.durationMs),
    checks: [],
    omittedChecks: (summary.omittedChecks ?? 0) + summary.checks.length,
    error: 'summary truncated',
  });
}

/** Reads a termination message. Never throws: anything unusable comes back as a reason. */
export function parseSummary(text: string): SummaryParse {
  if (typeof text !== 'string' || text.trim() === '') return { ok: false, reason: 'empty termination message' };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { ok: false, reason: `termination message is not JSON: ${JSON.stringify(truncate(text, 60))}` };
  }
  const result = summarySchema.safeParse(doc);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : 'summary';
    return { ok: false, reason: `invalid summary: ${where}: ${issue?.message ?? 'does not match the format'}` };
  }
  return { ok: true, summary: result.data };
}

// Unknown keys are ignored (a newer worker may add some); `v` is the compatibility switch.
// zod/mini: the worker loads this module at start-up, and the full zod API would add to its memory
// (docs/worker.md, "Start-up cost").
const checkSchema = z.object({
  name: z.string({ error: 'expected a string' }),
  ok: z.boolean({ error: 'expected a boolean' }),
  durationMs: z.number({ error: 'expected a number' }),
  error: z.optional(z.string({ error: 'expected a string' })),
  target: z.optional(z.string({ error: 'expected a string' })),
  httpStatus: z.optional(z.int({ error: 'expected a whole number' })),
  noReadyEndpoints: z.optional(z.array(z.string({ error: 'expected a string' }), { error: 'expected a list' })),
});
const summarySchema = z.object(
  {
    v: z.literal(1, { error: (issue) => `unsupported summary version ${showValue(issue.input)}` }),
    ok: z.boolean({ error: 'expected a boolean' }),
    node: z.optional(z.string({ error: 'expected a string' })),
    durationMs: z.number({ error: 'expected a number' }),
    checks: z.array(checkSchema, { error: 'expected a list' }),
    error: z.optional(z.string({ error: 'expected a string' })),
    omittedChecks: z.optional(z.int({ error: 'expected a whole number' }).check(z.nonnegative({ error: 'expected a whole number' }))),
    warnings: z.optional(z.array(z.string({ error: 'expected a string' }), { error: 'expected a list' })),
  },
  { error: 'expected a JSON object' },
);

/**
 * A value for a reason, short whatever it is: a worker's message can hold a huge string, or lists
 * nested too deeply for JSON.stringify (which then throws a RangeError).
 */
function showValue(value: unknown): string {
  if (Array.isArray(value)) return '(a list)';
  if (typeof value === 'object' && value !== null) return '(an object)';
  if (typeof value === 'string') return JSON.stringify(truncate(value, 40));
  return String(value);
}

function serialize(summary: WorkerSummary): string {
  const ordered: WorkerSummary = {
    v: 1,
    ok: summary.ok,
    ...(summary.node !== undefined ? { node: summary.node } : {}),
    durationMs: finiteOr0(summary.durationMs),
    checks: summary.checks.map((c) => ({
      name: c.name,
      ok: c.ok,
      durationMs: finiteOr0(c.durationMs),
      ...(c.error !== undefined ? { error: c.error } : {}),
      ...(c.target !== undefined ? { target: c.target } : {}),
      ...(c.httpStatus !== undefined ? { httpStatus: c.httpStatus } : {}),
      ...(c.noReadyEndpoints !== undefined ? { noReadyEndpoints: c.noReadyEndpoints } : {}),
    })),
    ...(summary.error !== undefined ? { error: summary.error } : {}),
    ...(summary.omittedChecks ? { omittedChecks: summary.omittedChecks } : {}),
    ...(summary.warnings !== undefined && summary.warnings.length > 0 ? { warnings: summary.warnings } : {}),
  };
  return JSON.stringify(ordered);
}

function fits(text: string): boolean {
  return Buffer.byteLength(text, 'utf8') <= SUMMARY_MAX_BYTES;
}

function textsOf(summary: WorkerSummary): string[] {
  const texts = summary.checks.flatMap((c) => [c.error, c.target].filter((t) => t !== undefined));
  if (summary.error !== undefined) texts.push(summary.error);
  return texts;
}

/**
 * Every error text and target cut to `cap` code points; with cap 0 those fields are left out, and
 * so are the Service names of `noReadyEndpoints` (kept whole otherwise: a cut name names nothing).
 */
function capErrors(summary: WorkerSummary, cap: number): WorkerSummary {
  const { error, ...rest } = summary;
  return {
    ...rest,
    checks: summary.checks.map(({ error: checkError, target, noReadyEndpoints, ...check }) => ({
      ...check,
      ...(checkError !== undefined && cap > 0 ? { error: truncate(checkError, cap) } : {}),
      ...(target !== undefined && cap > 0 ? { target: truncate(target, cap) } : {}),
      ...(noReadyEndpoints !== undefined && cap > 0 ? { noReadyEndpoints } : {}),
    })),
    ...(error !== undefined && cap > 0 ? { error: truncate(error, cap) } : {}),
  };
}

/** Largest n in [0, max] with ok(n), assuming ok is monotone (true up to some n). */
function largestFitting(max: number, ok: (n: number) => boolean): number | undefined {
  if (!ok(0)) return undefined;
  let lo = 0;
  let hi = max;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (ok(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Cuts at a code point boundary (never inside a surrogate pair), marking the cut with "…". */
function truncate(text: string, maxCodePoints: number): string {
  if (text.length <= maxCodePoints) return text; // UTF-16 units >= code points
  if (maxCodePoints <= 0) return '';
  let kept = '';
  let count = 0;
  for (const point of text) {
    if (count === maxCodePoints - 1) {
      // One more code point after this one means the text does not fit: cut here.
      return text.length > kept.length + point.length ? kept + ELLIPSIS : kept + point;
    }
    kept += point;
    count++;
  }
  return kept;
}

function codePointLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

function finiteOr0(n: number): number {
  return Number.isFinite(n) ? Math.round(n) : 0;
}

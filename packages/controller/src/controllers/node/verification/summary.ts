/**
 * The worker's termination-message summary, as the controller reads it.
 *
 * TODO(worker issue): the worker package is publishing `parseSummary` from @kube-node-ready/core
 * (packages/core/src/summary.ts) with exactly this shape. Until it lands this module holds a
 * faithful copy of the contract; then it becomes `export { parseSummary, type WorkerSummary } from
 * '@kube-node-ready/core'` and nothing else in the controller changes.
 */
export interface CheckSummary {
  name: string;
  ok: boolean;
  durationMs: number;
  error?: string;
}

export interface WorkerSummary {
  v: 1;
  ok: boolean;
  node?: string;
  durationMs: number;
  checks: CheckSummary[];
  error?: string;
}

export type SummaryParse = { ok: true; summary: WorkerSummary } | { ok: false; reason: string };

export function parseSummary(text: string): SummaryParse {
  if (text.trim() === '') return { ok: false, reason: 'empty termination message' };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { ok: false, reason: `termination message is not JSON: ${JSON.stringify(text.slice(0, 60))}` };
  }
  if (!isRecord(doc)) return { ok: false, reason: 'termination message is not a JSON object' };
  if (doc.v !== 1) return { ok: false, reason: `unsupported summary version ${JSON.stringify(doc.v)}` };
  if (typeof doc.ok !== 'boolean') return { ok: false, reason: 'summary has no boolean "ok"' };
  if (typeof doc.durationMs !== 'number') return { ok: false, reason: 'summary has no numeric "durationMs"' };
  if (!Array.isArray(doc.checks)) return { ok: false, reason: 'summary has no "checks" list' };
  const checks: CheckSummary[] = [];
  for (const [i, c] of doc.checks.entries()) {
    if (!isRecord(c) || typeof c.name !== 'string' || typeof c.ok !== 'boolean' || typeof c.durationMs !== 'number') {
      return { ok: false, reason: `summary check ${i} needs a string "name", boolean "ok" and numeric "durationMs"` };
    }
    checks.push({
      name: c.name,
      ok: c.ok,
      durationMs: c.durationMs,
      ...(typeof c.error === 'string' ? { error: c.error } : {}),
    });
  }
  return {
    ok: true,
    summary: {
      v: 1,
      ok: doc.ok,
      durationMs: doc.durationMs,
      checks,
      ...(typeof doc.node === 'string' ? { node: doc.node } : {}),
      ...(typeof doc.error === 'string' ? { error: doc.error } : {}),
    },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

import { describe, expect, it, vi } from 'vitest';
import { encodeSummary, parseSummary, SUMMARY_MAX_BYTES, type WorkerSummary } from './summary.js';
import { fuzz } from './testing/fuzz.js';
import { isValidSummaryDoc, knownKeys, randomSummary, randomText, terminationMessage } from './testing/summary-inputs.js';

// A wall-clock budget far above Vitest's default 5 s: the fuzz loops are bounded by count and by
// CPU time (hangAfterCpuMs), so their wall time says only how loaded the machine is.
vi.setConfig({ testTimeout: 120_000 });

/**
 * Fuzz tests of the termination-message format (seeded: a failure names its seed, and
 * KNR_FUZZ_SEED=<seed> replays that case alone). summary.test.ts already checks that encodeSummary
 * always fits 4096 bytes and stays parseable; these add what parseSummary makes of any text, and
 * what survives an encode / parse round trip.
 */

/** Longest reason parseSummary gives (it ends up in Events and node conditions). */
const MAX_REASON = 512;

function parseJson(text: string): { ok: true; doc: unknown } | { ok: false } {
  try {
    return { ok: true, doc: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

describe('parseSummary on any text (fuzz)', () => {
  it('never throws; accepts exactly the valid summaries, returning their known keys, and gives a short reason for the rest', () => {
    fuzz(
      0x5a0000,
      2000,
      (r) => {
        const { kind, text } = terminationMessage(r);
        const parsed = parseSummary(text);
        const json = parseJson(text);
        const valid = json.ok && isValidSummaryDoc(json.doc) ? json.doc : undefined;
        expect(parsed.ok, `${kind}: ${text.slice(0, 200)}`).toBe(valid !== undefined);
        if (parsed.ok) {
          expect(parsed.summary).toEqual(knownKeys(valid as WorkerSummary));
        } else {
          expect(parsed.reason.length, kind).toBeGreaterThan(0);
          expect(parsed.reason.length, `${kind}: reason ${parsed.reason.slice(0, 200)}`).toBeLessThanOrEqual(MAX_REASON);
        }
      },
      { hangAfterCpuMs: 20_000 },
    );
  }, 120_000);

  it('rejects every strict prefix of an encoded summary', () => {
    fuzz(
      0x5b0000,
      300,
      (r) => {
        const text = encodeSummary(randomSummary(r));
        for (let cut = 0; cut < text.length; cut += 1 + r.int(8)) {
          expect(parseSummary(text.slice(0, cut)).ok, `cut at ${cut}`).toBe(false);
        }
      },
      { hangAfterCpuMs: 20_000 },
    );
  });
});

describe('encodeSummary then parseSummary (fuzz)', () => {
  it('round-trips a summary that fits, and otherwise keeps the verdict, a faithful subset of the checks and a count of the rest', () => {
    fuzz(
      0x5c0000,
      1000,
      (r) => {
        const big = r.chance(0.3);
        const summary = randomSummary(r, big ? { maxChecks: 120, maxText: 3000 } : {});
        const text = encodeSummary(summary);
        expect(Buffer.byteLength(text, 'utf8')).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
        const parsed = parseSummary(text);
        if (!parsed.ok) throw new Error(`encoded summary does not parse: ${parsed.reason}`);
        const back = parsed.summary;
        if (Buffer.byteLength(JSON.stringify(summary), 'utf8') <= SUMMARY_MAX_BYTES) {
          expect(back).toEqual(knownKeys(summary));
          return;
        }
        expect(back.ok).toBe(summary.ok);
        expect(back.durationMs).toBe(summary.durationMs);
        expect(back.checks.length + (back.omittedChecks ?? 0) - (summary.omittedChecks ?? 0)).toBe(summary.checks.length);
        // Kept checks appear in their original order, with name, verdict and duration intact and
        // each error a prefix of the original (marked with "…" where cut).
        let from = 0;
        for (const check of back.checks) {
          const index = summary.checks.findIndex((c, i) => i >= from && c.name === check.name && c.ok === check.ok && c.durationMs === check.durationMs);
          expect(index, `check ${JSON.stringify(check.name)} is not one of the original checks, in order`).toBeGreaterThanOrEqual(0);
          const original = summary.checks[index]?.error;
          if (check.error !== undefined) {
            expect(original).toBeDefined();
            const kept = check.error === original ? original : check.error.replace(/…$/, '');
            expect(original?.startsWith(kept), `error ${JSON.stringify(check.error.slice(0, 40))} is not a prefix of the original`).toBe(true);
          }
          from = index + 1;
        }
        // A failed check is never dropped while a passed one is kept.
        const keptPassed = back.checks.some((c) => c.ok);
        const droppedFailed = summary.checks.filter((c) => !c.ok).length > back.checks.filter((c) => !c.ok).length;
        expect(keptPassed && droppedFailed, 'a passed check was kept while a failed one was dropped').toBe(false);
      },
      { hangAfterCpuMs: 20_000 },
    );
  }, 120_000);

  it('keeps the error texts parseable whatever characters they hold', () => {
    fuzz(
      0x5d0000,
      500,
      (r) => {
        const error = randomText(r, 5000);
        const text = encodeSummary({ v: 1, ok: false, durationMs: 1, checks: [{ name: 'dns', ok: false, durationMs: 1, error }] });
        const parsed = parseSummary(text);
        if (!parsed.ok) throw new Error(parsed.reason);
        const kept = parsed.summary.checks[0]?.error ?? '';
        expect(kept === error || error.startsWith(kept.replace(/…$/, ''))).toBe(true);
      },
      { hangAfterCpuMs: 20_000 },
    );
  });
});

describe('parseSummary regressions found by fuzzing', () => {
  it('keeps the reason short when "v" is a huge string (seed 5898264: the whole value was quoted)', () => {
    const parsed = parseSummary(JSON.stringify({ v: 'x'.repeat(100_000), ok: true, durationMs: 1, checks: [] }));
    expect(parsed).toEqual({ ok: false, reason: `invalid summary: v: unsupported summary version "${'x'.repeat(39)}…"` });
  });

  it('does not throw when "v" is a deeply nested list (JSON.stringify of it overflowed the stack)', () => {
    const depth = 200_000;
    const parsed = parseSummary(`{"v":${'['.repeat(depth)}${']'.repeat(depth)},"ok":true,"durationMs":1,"checks":[]}`);
    expect(parsed).toEqual({ ok: false, reason: 'invalid summary: v: unsupported summary version (a list)' });
  });
});

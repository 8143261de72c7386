import { describe, expect, it } from 'vitest';
import { encodeSummary, parseSummary, SUMMARY_MAX_BYTES, type WorkerSummary } from './summary.js';
import { rng } from './testing/random.js';

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

function summaryWith(checks: WorkerSummary['checks'], extra: Partial<WorkerSummary> = {}): WorkerSummary {
  return { v: 1, ok: checks.every((c) => c.ok), node: 'ip-10-0-1-23.ec2.internal', durationMs: 1234, checks, ...extra };
}

// ASCII, 2-, 3- and 4-byte UTF-8, characters JSON escapes (quote, backslash, control), a lone surrogate.
const ALPHABET = ['a', 'Z', '7', ' ', 'é', 'ж', '€', '中', '😀', '🚀', '"', '\\', '\n', '\u0001', '\ud800'];

function randomText(next: () => number, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[Math.floor(next() * ALPHABET.length)];
  return out;
}

describe('encodeSummary', () => {
  it('carries warnings, which older readers ignore and which give way to errors for space', () => {
    const warned = summaryWith([{ name: 'dns', ok: true, durationMs: 3500 }], { warnings: ['dns: kubernetes.default.svc.cluster.local @10.96.0.10:53: slow: 3.5s (over dns.slowAfter 1s)'] });
    expect(parseSummary(encodeSummary(warned))).toEqual({ ok: true, summary: warned });
    // A reader of the format without warnings (unknown keys are ignored) still accepts it.
    const { warnings: _ignored, ...withoutWarnings } = warned;
    expect(JSON.parse(encodeSummary(withoutWarnings))).not.toHaveProperty('warnings');

    const error = 'x'.repeat(3000);
    const crowded = summaryWith([{ name: 'tcp', ok: false, durationMs: 1, error }], { warnings: Array.from({ length: 20 }, (_, i) => `dns: warning ${i} ${'w'.repeat(200)}`) });
    const text = encodeSummary(crowded);
    expect(bytes(text)).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
    const parsed = parseSummary(text);
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(parsed.summary.checks[0]?.error).toBe(error);
    expect(parsed.summary.warnings?.length).toBeGreaterThan(0);
    expect(parsed.summary.warnings?.length).toBeLessThan(20);
    expect(parsed.summary.warnings?.[0]).toMatch(/^dns: warning 0 /);
  });

  it('keeps a small summary whole and parseSummary reads it back', () => {
    const summary = summaryWith([
      { name: 'dns', ok: true, durationMs: 12 },
      { name: 'api', ok: false, durationMs: 40, error: '403 Forbidden: services "kubernetes" is forbidden' },
    ]);
    const text = encodeSummary(summary);
    expect(JSON.parse(text)).toEqual(summary);
    expect(parseSummary(text)).toEqual({ ok: true, summary });
  });

  it('carries the target a check failed against, which older readers ignore, and fits it in the limit', () => {
    const failed = summaryWith([{ name: 'dns', ok: false, durationMs: 5000, error: 'kubernetes.default.svc.cluster.local @10.96.0.10:53: timeout', target: '10.96.0.10:53' }]);
    expect(parseSummary(encodeSummary(failed))).toEqual({ ok: true, summary: failed });
    // Without a target the check is written as before (older readers ignore the key anyway).
    expect(JSON.parse(encodeSummary(summaryWith([{ name: 'dns', ok: false, durationMs: 1, error: 'x' }])))).not.toHaveProperty('checks.0.target');

    const huge = summaryWith(Array.from({ length: 30 }, (_, i) => ({ name: `c${i}`, ok: false, durationMs: 1, error: 'e'.repeat(500), target: `10.0.0.${i}:53, ${'t'.repeat(300)}` })));
    const text = encodeSummary(huge);
    expect(bytes(text)).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
    const parsed = parseSummary(text);
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(parsed.summary.checks[0]?.target).toMatch(/^10\.0\.0\.0:53/);
  });

  it('carries the Services without a ready endpoint that alone failed a check, and reads them back', () => {
    const failed = summaryWith([{ name: 'service', ok: false, durationMs: 5, error: 'Service kube-system/kube-dns: no ready endpoints (no EndpointSlice)', noReadyEndpoints: ['kube-system/kube-dns'] }]);
    expect(parseSummary(encodeSummary(failed))).toEqual({ ok: true, summary: failed });
    expect(parseSummary(JSON.stringify({ ...JSON.parse(encodeSummary(failed)), checks: [{ name: 'service', ok: false, durationMs: 5, noReadyEndpoints: 'x' }] })).ok).toBe(false);
  });

  it('fits 50 checks failing with 10 KB multibyte errors, keeping a prefix of every error', () => {
    const error = '名前解決に失敗しました😀'.repeat(600); // > 10 KB of UTF-8
    const summary = summaryWith(Array.from({ length: 50 }, (_, i) => ({ name: `check-${i}`, ok: false, durationMs: i, error })));
    const text = encodeSummary(summary);
    expect(bytes(text)).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
    const parsed = parseSummary(text);
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(parsed.summary.checks).toHaveLength(50);
    for (const check of parsed.summary.checks) {
      expect(check.error?.endsWith('…')).toBe(true);
      expect(error.startsWith(check.error!.slice(0, -1))).toBe(true);
    }
    // Bisection uses the space: one more code point per error would not fit.
    expect(bytes(text)).toBeGreaterThan(SUMMARY_MAX_BYTES - 50 * 4 * 2);
  });

  it('drops passed checks before failed ones when even bare checks do not fit', () => {
    const checks = Array.from({ length: 200 }, (_, i) => ({
      name: `check-with-a-long-name-${i}`,
      ok: i % 10 !== 0,
      durationMs: 1000 + i,
      ...(i % 10 === 0 ? { error: 'x'.repeat(500) } : {}),
    }));
    const text = encodeSummary(summaryWith(checks));
    expect(bytes(text)).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
    const parsed = parseSummary(text);
    if (!parsed.ok) throw new Error(parsed.reason);
    const names = parsed.summary.checks.map((c) => c.name);
    for (let i = 0; i < 200; i += 10) expect(names).toContain(`check-with-a-long-name-${i}`);
    expect(parsed.summary.omittedChecks).toBe(200 - parsed.summary.checks.length);
    expect(parsed.summary.ok).toBe(false);
  });

  it('survives an absurd node name', () => {
    const text = encodeSummary(summaryWith([{ name: 'dns', ok: false, durationMs: 1, error: 'e' }], { node: 'n'.repeat(10_000) }));
    expect(bytes(text)).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
    expect(parseSummary(text)).toMatchObject({ ok: true, summary: { ok: false, omittedChecks: 1 } });
  });

  it('always fits 4096 bytes and stays parseable (random sizes and characters)', () => {
    const { next } = rng(20240601);
    for (let round = 0; round < 300; round++) {
      const count = Math.floor(next() * 80);
      const checks = Array.from({ length: count }, (_, i) => {
        const ok = next() < 0.4;
        const len = Math.floor(next() ** 3 * 12_000);
        return { name: `c${i}-${randomText(next, Math.floor(next() * 20))}`, ok, durationMs: Math.floor(next() * 1e6), ...(ok ? {} : { error: randomText(next, len) }) };
      });
      const extra = next() < 0.3 ? { error: randomText(next, Math.floor(next() * 9000)) } : {};
      const summary = summaryWith(checks, extra);
      const text = encodeSummary(summary);
      expect(bytes(text), `round ${round}`).toBeLessThanOrEqual(SUMMARY_MAX_BYTES);
      const parsed = parseSummary(text);
      expect(parsed.ok, `round ${round}`).toBe(true);
      if (parsed.ok) expect(parsed.summary.ok).toBe(summary.ok);
    }
    // 300 rounds of up to ~1 MB of input: a generous bound for a loaded CI machine (not a speed test).
  }, 60_000);
});

describe('parseSummary', () => {
  it.each([
    ['', /empty/],
    ['   \n', /empty/],
    ['not json', /not JSON/],
    ['null', /invalid summary/],
    ['[]', /invalid summary/],
    ['{"v":2,"ok":true,"durationMs":1,"checks":[]}', /unsupported summary version 2/],
    ['{"v":1,"ok":"yes","durationMs":1,"checks":[]}', /ok/],
    ['{"v":1,"ok":true,"durationMs":1}', /checks/],
    ['{"v":1,"ok":true,"durationMs":1,"checks":[{"name":"dns"}]}', /checks\.0\.ok/],
  ])('rejects %j with a reason', (text, reason) => {
    const parsed = parseSummary(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });

  it('ignores unknown keys from a newer worker', () => {
    expect(parseSummary('{"v":1,"ok":true,"durationMs":5,"checks":[],"extra":{"x":1}}')).toEqual({
      ok: true,
      summary: { v: 1, ok: true, durationMs: 5, checks: [] },
    });
  });

  it('never throws, whatever the input', () => {
    const { next } = rng(7);
    const inputs = ['{', '{"v":1', '"\\ud800"', '1e999', '{"__proto__":{"v":1}}', '{"v":1,"ok":true,"durationMs":1,"checks":null}'];
    for (let i = 0; i < 200; i++) inputs.push(randomText(next, Math.floor(next() * 50)));
    for (const input of inputs) expect(() => parseSummary(input)).not.toThrow();
    expect(() => parseSummary(undefined as unknown as string)).not.toThrow();
  });
});

import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseRemediationConfig, remediationSchema } from './config.js';

describe('remediation config', () => {
  it('pins every default (safe: dry run off only matters once deleteFailedNodes is on)', () => {
    expect(parseRemediationConfig({})).toEqual({
      dryRun: false,
      minNodeAge: 10 * 60_000,
      stuckNodeTimeout: 60 * 60_000,
      maxInFlight: 2,
      maxPerHour: 5,
      inFlightTimeout: 15 * 60_000,
      circuitBreaker: { enabled: true, window: 15 * 60_000, minSamples: 5, maxFailedPercent: 30, maxFailedPercentPerNodePool: 20 },
    });
    expect(parseRemediationConfig(undefined)).toEqual(parseRemediationConfig({}));
  });

  it('reads durations the Kubernetes way', () => {
    const c = parseRemediationConfig({ minNodeAge: '90s', stuckNodeTimeout: '1h30m', inFlightTimeout: '2m', circuitBreaker: { window: '5m' } });
    expect(c.minNodeAge).toBe(90_000);
    expect(c.stuckNodeTimeout).toBe(90 * 60_000);
    expect(c.inFlightTimeout).toBe(120_000);
    expect(c.circuitBreaker.window).toBe(300_000);
    expect(c.minNodeAge).toBe(90_000);
  });

  it('turns the stuck-node rule off with 0, and refuses a timeout under a minute otherwise', () => {
    expect(parseRemediationConfig({ stuckNodeTimeout: '0' }).stuckNodeTimeout).toBe(0);
    expect(parseRemediationConfig({ stuckNodeTimeout: '0s' }).stuckNodeTimeout).toBe(0);
    expect(() => parseRemediationConfig({ stuckNodeTimeout: '30s' })).toThrow(/at least 60000ms \(or 0 to turn it off\)/);
  });

  it.each([
    [{ maxInFligth: 1 }, /maxInFligth/],
    [{ circuitBreaker: { threshold: 10 } }, /threshold/],
    [{ maxInFlight: 0 }, /maxInFlight/],
    [{ maxPerHour: 1.5 }, /maxPerHour/],
    [{ circuitBreaker: { maxFailedPercent: 101 } }, /maxFailedPercent/],
    [{ circuitBreaker: { minSamples: 0 } }, /minSamples/],
    [{ minNodeAge: '10 minutes' }, /duration like/],
    [{ dryRun: 'yes' }, /dryRun/],
  ])('rejects %j', (input, message) => {
    let error: unknown;
    try {
      parseRemediationConfig(input);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(z.ZodError);
    const issues = (error as z.ZodError).issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('\n');
    expect(issues).toMatch(message);
  });

  it('documents every field for the generated docs and chart values (description, durations marked)', () => {
    const schema = z.toJSONSchema(remediationSchema, { io: 'input', unrepresentable: 'any' }) as {
      properties: Record<string, { description?: string; 'x-duration'?: boolean; default?: unknown; properties?: Record<string, { description?: string }> }>;
    };
    for (const [key, node] of Object.entries(schema.properties)) {
      expect(node.description, key).toBeTruthy();
      for (const [child, sub] of Object.entries(node.properties ?? {})) expect(sub.description, `${key}.${child}`).toBeTruthy();
    }
    expect(schema.properties.minNodeAge?.['x-duration']).toBe(true);
    expect(schema.properties.minNodeAge?.default).toBe('10m');
  });
});

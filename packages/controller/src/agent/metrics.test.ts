import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Outcome } from '../controllers/node/verification/types.js';
import { AgentMetrics } from './metrics.js';

const ownNames = async (m: AgentMetrics) => (await m.registry.getMetricsAsJSON()).map((x) => x.name).filter((n) => n.startsWith('node_check_'));

describe('AgentMetrics', () => {
  it('every series exists from the start, at 0, for the enabled checks', async () => {
    const m = new AgentMetrics('node-a', ['dns', 'api']);
    const text = await m.registry.metrics();
    expect(text).toContain('node_check_status{node="node-a"} 0');
    expect(text).toContain('node_check_completion_timestamp{node="node-a"} 0');
    expect(text).toContain('node_check_failures_total{node="node-a",check="dns"} 0');
    expect(text).toContain('node_check_attempts_total{node="node-a",result="interrupted"} 0');
    expect(await ownNames(m)).toEqual(expect.arrayContaining(['node_check_dns_duration_seconds', 'node_check_api_duration_seconds']));
  });

  it('an attempt sets the durations and counts failed checks; the end sets status and completion', async () => {
    const m = new AgentMetrics('node-a', ['dns', 'api']);
    const checks = [
      { name: 'dns', ok: false, durationMs: 1500, error: 'timeout' },
      { name: 'api', ok: true, durationMs: 20 },
    ];
    m.recordAttempt({ outcome: Outcome.ChecksFailed, message: 'x', failedChecks: ['dns'], checks, warnings: [] });
    m.recordEnded(false, 1_700_000_000_400);
    const text = await m.registry.metrics();
    expect(text).toContain('node_check_failures_total{node="node-a",check="dns"} 1');
    expect(text).toContain('node_check_failures_total{node="node-a",check="api"} 0');
    expect(text).toContain('node_check_dns_duration_seconds{node="node-a"} 1.5');
    expect(text).toContain('node_check_attempts_total{node="node-a",result="failed"} 1');
    expect(text).toContain('node_check_completion_timestamp{node="node-a"} 1700000000');
    m.recordRestarted();
    expect(await m.registry.metrics()).toContain('node_check_completion_timestamp{node="node-a"} 0');
  });

  it('docs/metrics.md documents every metric', async () => {
    const doc = readFileSync(fileURLToPath(new URL('../../../../docs/metrics.md', import.meta.url)), 'utf8');
    const names = (await ownNames(new AgentMetrics('n', ['dns']))).map((n) => n.replace('node_check_dns_', 'node_check_<check>_'));
    expect(names.filter((n) => !doc.includes(`\`${n}\``))).toEqual([]);
  });
});

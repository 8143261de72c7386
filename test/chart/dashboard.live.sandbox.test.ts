// Every panel of the chart's Grafana dashboard answers: after a burst with a healthy node, a failing
// one and its remediation, each panel query, run against a real Prometheus scraping the chart's
// controller, returns at least one series with a number (a panel showing "No data" is a bug).
// Grafana's variables are substituted as Grafana would: $namespace with the release's namespace,
// $__rate_interval with a window that covers the burst.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { core, waitFor } from '../sandbox.js';
import { CHART_DIR } from './helm.js';
import { installLiveRelease, type LiveRelease } from './live.js';

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string; legendFormat?: string }>;
}

const dashboard = JSON.parse(readFileSync(join(CHART_DIR, 'dashboards', 'kube-node-ready.json'), 'utf8')) as { panels: Panel[] };
const panels = dashboard.panels.filter((p) => p.type !== 'row');

let live: LiveRelease;

beforeAll(async () => {
  live = await installLiveRelease('dash', {
    config: { nodeManagement: { deleteFailedNodes: true, remediation: { minNodeAge: '0s' } } },
  });
  const healthy = await Promise.all(Array.from({ length: 3 }, () => live.addTaintedNode()));
  const broken = await live.addTaintedNode({ faults: { dns: 'dead' } });
  // The healthy nodes open; the broken one fails and remediation deletes it (no NodeClaim: the Node).
  await waitFor(
    async () => {
      const opened = await Promise.all(healthy.map(async (n) => (await core().readNode({ name: n })).metadata?.labels?.[live.verifiedLabel.key] === live.verifiedLabel.value));
      const deleted = await live.prometheus.query(`sum(kube_node_ready_remediations_total{namespace="${live.namespace}",result="deleted"})`);
      return opened.every(Boolean) && Number(deleted[0]?.value[1] ?? 0) >= 1;
    },
    `the healthy nodes verified and ${broken} remediated`,
    120_000,
    1000,
  ).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await live.describe()}`, { cause: err });
  });
}, 300_000);

afterAll(async () => {
  await live?.cleanup();
});

describe('the Grafana dashboard on a live Prometheus', () => {
  it('has the panels operators look for', () => {
    expect(panels.map((p) => p.title)).toEqual(
      expect.arrayContaining(['Nodes by phase', 'Time to verified', 'Failures by check', 'Attempts by outcome', 'Remediation actions', 'Remediation blocks', 'Circuit breaker', 'Leader', 'API requests', 'Client-side throttling', 'Controller memory']),
    );
  });

  it('every panel query returns series with values', async () => {
    const empty: string[] = [];
    for (const panel of panels) {
      for (const target of panel.targets ?? []) {
        const expr = target.expr.replaceAll('$namespace', live.namespace).replaceAll('$__rate_interval', '5m');
        const result = await live.prometheus.query(expr);
        const numbers = result.filter((s) => Number.isFinite(Number(s.value[1])));
        if (numbers.length === 0) empty.push(`${panel.title} [${target.legendFormat ?? ''}]: ${expr} -> ${JSON.stringify(result).slice(0, 300)}`);
      }
    }
    expect(empty, `panels without data:\n${empty.join('\n')}\n${await live.describe()}`).toEqual([]);
  });
});

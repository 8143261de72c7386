// The chart's alerts and dashboard on a real Prometheus scraping the real controller pods
// (docs/alerts.md, docs/operations.md#dashboard): a healthy burst fires nothing, a node that uses up
// its attempts fires KubeNodeReadyNodeVerificationFailed with its name, every dashboard panel then
// returns data, and a controller scaled to zero fires KubeNodeReadyControllerDown. The rules are the
// chart's; only their `for:` is shortened, through the chart's values (prometheusRule.alertFor), so a
// test waits seconds instead of minutes. One release for all of it, in order: two releases verifying
// nodes at once in one cluster would see each other's NodeVerifications and worker pods.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { core, waitFor } from '../sandbox.js';
import { CHART_DIR } from './helm.js';
import { alertLine, installLiveRelease, waitForAlert, type LiveRelease } from './live.js';

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string; legendFormat?: string }>;
}

const dashboard = JSON.parse(readFileSync(join(CHART_DIR, 'dashboards', 'kube-node-ready.json'), 'utf8')) as { panels: Panel[] };
const panels = dashboard.panels.filter((p) => p.type !== 'row');

let live: LiveRelease;

beforeAll(async () => {
  live = await installLiveRelease('alerts', {
    // Remediation on (its series and panels exist), with the default minNodeAge: the failed node stays.
    config: { nodeManagement: { deleteFailedNodes: true } },
    // Short `for:` so "a healthy burst fires nothing" means something within the test; 30 s for the
    // controller's own health, since a loaded 2-core machine can miss a few 2 s scrapes in a row
    // and a shorter `for:` would fire KubeNodeReadyControllerDown on a healthy controller.
    prometheusRule: { alertFor: { KubeNodeReadyNodeVerificationFailed: '4s', KubeNodeReadyControllerDown: '30s', KubeNodeReadyNoLeader: '30s', KubeNodeReadyControllerUnhealthy: '30s' } },
  });
}, 180_000);

afterAll(async () => {
  await live?.cleanup();
});

describe('alerts on a live Prometheus', () => {
  it('a healthy burst fires nothing', async () => {
    const nodes = await Promise.all(Array.from({ length: 4 }, () => live.addTaintedNode()));
    const firing = new Set<string>();
    await waitFor(
      async () => {
        for (const a of await live.prometheus.alerts()) if (a.state === 'firing') firing.add(alertLine(a));
        const opened = await Promise.all(nodes.map(async (n) => (await core().readNode({ name: n })).metadata?.labels?.[live.verifiedLabel.key] === live.verifiedLabel.value));
        return opened.every(Boolean);
      },
      'the burst verified',
      90_000,
      1000,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await live.describe()}`, { cause: err });
    });
    // Prometheus saw the verifications (so "nothing fired" is about real data), then a few more
    // evaluations: longer than every shortened `for:`.
    await waitFor(async () => Number((await live.prometheus.query('sum(kube_node_ready_verifications_total{status="success"})'))[0]?.value[1] ?? 0) >= 4, 'four successes scraped', 20_000, 500);
    await new Promise((r) => setTimeout(r, 12_000));
    for (const a of await live.prometheus.alerts()) if (a.state === 'firing') firing.add(alertLine(a));
    // Nothing fired at any moment of the burst (ALERTS keeps what /api/v1/alerts showed in between).
    const history = await live.prometheus.query('max_over_time(ALERTS{alertstate="firing"}[10m])');
    expect([...firing], await live.describe()).toEqual([]);
    expect(history.map((s) => JSON.stringify(s.metric))).toEqual([]);
  });

  it('a node that uses up its attempts fires KubeNodeReadyNodeVerificationFailed with its name', async () => {
    // Its pods get a nameserver nothing listens on: the worker's DNS check fails on every attempt.
    const node = await live.addTaintedNode({ faults: { dns: 'dead' } });
    const alert = await waitForAlert(live, `KubeNodeReadyNodeVerificationFailed for ${node}`, (a) => a.labels.alertname === 'KubeNodeReadyNodeVerificationFailed' && a.labels.node === node, 120_000);
    expect(alert.annotations.summary).toBe(`Node ${node} failed its network verification.`);
    expect(alert.labels.severity).toBe('warning');
    // Only that node: the healthy ones verified above do not appear.
    const failedNodes = (await live.prometheus.alerts()).filter((a) => a.labels.alertname === 'KubeNodeReadyNodeVerificationFailed').map((a) => a.labels.node);
    expect(failedNodes).toEqual([node]);
  });

  it('every panel of the Grafana dashboard returns series with values', async () => {
    expect(panels.map((p) => p.title)).toEqual(
      expect.arrayContaining(['Nodes by phase', 'Time to verified', 'Failures by check', 'Attempts by outcome', 'Remediation actions', 'Remediation blocks', 'Circuit breaker', 'Leader', 'API requests', 'Client-side throttling', 'Controller memory']),
    );
    // Grafana's variables as Grafana substitutes them: the release's namespace, a window over the burst.
    const empty: string[] = [];
    for (const panel of panels) {
      for (const target of panel.targets ?? []) {
        const expr = target.expr.replaceAll('$namespace', live.namespace).replaceAll('$__rate_interval', '5m');
        const result = await live.prometheus.query(expr);
        if (!result.some((s) => Number.isFinite(Number(s.value[1])))) empty.push(`${panel.title} [${target.legendFormat ?? ''}]: ${expr} -> ${JSON.stringify(result).slice(0, 300)}`);
      }
    }
    expect(empty, `panels without data:\n${empty.join('\n')}\n${await live.describe()}`).toEqual([]);
  });

  it('the controller scaled to zero fires KubeNodeReadyControllerDown', async () => {
    await live.scale(0);
    const alert = await waitForAlert(live, 'KubeNodeReadyControllerDown', (a) => a.labels.alertname === 'KubeNodeReadyControllerDown', 90_000);
    expect(alert.labels.severity).toBe('critical');
    // `up` of the release is gone, not 0: the pods and their endpoints went away.
    expect(await live.prometheus.query(`up{namespace="${live.namespace}"} == 1`)).toEqual([]);
  });
});

// The chart's alerts on a real Prometheus scraping the real controller pods (docs/alerts.md): a
// healthy burst fires nothing, a node that uses up its attempts fires
// KubeNodeReadyNodeVerificationFailed with its name, and a controller scaled to zero fires
// KubeNodeReadyControllerDown. The rules are the chart's; only their `for:` is shortened, through the
// chart's values (prometheusRule.alertFor), so a test waits seconds instead of minutes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { core, waitFor } from '../sandbox.js';
import { alertLine, installLiveRelease, waitForAlert, type LiveRelease } from './live.js';

let live: LiveRelease;

beforeAll(async () => {
  live = await installLiveRelease('alerts', {
    prometheusRule: { alertFor: { KubeNodeReadyNodeVerificationFailed: '4s', KubeNodeReadyControllerDown: '10s', KubeNodeReadyNoLeader: '10s', KubeNodeReadyControllerUnhealthy: '10s' } },
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

  it('the controller scaled to zero fires KubeNodeReadyControllerDown', async () => {
    await live.scale(0);
    const alert = await waitForAlert(live, 'KubeNodeReadyControllerDown', (a) => a.labels.alertname === 'KubeNodeReadyControllerDown', 90_000);
    expect(alert.labels.severity).toBe('critical');
    // `up` of the release is gone, not 0: the pods and their endpoints went away.
    expect(await live.prometheus.query(`up{namespace="${live.namespace}"} == 1`)).toEqual([]);
  });
});

// A cluster DNS outage (kube-system/sandbox-dns `mode: servfail`: every pod's lookups fail) seen by a
// real Prometheus scraping the chart's controller: every new node fails its verification, so
// KubeNodeReadyHighFailureRate fires and the remediation circuit breaker opens
// (KubeNodeReadyRemediationBlocked); from the third node on the attempts are inconclusive (most
// nodes fail dns against the same nameserver), so KubeNodeReadyClusterWideFault fires for
// check="dns". Once DNS is back and nodes pass again, all three resolve. The DNS
// fault is cluster-wide, hence the serial project. The rules are the chart's, with `for:` and the
// failure-rate window shortened through the chart's values only.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DNS_CONFIGMAP } from '@kube-node-ready/sandbox';
import { core, waitFor } from '../sandbox.js';
import { installLiveRelease, waitForAlert, waitForResolved, type LiveRelease } from './live.js';

const setDnsMode = (mode: 'ok' | 'servfail') =>
  core().patchNamespacedConfigMap({ name: DNS_CONFIGMAP, namespace: 'kube-system', body: [{ op: 'replace', path: '/data/mode', value: mode }] });

let live: LiveRelease;

beforeAll(async () => {
  live = await installLiveRelease('dnsout', {
    prometheusRule: {
      failureRate: { window: '1m', minAttempts: 3 },
      alertFor: { KubeNodeReadyHighFailureRate: '10s', KubeNodeReadyRemediationBlocked: '10s', KubeNodeReadyClusterWideFault: '10s' },
    },
    config: {
      nodeManagement: {
        deleteFailedNodes: true,
        // The global rule only (nodes without a NodePool form one group), over a window a test can outlast.
        remediation: { minNodeAge: '0s', circuitBreaker: { window: '1m', minSamples: 2, maxFailedPercent: 30, maxFailedPercentPerNodePool: 100 } },
      },
    },
  });
}, 180_000);

afterAll(async () => {
  await setDnsMode('ok');
  await live?.cleanup();
});

const highFailureRate = (a: { labels: Record<string, string> }) => a.labels.alertname === 'KubeNodeReadyHighFailureRate';
const breaker = (a: { labels: Record<string, string> }) => a.labels.alertname === 'KubeNodeReadyRemediationBlocked';
const clusterWide = (a: { labels: Record<string, string> }) => a.labels.alertname === 'KubeNodeReadyClusterWideFault';

describe.sequential('a cluster DNS outage on a live Prometheus', () => {
  it('fires KubeNodeReadyHighFailureRate, KubeNodeReadyRemediationBlocked and KubeNodeReadyClusterWideFault{check="dns"}', async () => {
    await setDnsMode('servfail');
    await Promise.all(Array.from({ length: 4 }, () => live.addTaintedNode()));
    const rate = await waitForAlert(live, 'KubeNodeReadyHighFailureRate', highFailureRate, 150_000);
    expect(rate.labels.severity).toBe('critical');
    expect(Number(rate.value)).toBeGreaterThan(0.2);
    const blocked = await waitForAlert(live, 'KubeNodeReadyRemediationBlocked', breaker, 60_000);
    expect(blocked.labels.severity).toBe('warning');
    // The failures are DNS's: the worker's dns check is what failed.
    const dnsFailures = await live.prometheus.query('sum(kube_node_ready_check_failures_total{check="dns"})');
    expect(Number(dnsFailures[0]?.value[1] ?? 0)).toBeGreaterThanOrEqual(4);
    const fault = await waitForAlert(live, 'KubeNodeReadyClusterWideFault', clusterWide, 90_000);
    expect(fault.labels).toMatchObject({ severity: 'critical', check: 'dns' });
  }, 330_000);

  it('both resolve once DNS is back and nodes pass again', async () => {
    await setDnsMode('ok');
    const healthy = await Promise.all(Array.from({ length: 2 }, () => live.addTaintedNode()));
    await waitFor(
      async () => (await Promise.all(healthy.map(async (n) => (await core().readNode({ name: n })).metadata?.labels?.[live.verifiedLabel.key] === live.verifiedLabel.value))).every(Boolean),
      'the nodes added after the outage verified',
      90_000,
      1000,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await live.describe()}`, { cause: err });
    });
    await waitForResolved(live, 'KubeNodeReadyHighFailureRate, KubeNodeReadyRemediationBlocked and KubeNodeReadyClusterWideFault', (a) => highFailureRate(a) || breaker(a) || clusterWide(a), 150_000);
    expect(Number((await live.prometheus.query('max(kube_node_ready_remediation_blocked{reason="circuit-breaker"})'))[0]?.value[1])).toBe(0);
  }, 270_000);
});

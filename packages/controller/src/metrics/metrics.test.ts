import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ControllerMetrics } from './metrics.js';
import { MetricName } from './names.js';

function setup(workerPods?: () => Record<'pending' | 'running' | 'succeeded' | 'failed', number>) {
  const registry = new Registry();
  const metrics = new ControllerMetrics(registry, { version: '1.2.3', commit: 'abc', ...(workerPods ? { workerPods } : {}) });
  return { registry, metrics, text: () => registry.metrics() };
}

describe('ControllerMetrics', () => {
  it('registers every named metric on the injected registry, and nothing on the global one', async () => {
    const { registry } = setup();
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name).sort();
    expect(names).toEqual(Object.values(MetricName).sort());
    setup(); // a second instance on its own registry does not clash
  });

  it('reads the cluster-wide failures at scrape time, 0 for checks without any', async () => {
    const registry = new Registry();
    let max = new Map([['dns', 5]]);
    new ControllerMetrics(registry, { version: '1.2.3', commit: 'abc', clusterWideFailures: () => max });
    const text = await registry.metrics();
    expect(text).toContain('kube_node_ready_cluster_wide_failures{check="dns"} 5');
    expect(text).toContain('kube_node_ready_cluster_wide_failures{check="api"} 0');
    max = new Map();
    expect(await registry.metrics()).toContain('kube_node_ready_cluster_wide_failures{check="dns"} 0');
  });

  it('pre-sets known series to 0', async () => {
    const text = await setup().text();
    for (const line of [
      'kube_node_ready_verifications_total{status="success",profile="default"} 0',
      'kube_node_ready_verifications_total{status="failed",profile="default"} 0',
      'kube_node_ready_attempt_outcomes_total{outcome="NotScheduled",profile="default"} 0',
      'kube_node_ready_worker_pods{status="running"} 0',
      'kube_node_ready_check_failures_total{check="dns",profile="default"} 0',
      'kube_node_ready_check_duration_seconds_count{check="podnet",result="fail"} 0',
      'kube_node_ready_check_failures_total{check="mtu",profile="default"} 0',
      'kube_node_ready_check_failures_total{check="egress",profile="default"} 0',
      'kube_node_ready_worker_warnings_total{check="dns"} 0',
      'kube_node_ready_cluster_wide_failures{check="dns"} 0',
      'kube_node_ready_worker_warnings_total{check="egress"} 0',
      'kube_node_ready_check_duration_seconds_count{check="egress",result="pass"} 0',
      'kube_node_ready_check_failures_total{check="http",profile="default"} 0',
      'kube_node_ready_worker_warnings_total{check="http"} 0',
      'kube_node_ready_cluster_wide_failures{check="http"} 0',
      'kube_node_ready_controller_healthy 0',
      'kube_node_ready_controller_reconcile_errors_total 0',
      'kube_node_ready_remediations_total{action="delete-nodeclaim",result="deleted"} 0',
      'kube_node_ready_remediation_blocked{reason="circuit-breaker"} 0',
      'kube_node_ready_watch_restarts_total{resource="pods"} 0',
      'kube_node_ready_leader 0',
      'kube_node_ready_build_info{version="1.2.3",commit="abc"} 1',
    ]) {
      expect(text).toContain(line);
    }
  });

  it('keeps exactly one status per node at 1, and forgetNode removes the node\'s series', async () => {
    const { metrics, text } = setup();
    metrics.setNodeStatus('node-1', 'verifying');
    metrics.setNodeStatus('node-1', 'verified');
    metrics.setNodeStatus('node-2', 'failed');
    metrics.recordRetry('node-2');
    let out = await text();
    expect(out).toContain('kube_node_ready_verification_status{node="node-1",status="verified"} 1');
    expect(out).toContain('kube_node_ready_verification_status{node="node-1",status="verifying"} 0');
    expect(out).toContain('kube_node_ready_retry_attempts_total{node="node-2"} 1');

    metrics.forgetNode('node-2');
    out = await text();
    expect(out).not.toContain('node="node-2"');
    expect(out).toContain('node="node-1"');
  });

  it('records attempts with their outcome, duration and per-check results', async () => {
    const { metrics, text } = setup();
    metrics.recordAttempt({
      outcome: 'ChecksFailed',
      durationSeconds: 4,
      checks: [
        { name: 'dns', ok: false, durationMs: 2000 },
        { name: 'api', ok: true, durationMs: 30 },
      ],
    });
    metrics.recordAttempt({ outcome: 'Passed', durationSeconds: 3, checks: [] });
    const out = await text();
    expect(out).toContain('kube_node_ready_verifications_total{status="failed",profile="default"} 1');
    expect(out).toContain('kube_node_ready_verifications_total{status="success",profile="default"} 1');
    expect(out).toContain('kube_node_ready_attempt_outcomes_total{outcome="ChecksFailed",profile="default"} 1');
    expect(out).toContain('kube_node_ready_check_failures_total{check="dns",profile="default"} 1');
    expect(out).toContain('kube_node_ready_check_failures_total{check="api",profile="default"} 0');
    expect(out).toContain('kube_node_ready_check_duration_seconds_bucket{le="2.5",check="dns",result="fail"} 1');
    expect(out).toContain('kube_node_ready_verification_duration_seconds_sum{status="failed",profile="default"} 4');
  });

  it('counts worker warnings by check', async () => {
    const { metrics, text } = setup();
    metrics.recordAttempt({ outcome: 'Passed', checks: [], warnings: [{ check: 'dns' }, { check: 'dns' }, { check: 'mtu' }] });
    const out = await text();
    expect(out).toContain('kube_node_ready_worker_warnings_total{check="dns"} 2');
    expect(out).toContain('kube_node_ready_worker_warnings_total{check="mtu"} 1');
    expect(out).toContain('kube_node_ready_worker_warnings_total{check="api"} 0');
  });

  it('counts worker pods at scrape time', async () => {
    const { text } = setup(() => ({ pending: 2, running: 5, succeeded: 1, failed: 0 }));
    const out = await text();
    expect(out).toContain('kube_node_ready_worker_pods{status="pending"} 2');
    expect(out).toContain('kube_node_ready_worker_pods{status="running"} 5');
  });

  it('observes creation-to-taint-removal', async () => {
    const { metrics, text } = setup();
    metrics.recordOpened(42);
    expect(await text()).toContain('kube_node_ready_creation_to_taint_removal_seconds_bucket{le="45",profile="default"} 1');
  });
});

describe('docs/metrics.md', () => {
  it('documents every metric', () => {
    const doc = readFileSync(fileURLToPath(new URL('../../../../docs/metrics.md', import.meta.url)), 'utf8');
    const missing = Object.values(MetricName).filter((name) => !doc.includes(`\`${name}\``));
    expect(missing, 'metrics missing from docs/metrics.md').toEqual([]);
  });

  it('carries the profile of the node: every configured profile preset at 0, an attempt counted under its own', async () => {
    const registry = new Registry();
    const metrics = new ControllerMetrics(registry, { version: '1.2.3', commit: 'abc', profiles: ['gpu', 'default'] });
    const before = await registry.metrics();
    expect(before).toContain('kube_node_ready_verifications_total{status="failed",profile="gpu"} 0');
    expect(before).toContain('kube_node_ready_attempt_outcomes_total{outcome="ChecksFailed",profile="default"} 0');
    metrics.recordAttempt({ profile: 'gpu', outcome: 'ChecksFailed', checks: [{ name: 'dns', ok: false, durationMs: 10 }] });
    metrics.recordOpened(30, 'gpu');
    const after = await registry.metrics();
    expect(after).toContain('kube_node_ready_attempt_outcomes_total{outcome="ChecksFailed",profile="gpu"} 1');
    expect(after).toContain('kube_node_ready_check_failures_total{check="dns",profile="gpu"} 1');
    expect(after).toContain('kube_node_ready_check_failures_total{check="dns",profile="default"} 0');
    expect(after).toContain('kube_node_ready_creation_to_taint_removal_seconds_count{profile="gpu"} 1');
  });
});

// The Grafana dashboard ConfigMap (grafanaDashboard.*) and the alerts' `for:` overrides
// (prometheusRule.alertFor). Whether each panel returns data: alerts.live.sandbox.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MetricName } from '../../packages/controller/src/metrics/names.js';
import { CHART_DIR, REPO_ROOT, find, findAll, template, tryTemplate } from './helm.js';

const chartDashboard = readFileSync(join(CHART_DIR, 'dashboards', 'kube-node-ready.json'), 'utf8');

describe('Grafana dashboard', { timeout: 60_000 }, () => {
  it('is off by default', async () => {
    expect(findAll(await template({}), 'ConfigMap').map((c) => c.metadata.name)).not.toContain('kube-node-ready-dashboard');
  });

  it('renders a ConfigMap the Grafana sidecar picks up, with the dashboard of examples/', async () => {
    const objects = await template({ grafanaDashboard: { enabled: true, namespace: 'monitoring', annotations: { grafana_folder: 'Kubernetes' } } });
    const cm = find(objects, 'ConfigMap', 'kube-node-ready-dashboard') as unknown as { metadata: { namespace: string; labels: Record<string, string>; annotations: Record<string, string> }; data: Record<string, string> };
    expect(cm.metadata.namespace).toBe('monitoring');
    expect(cm.metadata.labels.grafana_dashboard).toBe('1');
    expect(cm.metadata.annotations.grafana_folder).toBe('Kubernetes');
    expect(JSON.parse(cm.data['kube-node-ready.json']!)).toEqual(JSON.parse(chartDashboard));
    expect(readFileSync(join(REPO_ROOT, 'examples', 'grafana-dashboard.json'), 'utf8')).toBe(chartDashboard);
  });

  it('queries only metrics the controller exports (or its process collectors), in the selected namespace', () => {
    const known = new Set<string>(Object.values(MetricName));
    const dashboard = JSON.parse(chartDashboard) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> };
    for (const panel of dashboard.panels) {
      for (const { expr } of panel.targets ?? []) {
        for (const [, name] of expr.matchAll(/\b((?:kube_node_ready|process|nodejs)_[a-z_]+?)(?:_bucket)?\{/g)) {
          if (name!.startsWith('kube_node_ready_')) expect(known, `${panel.title}: ${name}`).toContain(name);
        }
        for (const selector of expr.match(/\{[^}]*\}/g) ?? []) expect(selector, panel.title).toContain('namespace=~"$namespace"');
      }
    }
  });
});

describe('prometheusRule.alertFor', { timeout: 60_000 }, () => {
  it('sets an alert\'s for: by name and leaves the others at their documented durations', async () => {
    const rule = find(await template({ prometheusRule: { enabled: true, alertFor: { KubeNodeReadyControllerDown: '10m' } } }), 'PrometheusRule') as unknown as { spec: { groups: Array<{ rules: Array<{ alert: string; for: string }> }> } };
    const fors = Object.fromEntries(rule.spec.groups[0]!.rules.map((r) => [r.alert, r.for]));
    expect(fors).toMatchObject({ KubeNodeReadyControllerDown: '10m', KubeNodeReadyNodeVerificationFailed: '1m', KubeNodeReadyHighFailureRate: '10m', KubeNodeReadyRemediationBlocked: '5m' });
  });

  it('refuses an unknown alert name', async () => {
    const result = await tryTemplate({ prometheusRule: { enabled: true, alertFor: { KubeNodeReadyTypo: '1m' } } });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('KubeNodeReadyTypo');
  });
});

// The alerting rules: the chart's PrometheusRule and examples/prometheus-rules.yaml are the same
// rules; promtool accepts them and its unit tests (alerts.promtool.yaml, synthetic series with the
// controller's real metric names) show each alert fires when it should and only then.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { MetricName, NodeStatus, AttemptStatus, RemediationBlockReason } from '../../packages/controller/src/metrics/names.js';
import { ALERTS_WITH_FIXED_FOR, REGENERATE } from './generate.js';
import { REPO_ROOT, find, template } from './helm.js';

const run = promisify(execFile);
const EXAMPLE = join(REPO_ROOT, 'examples', 'prometheus-rules.yaml');
const PROMTOOL_TESTS = join(REPO_ROOT, 'test', 'chart', 'alerts.promtool.yaml');
const ALERTS_DOC = join(REPO_ROOT, 'docs', 'alerts.md');

interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
interface RuleSpec {
  groups: Array<{ name: string; rules: AlertRule[] }>;
}

/** promtool from PATH (Debian's prometheus package); the Makefile installs it. */
async function promtool(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') throw new Error('promtool not found: install Debian\'s "prometheus" package (make deps does)', { cause: err });
    return { code: typeof e.code === 'number' ? e.code : 1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

/** examples/prometheus-rules.yaml: the chart's PrometheusRule for the default values, standalone. */
function renderExample(spec: RuleSpec): string {
  const header = [
    '# The kube-node-ready alerts (docs/alerts.md has a runbook for each), as a Prometheus Operator',
    '# PrometheusRule for a release "kube-node-ready" in "kube-system" scraped by the chart\'s ServiceMonitor.',
    '# The Helm chart creates the same object with --set prometheusRule.enabled=true.',
    '#',
    '# Plain Prometheus: the rule file is the spec:',
    "#   yq '.spec' examples/prometheus-rules.yaml > kube-node-ready.rules.yml   # then list it under rule_files",
    '# and adjust the up{job=...} selector to the job name your scrape configuration gives the controller.',
    '#',
    `# Generated from deploy/helm/kube-node-ready/templates/_alerts.tpl; do not edit, regenerate: ${REGENERATE.replace('generated.test.ts', 'alerts.test.ts')}`,
  ];
  const object = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'kube-node-ready', namespace: 'kube-system', labels: { 'app.kubernetes.io/name': 'kube-node-ready', 'app.kubernetes.io/part-of': 'kube-node-ready' } },
    spec,
  };
  return `${header.join('\n')}\n${toYaml(object, { lineWidth: 0 })}`;
}

let spec: RuleSpec;
let workdir: string;

beforeAll(async () => {
  const objects = await template({ prometheusRule: { enabled: true } });
  spec = find(objects, 'PrometheusRule').spec as RuleSpec;
  workdir = mkdtempSync(join(tmpdir(), 'knr-alerts-'));
  writeFileSync(join(workdir, 'rules.yaml'), toYaml(spec, { lineWidth: 0 }));
  copyFileSync(PROMTOOL_TESTS, join(workdir, 'alerts.promtool.yaml'));
  return () => rmSync(workdir, { recursive: true, force: true });
}, 600_000);

const rules = () => spec.groups.flatMap((g) => g.rules);

describe('alert rules', () => {
  it('examples/prometheus-rules.yaml holds exactly the chart\'s rules', async () => {
    await expect(renderExample(spec), `examples/prometheus-rules.yaml is out of date; regenerate: ${REGENERATE.replace('generated.test.ts', 'alerts.test.ts')}`).toMatchFileSnapshot(EXAMPLE);
    const example = parseYaml(readFileSync(EXAMPLE, 'utf8')) as { spec: RuleSpec };
    expect(example.spec).toEqual(spec);
  });

  it('prometheusRule.alertFor accepts exactly the alerts whose wait is not pendingFor or untrackedFor (values.schema.json)', () => {
    const fixed = rules().map((r) => r.alert).filter((a) => a !== 'KubeNodeReadyNodeVerificationPending' && a !== 'KubeNodeReadyTaintedNodeNotTracked');
    expect([...ALERTS_WITH_FIXED_FOR].sort()).toEqual(fixed.sort());
  });

  it('cover the required cases, each with severity, summary, description and a runbook in docs/alerts.md', () => {
    const names = rules().map((r) => r.alert);
    expect(names).toEqual(
      expect.arrayContaining([
        'KubeNodeReadyNodeVerificationFailed', // a node failed verification
        'KubeNodeReadyNodeVerificationPending', // a node waits too long
        'KubeNodeReadyHighFailureRate', // failure rate high
        'KubeNodeReadyRemediationBlocked', // circuit breaker
        'KubeNodeReadyNoLeader', // no leader
        'KubeNodeReadyControllerDown', // controller down
      ]),
    );
    const doc = existsSync(ALERTS_DOC) ? readFileSync(ALERTS_DOC, 'utf8') : '';
    for (const rule of rules()) {
      expect(rule.labels.severity, rule.alert).toMatch(/^(warning|critical)$/);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      expect(rule.annotations.description, rule.alert).toBeTruthy();
      const anchor = rule.alert.toLowerCase();
      expect(rule.annotations.runbook_url).toBe(`https://github.com/kube-node-ready/kube-node-ready/blob/main/docs/alerts.md#${anchor}`);
      // GitHub's anchor for a "## KubeNodeReadyX" heading is its lowercase text.
      expect(doc, `docs/alerts.md has no section "## ${rule.alert}"`).toContain(`\n## ${rule.alert}\n`);
    }
  });

  it('use only metric names and label values the controller exports (metrics/names.ts) or documented external ones', () => {
    const ours = new Set<string>(Object.values(MetricName));
    const external = new Set(['up', 'kube_node_spec_taint']);
    for (const rule of rules()) {
      const names = rule.expr.match(/\b(kube_[a-z0-9_]+|up)\b/g) ?? [];
      expect(names.length, rule.alert).toBeGreaterThan(0);
      for (const name of names) expect(ours.has(name) || external.has(name), `${rule.alert}: unknown metric ${name}`).toBe(true);
    }
    const values = (label: string) => [...rules().map((r) => r.expr).join('\n').matchAll(new RegExp(`${label}=~?"([^"]+)"`, 'g'))].flatMap((m) => (m[1] as string).split('|'));
    const statuses = new Set<string>([...NodeStatus, ...AttemptStatus]);
    for (const v of values('status')) expect(statuses.has(v), `status="${v}"`).toBe(true);
    for (const v of values('reason')) expect((RemediationBlockReason as readonly string[]).includes(v), `reason="${v}"`).toBe(true);
  });

  it('alert labels and thresholds follow the values', async () => {
    const objects = await template({
      prometheusRule: { enabled: true, alertLabels: { team: 'platform' }, pendingFor: '20m', failureRate: { threshold: 0.5, window: '1h', minAttempts: 10 }, disabledAlerts: ['KubeNodeReadyTaintedNodeNotTracked'], targetSelector: 'job="knr"' },
    });
    const custom = (find(objects, 'PrometheusRule').spec as RuleSpec).groups.flatMap((g) => g.rules);
    expect(custom.map((r) => r.alert)).not.toContain('KubeNodeReadyTaintedNodeNotTracked');
    for (const r of custom) expect(r.labels.team).toBe('platform');
    expect(custom.find((r) => r.alert === 'KubeNodeReadyNodeVerificationPending')?.for).toBe('20m');
    const rate = custom.find((r) => r.alert === 'KubeNodeReadyHighFailureRate')?.expr ?? '';
    expect(rate).toContain('[1h]');
    expect(rate).toContain('> 0.5');
    expect(rate).toContain('>= 10');
    expect(custom.find((r) => r.alert === 'KubeNodeReadyControllerDown')?.expr).toBe('absent(up{job="knr"} == 1)');
  });
});

describe('promtool', () => {
  it('check rules: the rule file is valid', async () => {
    const result = await promtool(['check', 'rules', 'rules.yaml'], workdir);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain(`SUCCESS: ${rules().length} rules found`);
  });

  it('test rules: every alert fires on its synthetic series, and a healthy system fires none', async () => {
    const result = await promtool(['test', 'rules', 'alerts.promtool.yaml'], workdir);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain('SUCCESS');
    // Every alert has at least one test that expects it to fire.
    const tests = parseYaml(readFileSync(PROMTOOL_TESTS, 'utf8')) as { tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }> };
    const fired = new Set(tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    for (const rule of rules()) expect(fired.has(rule.alert), `no promtool test makes ${rule.alert} fire`).toBe(true);
  });
});

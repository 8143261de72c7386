// The chart in DaemonSet mode (deploymentMode: daemonset), rendered by `helm template`: what it
// installs instead of the controller, the pods' placement and tolerations, the agents' admission
// policies, and their alerts evaluated by promtool on synthetic series of the agents' metrics.
// The same release against the real cluster: daemonset.sandbox.test.ts.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { find, template, tryTemplate, type KubeObject } from './helm.js';

const run = promisify(execFile);
const DS = { deploymentMode: 'daemonset' };

type PodSpec = { tolerations: Array<Record<string, string>>; affinity: unknown; containers: Array<{ args: string[]; env: Array<{ name: string }> }>; serviceAccountName: string };
const podSpec = (objects: KubeObject[]) => ((find(objects, 'DaemonSet').spec as { template: { spec: PodSpec } }).template.spec);
interface Policy {
  spec: {
    failurePolicy: string;
    matchConstraints: unknown;
    matchConditions: Array<{ expression: string }>;
    variables?: Array<{ name: string; expression: string }>;
    validations: Array<{ expression: string; message: string }>;
  };
}

describe('deploymentMode', () => {
  it('daemonset: a DaemonSet and what its pods need, no controller, no worker objects', async () => {
    const objects = await template({ ...DS, prometheusRule: { enabled: true }, podMonitor: { enabled: true } });
    const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(kinds).toEqual(
      expect.arrayContaining([
        'DaemonSet/kube-node-ready',
        'ServiceAccount/kube-node-ready-agent',
        'ClusterRole/kube-node-ready-agent',
        'ClusterRoleBinding/kube-node-ready-agent',
        'ConfigMap/kube-node-ready-config',
        'ValidatingAdmissionPolicy/kube-node-ready-agent-node-writes',
        'ValidatingAdmissionPolicyBinding/kube-node-ready-agent-node-writes',
        'ValidatingAdmissionPolicy/kube-node-ready-agent-nodeverification-writes',
        'ValidatingAdmissionPolicyBinding/kube-node-ready-agent-nodeverification-writes',
        'PodMonitor/kube-node-ready',
        'PrometheusRule/kube-node-ready',
      ]),
    );
    for (const kind of ['Deployment', 'PodDisruptionBudget', 'Service', 'Namespace', 'PriorityClass', 'Lease']) expect(kinds.filter((k) => k.startsWith(`${kind}/`))).toEqual([]);
    expect(kinds.filter((k) => k.includes('controller'))).toEqual([]);
    // The agents read what the worker's checks read, nothing else; they write Nodes, their
    // NodeVerifications (read with get: no list or watch) and Events only.
    const role = find(objects, 'ClusterRole') as KubeObject & { rules: Array<{ resources: string[]; verbs: string[] }> };
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'patch'] },
      { apiGroups: [''], resources: ['nodes/status'], verbs: ['patch'] },
      { apiGroups: ['kube-node-ready.io'], resources: ['nodeverifications'], verbs: ['get', 'create', 'update', 'delete'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ]);
    const bindings = objects.filter((o) => o.kind === 'RoleBinding') as Array<KubeObject & { subjects: unknown[] }>;
    expect(bindings.length).toBeGreaterThan(0);
    for (const b of bindings) expect(b.subjects).toEqual([{ kind: 'ServiceAccount', name: 'kube-node-ready-agent', namespace: 'kube-system' }]);
  });

  it('controller (the default) renders no DaemonSet', async () => {
    const kinds = (await template({})).map((o) => o.kind);
    expect(kinds).toContain('Deployment');
    expect(kinds).not.toContain('DaemonSet');
  });

  it('the pods run `agent` on unverified nodes only, and tolerate exactly the verification, failed and node lifecycle taints', async () => {
    const spec = podSpec(await template({ ...DS, daemonset: { tolerations: [{ key: 'example.com/gpu', operator: 'Exists' }] } }));
    expect(spec.containers[0]?.args).toEqual(['agent', '--config', '/etc/kube-node-ready/config.yaml']);
    expect(spec.containers[0]?.env.map((e) => e.name)).toEqual(['NODE_NAME', 'POD_NAME', 'POD_NAMESPACE']);
    expect(spec.affinity).toEqual({
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'node-ready/verified', operator: 'NotIn', values: ['true'] }] }] } },
    });
    expect(spec.tolerations).toEqual([
      { key: 'node-ready/unverified', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'kube-node-ready.io/verification-failed', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'example.com/gpu', operator: 'Exists' },
    ]);
  });

  it('the agents\' admission policy adds the own-node rule to the node-write rules', async () => {
    const objects = await template(DS);
    const policy = find(objects, 'ValidatingAdmissionPolicy', 'kube-node-ready-agent-node-writes') as KubeObject & Policy;
    expect(policy.spec.matchConditions[0]?.expression).toBe('request.userInfo.username == "system:serviceaccount:kube-system:kube-node-ready-agent"');
    expect(policy.spec.validations[0]?.expression).toContain("request.userInfo.extra['authentication.kubernetes.io/node-name'][0] == object.metadata.name");
    const controller = find(await template({}), 'ValidatingAdmissionPolicy', 'kube-node-ready-controller-node-writes') as typeof policy;
    // The same field rules as the controller's, worded for the agent.
    expect(policy.spec.validations.slice(1).map((v) => v.expression)).toEqual(controller.spec.validations.map((v) => v.expression));
  });

  it('the agents\' NodeVerification writes: create, update and delete of the one named after the node in the pod-bound token only', async () => {
    const objects = await template(DS);
    const policy = find(objects, 'ValidatingAdmissionPolicy', 'kube-node-ready-agent-nodeverification-writes') as KubeObject & Policy;
    expect(policy.spec.failurePolicy).toBe('Fail');
    expect(policy.spec.matchConstraints).toEqual({
      resourceRules: [{ apiGroups: ['kube-node-ready.io'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE', 'DELETE'], resources: ['nodeverifications'] }],
    });
    expect(policy.spec.matchConditions.map((c) => c.expression)).toEqual(['request.userInfo.username == "system:serviceaccount:kube-system:kube-node-ready-agent"']);
    const variable = (name: string) => policy.spec.variables?.find((v) => v.name === name)?.expression ?? '';
    // The same claim as the node-writes policy: the node the API server put in the pod-bound token.
    expect(variable('ownNode')).toContain("request.userInfo.extra['authentication.kubernetes.io/node-name'][0]");
    expect(variable('name')).toBe("request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name");
    expect(policy.spec.validations).toEqual([{ expression: "variables.ownNode != '' && variables.name == variables.ownNode", message: expect.stringMatching(/^metadata\.name: .*only the NodeVerification of the node its own pod runs on/) }]);
    expect(find(objects, 'ValidatingAdmissionPolicyBinding', policy.metadata.name).spec).toEqual({ policyName: policy.metadata.name, validationActions: ['Deny'] });
    // Off with the other policies.
    const off = await template({ ...DS, admissionPolicies: { enabled: false } });
    expect(off.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'))).toEqual([]);
  });

  it('refuses an unknown mode, and remediation in DaemonSet mode, saying why', async () => {
    const unknown = await tryTemplate({ deploymentMode: 'agent' });
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('deploymentMode');
    const remediation = await tryTemplate({ ...DS, config: { nodeManagement: { deleteFailedNodes: true } } });
    expect(remediation.code).not.toBe(0);
    expect(remediation.stderr).toContain('config.nodeManagement.deleteFailedNodes (at the top level or in a profile) needs deploymentMode: controller');
    const inProfile = await tryTemplate({ ...DS, config: { profiles: [{ name: 'gpu', nodeSelector: {}, nodeManagement: { deleteFailedNodes: true } }] } });
    expect(inProfile.code).not.toBe(0);
    expect(inProfile.stderr).toContain('deleteFailedNodes (at the top level or in a profile)');
    for (const config of [{ nodeManagement: { startupTimeout: '30m' } }, { profiles: [{ name: 'gpu', nodeSelector: {}, nodeManagement: { startupTimeout: '1h' } }] }]) {
      const timeout = await tryTemplate({ ...DS, config });
      expect(timeout.code, JSON.stringify(config)).not.toBe(0);
      expect(timeout.stderr).toContain('config.nodeManagement.startupTimeout (at the top level or in a profile) needs deploymentMode: controller');
    }
    expect((await tryTemplate({ ...DS, config: { nodeManagement: { startupTimeout: '0s' } } })).code).toBe(0);
    const checks = await tryTemplate({ ...DS, config: { profiles: [{ name: 'gpu', nodeSelector: {}, worker: { containerChecks: [{ name: 'smi', image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04' }] } }] } });
    expect(checks.code).not.toBe(0);
    expect(checks.stderr).toContain('config.worker.containerChecks (at the top level or in a profile) needs deploymentMode: controller');
    for (const config of [{ gates: { requireResources: { 'nvidia.com/gpu': 1 } } }, { profiles: [{ name: 'gpu', nodeSelector: {}, gates: { requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }] } }] }]) {
      const gates = await tryTemplate({ ...DS, config });
      expect(gates.code, JSON.stringify(config)).not.toBe(0);
      expect(gates.stderr).toContain('config.gates (at the top level or in a profile) needs deploymentMode: controller');
    }
    expect((await tryTemplate({ ...DS, config: { gates: { mode: 'parallel' } } })).code).toBe(0);
  });
});

describe('DaemonSet-mode alerts (promtool test rules)', () => {
  it('fire on the agents\' metrics: a failed node at once, a node still going after pendingFor, a tainted node without a reporting pod after untrackedFor', async () => {
    const rule = find(await template({ ...DS, prometheusRule: { enabled: true, pendingFor: '10m', untrackedFor: '10m' } }), 'PrometheusRule') as KubeObject & {
      spec: { groups: Array<{ rules: Array<{ alert: string; annotations: Record<string, string> }> }> };
    };
    const rules = rule.spec.groups.flatMap((g) => g.rules);
    expect(rules.map((r) => r.alert)).toEqual(['KubeNodeReadyNodeVerificationFailed', 'KubeNodeReadyNodeVerificationPending', 'KubeNodeReadyTaintedNodeNotTracked']);
    /** The alert as promtool expects it: labels, and the annotations with the node filled in. */
    const expected = (alert: string, node: string) => ({
      exp_labels: { severity: 'warning', node },
      exp_annotations: Object.fromEntries(Object.entries(rules.find((r) => r.alert === alert)?.annotations ?? {}).map(([k, v]) => [k, v.replaceAll('{{ $labels.node }}', node)])),
    });
    const dir = mkdtempSync(join(tmpdir(), 'knr-ds-alerts-'));
    try {
      writeFileSync(join(dir, 'rules.yaml'), toYaml(rule.spec, { lineWidth: 0 }));
      const pod = (node: string) => `namespace="kube-system",pod="kube-node-ready-${node}"`;
      const tests = {
        rule_files: ['rules.yaml'],
        evaluation_interval: '1m',
        tests: [
          {
            interval: '1m',
            input_series: [
              // failed: ended (completion set) without passing
              { series: `node_check_status{${pod('a')},node="a"}`, values: '0x20' },
              { series: `node_check_completion_timestamp{${pod('a')},node="a"}`, values: '0 0 1700000000x18' },
              // passed: ended with status 1
              { series: `node_check_status{${pod('b')},node="b"}`, values: '0 1x19' },
              { series: `node_check_completion_timestamp{${pod('b')},node="b"}`, values: '0 1700000000x19' },
              // still going after 10m
              { series: `node_check_status{${pod('c')},node="c"}`, values: '0x20' },
              { series: `node_check_completion_timestamp{${pod('c')},node="c"}`, values: '0x20' },
              // kube-state-metrics: c and d are tainted; d's pod never started (no node_check_* series)
              { series: 'kube_node_spec_taint{job="kube-state-metrics",node="c",key="node-ready/unverified",value="true",effect="NoSchedule"}', values: '1x20' },
              { series: 'kube_node_spec_taint{job="kube-state-metrics",node="d",key="node-ready/unverified",value="true",effect="NoSchedule"}', values: '1x20' },
              { series: 'kube_node_spec_taint{job="kube-state-metrics",node="e",key="example.com/other",value="true",effect="NoSchedule"}', values: '1x20' },
            ],
            alert_rule_test: [
              { eval_time: '5m', alertname: 'KubeNodeReadyNodeVerificationFailed', exp_alerts: [expected('KubeNodeReadyNodeVerificationFailed', 'a')] },
              { eval_time: '5m', alertname: 'KubeNodeReadyNodeVerificationPending', exp_alerts: [] },
              { eval_time: '15m', alertname: 'KubeNodeReadyNodeVerificationPending', exp_alerts: [expected('KubeNodeReadyNodeVerificationPending', 'c')] },
              { eval_time: '5m', alertname: 'KubeNodeReadyTaintedNodeNotTracked', exp_alerts: [] },
              { eval_time: '15m', alertname: 'KubeNodeReadyTaintedNodeNotTracked', exp_alerts: [expected('KubeNodeReadyTaintedNodeNotTracked', 'd')] },
            ],
          },
        ],
      };
      writeFileSync(join(dir, 'tests.yaml'), toYaml(tests));
      const result = await run('promtool', ['test', 'rules', 'tests.yaml'], { cwd: dir }).then(
        (r) => ({ code: 0, output: r.stdout + r.stderr }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
      );
      expect(result.code, result.output).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

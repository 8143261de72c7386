// The Helm chart, rendered with `helm template` (the helm built from its Go module) and checked
// object by object: what it creates, with which rights, how it runs, and that bad values fail.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfig, parseConfig } from '../../packages/controller/src/config/load.js';
import { Profiles } from '../../packages/controller/src/config/profiles.js';
import { ledgerLocation } from '../../packages/controller/src/controllers/node/remediation/ledger.js';
import { WorkerConfigMap } from '../../packages/controller/src/controllers/node/verification/worker-config.js';
import { LARGE_ANSWER_BYTES } from '../../packages/worker/src/checks/mtu.js';
import { workerConfigSchema } from '../../packages/worker/src/config.js';
import { ALL_FEATURES, CHART_DIR, NAMESPACE, find, findAll, helm, kubeVersion, template, tryTemplate, type KubeObject } from './helm.js';

// The budget is for the first use: building the binaries takes minutes; a Helm run after that is quick.
const HELM_TIMEOUT = 600_000;

interface Container {
  name: string;
  args: string[];
  env: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  ports: Array<{ name: string; containerPort: number }>;
  securityContext: Record<string, unknown>;
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
  resources: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface PodSpec {
  serviceAccountName: string;
  priorityClassName?: string;
  securityContext: Record<string, unknown>;
  tolerations: Array<Record<string, string>>;
  affinity: Record<string, unknown>;
  topologySpreadConstraints: Array<Record<string, unknown>>;
  containers: Container[];
  imagePullSecrets?: Array<{ name: string }>;
}
interface Deployment extends KubeObject {
  spec: { replicas: number; selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string>; annotations: Record<string, string> }; spec: PodSpec } };
}
interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** The default release's large-DNS-answer name (largeDnsAnswer): its Service, in the worker namespace, in the cluster DNS. */
const LARGE_DNS_NAME = 'kube-node-ready-large-dns.kube-node-ready-worker.svc.cluster.local';

const deploymentOf = (objects: KubeObject[]) => find(objects, 'Deployment') as Deployment;
const controllerOf = (objects: KubeObject[]) => deploymentOf(objects).spec.template.spec.containers[0] as Container;
const configOf = (objects: KubeObject[]) => (find(objects, 'ConfigMap', 'kube-node-ready-config').data as Record<string, string>)['config.yaml'] as string;

/** Every permission as "Kind[/namespace] group/resource[/name] verb", sorted. */
function permissions(objects: KubeObject[]): string[] {
  const out: string[] = [];
  for (const role of [...findAll(objects, 'ClusterRole'), ...findAll(objects, 'Role')]) {
    const where = role.kind === 'Role' ? `Role/${role.metadata.namespace}/${role.metadata.name}` : `ClusterRole/${role.metadata.name}`;
    for (const rule of role.rules as Rule[]) {
      for (const group of rule.apiGroups) {
        for (const resource of rule.resources) {
          for (const verb of rule.verbs) {
            const names = rule.resourceNames ?? ['*'];
            for (const name of names) out.push(`${where} ${group || 'core'}/${resource}${name === '*' ? '' : `/${name}`} ${verb}`);
          }
        }
      }
    }
  }
  return out.sort();
}

/** The permissions of the default install: exactly these, no more (docs: chart README "RBAC"). */
const BASE_PERMISSIONS = [
  'ClusterRole/kube-node-ready-controller core/nodes get',
  'ClusterRole/kube-node-ready-controller core/nodes list',
  'ClusterRole/kube-node-ready-controller core/nodes watch',
  'ClusterRole/kube-node-ready-controller core/nodes patch',
  'ClusterRole/kube-node-ready-controller core/nodes/status patch',
  'ClusterRole/kube-node-ready-controller kube-node-ready.io/nodeverifications get',
  'ClusterRole/kube-node-ready-controller kube-node-ready.io/nodeverifications list',
  'ClusterRole/kube-node-ready-controller kube-node-ready.io/nodeverifications watch',
  'ClusterRole/kube-node-ready-controller kube-node-ready.io/nodeverifications create',
  'ClusterRole/kube-node-ready-controller kube-node-ready.io/nodeverifications update',
  'ClusterRole/kube-node-ready-controller kube-node-ready.io/nodeverifications delete',
  'ClusterRole/kube-node-ready-controller core/events create',
  'ClusterRole/kube-node-ready-controller core/events patch',
  'ClusterRole/kube-node-ready-controller events.k8s.io/events create',
  'ClusterRole/kube-node-ready-controller events.k8s.io/events patch',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/pods create',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/pods get',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/pods list',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/pods watch',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/pods delete',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/configmaps create',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/configmaps/kube-node-ready-worker get',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/configmaps/kube-node-ready-worker update',
  'Role/default/kube-node-ready-api-endpoints discovery.k8s.io/endpointslices list',
  'Role/kube-system/kube-node-ready-cluster-dns discovery.k8s.io/endpointslices list',
  'Role/kube-system/kube-node-ready-leader-election coordination.k8s.io/leases create',
  'Role/kube-system/kube-node-ready-leader-election coordination.k8s.io/leases/kube-node-ready-controller get',
  'Role/kube-system/kube-node-ready-leader-election coordination.k8s.io/leases/kube-node-ready-controller update',
  'Role/default/kube-node-ready-worker core/services get',
  'Role/default/kube-node-ready-worker discovery.k8s.io/endpointslices list',
  'Role/kube-system/kube-node-ready-worker core/services get',
  'Role/kube-system/kube-node-ready-worker discovery.k8s.io/endpointslices list',
];
const REMEDIATION_PERMISSIONS = [
  'ClusterRole/kube-node-ready-controller core/nodes delete',
  'ClusterRole/kube-node-ready-controller karpenter.sh/nodeclaims get',
  'ClusterRole/kube-node-ready-controller karpenter.sh/nodeclaims list',
  'ClusterRole/kube-node-ready-controller karpenter.sh/nodeclaims watch',
  'ClusterRole/kube-node-ready-controller karpenter.sh/nodeclaims delete',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/configmaps/kube-node-ready-controller-remediation get',
  'Role/kube-node-ready-worker/kube-node-ready-controller core/configmaps/kube-node-ready-controller-remediation update',
];

function withTempFile<T>(content: string, fn: (path: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'knr-chart-'));
  try {
    const path = join(dir, 'config.yaml');
    writeFileSync(path, content);
    return fn(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

let defaults: KubeObject[];
let everything: KubeObject[];

beforeAll(async () => {
  [defaults, everything] = await Promise.all([template(), template(ALL_FEATURES)]);
}, HELM_TIMEOUT);

describe('helm lint', () => {
  it('passes --strict with default values and with every feature on', async () => {
    const version = await kubeVersion();
    const plain = await helm(['lint', '--strict', CHART_DIR, '--kube-version', version]);
    expect(plain.code, plain.stdout + plain.stderr).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), 'knr-lint-'));
    try {
      writeFileSync(join(dir, 'values.json'), JSON.stringify(ALL_FEATURES));
      const all = await helm(['lint', '--strict', CHART_DIR, '--kube-version', version, '--values', join(dir, 'values.json')]);
      expect(all.code, all.stdout + all.stderr).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('helm template: what is created', () => {
  it('default values: controller, RBAC, config, metrics Service, PDB; no Prometheus Operator objects', () => {
    const kinds = defaults.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kinds).toEqual(
      [
        'ClusterRole/kube-node-ready-controller',
        'ClusterRoleBinding/kube-node-ready-controller',
        'ConfigMap/kube-node-ready-config',
        'ConfigMap/kube-node-ready-worker',
        'Deployment/kube-node-ready-controller',
        // The name whose DNS answer is larger than one packet, for the mtu check (largeDnsAnswer).
        'EndpointSlice/kube-node-ready-large-dns',
        'Namespace/kube-node-ready-worker',
        'PodDisruptionBudget/kube-node-ready-controller',
        'PriorityClass/kube-node-ready-worker',
        'Role/kube-node-ready-api-endpoints',
        'Role/kube-node-ready-cluster-dns',
        'Role/kube-node-ready-controller',
        'Role/kube-node-ready-leader-election',
        'RoleBinding/kube-node-ready-api-endpoints',
        'RoleBinding/kube-node-ready-cluster-dns',
        'RoleBinding/kube-node-ready-controller',
        'RoleBinding/kube-node-ready-leader-election',
        // The worker's reads: the kubernetes Service's namespace and the cluster DNS Service's.
        'Role/kube-node-ready-worker',
        'Role/kube-node-ready-worker',
        'RoleBinding/kube-node-ready-worker',
        'RoleBinding/kube-node-ready-worker',
        'Service/kube-node-ready-large-dns',
        'Service/kube-node-ready-metrics',
        'ServiceAccount/kube-node-ready-controller',
        'ServiceAccount/kube-node-ready-worker',
        'ValidatingAdmissionPolicy/kube-node-ready-controller-node-deletion',
        'ValidatingAdmissionPolicy/kube-node-ready-controller-node-writes',
        'ValidatingAdmissionPolicy/kube-node-ready-controller-pods',
        'ValidatingAdmissionPolicyBinding/kube-node-ready-controller-node-deletion',
        'ValidatingAdmissionPolicyBinding/kube-node-ready-controller-node-writes',
        'ValidatingAdmissionPolicyBinding/kube-node-ready-controller-pods',
      ].sort(),
    );
  });

  it('the worker PriorityClass: named config.worker.priorityClassName, high, never preempting; none when turned off or the name is empty', async () => {
    const pc = find(defaults, 'PriorityClass', 'kube-node-ready-worker');
    expect(pc).toMatchObject({ apiVersion: 'scheduling.k8s.io/v1', value: 1_000_000_000, preemptionPolicy: 'Never', globalDefault: false });
    expect((parseYaml(configOf(defaults)) as { worker: { priorityClassName: string } }).worker.priorityClassName).toBe('kube-node-ready-worker');
    const named = await template({ config: { worker: { priorityClassName: 'team-a-knr-worker' } }, workerPriorityClass: { value: 5000 } });
    expect(find(named, 'PriorityClass', 'team-a-knr-worker')).toMatchObject({ value: 5000, preemptionPolicy: 'Never' });
    expect(findAll(await template({ workerPriorityClass: { create: false } }), 'PriorityClass')).toEqual([]);
    expect(findAll(await template({ config: { worker: { priorityClassName: '' } } }), 'PriorityClass')).toEqual([]);
    expect((await tryTemplate({ workerPriorityClass: { value: 2_000_000_000 } })).code).not.toBe(0); // above what users may create
  });

  it('renders the worker ConfigMap (config.worker.checks) so the release owns it and uninstall removes it', async () => {
    const worker = find(defaults, 'ConfigMap', 'kube-node-ready-worker');
    expect(worker.metadata.labels?.['app.kubernetes.io/component']).toBe('worker');
    // Empty values: only what the chart fills in (largeDnsAnswer).
    expect(parseYaml((worker.data as Record<string, string>)['worker.yaml'] ?? '')).toEqual({ mtu: { largeName: LARGE_DNS_NAME } });
    const checks = { enabled: ['dns', 'api'], dns: { names: ['kubernetes.default.svc.cluster.local'] } };
    const custom = find(await template({ config: { worker: { checks } } }), 'ConfigMap', 'kube-node-ready-worker');
    expect(parseYaml((custom.data as Record<string, string>)['worker.yaml'] ?? '')).toEqual({ ...checks, mtu: { largeName: LARGE_DNS_NAME } });
    const plain = find(await template({ config: { worker: { checks } }, largeDnsAnswer: { enabled: false } }), 'ConfigMap', 'kube-node-ready-worker');
    expect(parseYaml((plain.data as Record<string, string>)['worker.yaml'] ?? '')).toEqual(checks);
  });

  it('renders each profile\'s checks under its own key, merged with the top-level ones as the controller merges them; the schema checks profiles', async () => {
    const checks = { enabled: ['dns', 'api'], dns: { names: ['kubernetes.default.svc.cluster.local'], slowAfter: '1s' } };
    const profiles = [
      { name: 'gpu', nodeSelector: { matchLabels: { 'karpenter.sh/nodepool': 'gpu' } }, worker: { timeout: '2m', checks: { enabled: ['dns'], dns: { slowAfter: '3s' } } } },
      { name: 'plain', nodeSelector: {} },
    ];
    const values = { config: { worker: { checks }, profiles }, largeDnsAnswer: { enabled: false } };
    const data = find(await template(values), 'ConfigMap', 'kube-node-ready-worker').data as Record<string, string>;
    const controller = new WorkerConfigMap(new Profiles(parseConfig(values.config))).data();
    expect(Object.keys(data).sort()).toEqual(Object.keys(controller).sort());
    for (const key of Object.keys(controller)) expect(parseYaml(data[key] ?? ''), key).toEqual(parseYaml(controller[key] ?? ''));
    expect(parseYaml(data['worker.gpu.yaml'] ?? '')).toEqual({ enabled: ['dns'], dns: { names: ['kubernetes.default.svc.cluster.local'], slowAfter: '3s' } });
    const bad = await tryTemplate({ config: { profiles: [{ name: 'gpu', nodeSelector: {}, nodeManagement: { taints: [] } }] } });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('taints');
  });

  it('grants what remediation needs when a profile alone turns deleteFailedNodes on (node delete, the ledger)', async () => {
    const objects = await template({ config: { profiles: [{ name: 'batch', nodeSelector: { matchLabels: { pool: 'batch' } }, nodeManagement: { deleteFailedNodes: true } }] } });
    const role = find(objects, 'ClusterRole', 'kube-node-ready-controller') as KubeObject & { rules: Array<{ resources: string[]; verbs: string[] }> };
    expect(role.rules.find((r) => r.resources.includes('nodes'))?.verbs).toContain('delete');
    expect(findAll(objects, 'ConfigMap').map((c) => c.metadata.name)).toContain('kube-node-ready-controller-remediation');
    const off = find(await template({}), 'ClusterRole', 'kube-node-ready-controller') as typeof role;
    expect(off.rules.find((r) => r.resources.includes('nodes'))?.verbs).not.toContain('delete');
  });

  it('passes the mtu, egress, http and slowness keys to the worker ConfigMap, and the schema rejects bad ones', async () => {
    const checks = {
      enabled: ['dns', 'api', 'tcp', 'service', 'podnet', 'mtu', 'egress', 'http'],
      onSlow: 'fail',
      dns: { externalNames: ['registry.example.com'], slowAfter: '500ms' },
      api: { endpoints: ['10.0.0.5:6443'] },
      mtu: { mtu: 1450, largeName: 'large.kube-node-ready.svc.cluster.local' },
      egress: { port: 8443, tls: false },
      http: {
        timeout: '3s',
        targets: [
          { url: 'https://registry.internal/v2/', expectStatus: '200-499', ca: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' },
          { url: 'http://10.0.0.5:8080/ready', expectStatus: [200, '300-302'], caFile: '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt', timeout: '1s' },
        ],
      },
    };
    const custom = find(await template({ config: { worker: { checks } } }), 'ConfigMap', 'kube-node-ready-worker');
    expect(parseYaml((custom.data as Record<string, string>)['worker.yaml'] ?? '')).toEqual(checks);
    const bad = await tryTemplate({ config: { worker: { checks: { onSlow: 'panic' } } } });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('onSlow');
    const noUrl = await tryTemplate({ config: { worker: { checks: { http: { targets: [{ expectStatus: 200 }] } } } } });
    expect(noUrl.code).not.toBe(0);
    expect(noUrl.stderr).toContain('url');
  });

  it('remediation on renders its ledger ConfigMap without data, so the release owns it and uninstall removes it', async () => {
    expect(findAll(defaults, 'ConfigMap').map((c) => c.metadata.name)).not.toContain('kube-node-ready-controller-remediation');
    const ledger = find(everything, 'ConfigMap', 'kube-node-ready-controller-remediation');
    expect(ledger.metadata.namespace).toBe('kube-node-ready-worker');
    expect(ledger.metadata.labels?.['app.kubernetes.io/component']).toBe('controller');
    // No data: the controller's entries are never overwritten by an upgrade.
    expect(ledger.data).toBeUndefined();
    const custom = await template({ config: { nodeManagement: { deleteFailedNodes: true }, leaderElection: { leaseName: 'knr' }, worker: { namespace: 'node-ready' } } });
    expect(find(custom, 'ConfigMap', 'knr-remediation').metadata.namespace).toBe('node-ready');
  });

  it('every optional feature on adds the ServiceMonitor and the PrometheusRule', () => {
    const monitor = find(everything, 'ServiceMonitor');
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor.metadata.labels?.release).toBe('prometheus');
    const spec = monitor.spec as { selector: { matchLabels: Record<string, string> }; endpoints: Array<{ port: string; path: string }> };
    expect(spec.endpoints).toEqual([expect.objectContaining({ port: 'http-metrics', path: '/metrics' })]);
    // The ServiceMonitor selects the metrics Service (and only it).
    const service = find(everything, 'Service', 'kube-node-ready-metrics');
    for (const [k, v] of Object.entries(spec.selector.matchLabels)) expect(service.metadata.labels?.[k], k).toBe(v);
    for (const other of findAll(everything, 'Service').filter((s) => s !== service)) {
      expect(Object.entries(spec.selector.matchLabels).every(([k, v]) => other.metadata.labels?.[k] === v), other.metadata.name).toBe(false);
    }
    expect(find(everything, 'PrometheusRule').apiVersion).toBe('monitoring.coreos.com/v1');
  });

  it('every object carries the standard app.kubernetes.io labels and the namespaced ones the release namespace (the kubernetes Service\'s, default)', () => {
    for (const o of everything) {
      const labels = o.metadata.labels ?? {};
      expect(labels['app.kubernetes.io/name'], `${o.kind}/${o.metadata.name}`).toBe('kube-node-ready');
      expect(labels['app.kubernetes.io/instance']).toBe('kube-node-ready');
      expect(labels['app.kubernetes.io/managed-by']).toBe('Helm');
      expect(labels['app.kubernetes.io/version']).toBe('0.1.0');
      expect(labels['app.kubernetes.io/component']).toMatch(/^(controller|worker)$/);
      expect(labels['helm.sh/chart']).toBe('kube-node-ready-0.1.0');
      expect(labels['example.com/team']).toBe('platform'); // commonLabels
      // The API server endpoints are the EndpointSlices of default/kubernetes: that Role lives beside them.
      // The cluster DNS Service's, in kube-system: the release namespace here. The worker's reads:
      // in default and kube-system. The worker's own objects: in the worker namespace.
      const worker = [
        'ServiceAccount/kube-node-ready-worker',
        'ConfigMap/kube-node-ready-worker',
        'ConfigMap/kube-node-ready-controller-remediation',
        'Role/kube-node-ready-controller',
        'RoleBinding/kube-node-ready-controller',
        'Service/kube-node-ready-large-dns',
        'EndpointSlice/kube-node-ready-large-dns',
      ];
      const namespace =
        o.metadata.name === 'kube-node-ready-api-endpoints' ? 'default'
        : worker.includes(`${o.kind}/${o.metadata.name}`) ? 'kube-node-ready-worker'
        : /Role/.test(o.kind) && o.metadata.name === 'kube-node-ready-worker' ? o.metadata.namespace
        : NAMESPACE;
      const clusterScoped = o.kind.startsWith('Cluster') || ['PriorityClass', 'Namespace', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'].includes(o.kind);
      if (clusterScoped) expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBeUndefined();
      else expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(namespace);
    }
  });

  it('the worker namespace is the chart\'s own, labelled to enforce Pod Security "restricted"; one named in config.worker.namespace is used, not created; workerNamespace.create=false: the release namespace', async () => {
    const ns = find(defaults, 'Namespace', 'kube-node-ready-worker');
    expect(ns.metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/enforce-version': 'latest',
      'pod-security.kubernetes.io/warn': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
    });
    const inNamespace = (objects: KubeObject[], namespace: string) =>
      objects.filter((o) => o.metadata.namespace === namespace).map((o) => `${o.kind}/${o.metadata.name}`).sort();
    // Only the worker's objects and the controller's Role for them.
    expect(inNamespace(defaults, 'kube-node-ready-worker')).toEqual([
      'ConfigMap/kube-node-ready-worker',
      'EndpointSlice/kube-node-ready-large-dns',
      'Role/kube-node-ready-controller',
      'RoleBinding/kube-node-ready-controller',
      'Service/kube-node-ready-large-dns',
      'ServiceAccount/kube-node-ready-worker',
    ]);
    expect(withTempFile(configOf(defaults), (p) => loadConfig(p)).worker.namespace).toBe('kube-node-ready-worker');

    const named = await template({ config: { worker: { namespace: 'node-ready' } } });
    expect(findAll(named, 'Namespace')).toEqual([]);
    expect(withTempFile(configOf(named), (p) => loadConfig(p)).worker.namespace).toBe('node-ready');
    expect(find(named, 'ServiceAccount', 'kube-node-ready-worker').metadata.namespace).toBe('node-ready');

    const old = await template({ workerNamespace: { create: false } });
    expect(findAll(old, 'Namespace')).toEqual([]);
    expect(withTempFile(configOf(old), (p) => loadConfig(p)).worker.namespace).toBe(NAMESPACE);
    expect(find(old, 'Role', 'kube-node-ready-controller').metadata.namespace).toBe(NAMESPACE);
  });

  it('the other release namespaces follow the release', async () => {
    const objects = await template({}, { namespace: 'node-ready' });
    const config = withTempFile(configOf(objects), (p) => loadConfig(p));
    expect(config.worker.namespace).toBe('kube-node-ready-worker');
    expect(find(objects, 'Role', 'kube-node-ready-controller').metadata.namespace).toBe('kube-node-ready-worker');
    expect(find(objects, 'Role', 'kube-node-ready-leader-election').metadata.namespace).toBe('node-ready');
    expect(find(objects, 'Role', 'kube-node-ready-api-endpoints').metadata.namespace).toBe('default');
    expect((find(objects, 'RoleBinding', 'kube-node-ready-api-endpoints').subjects as Array<{ namespace: string }>)[0]?.namespace).toBe('node-ready');
    // The cluster DNS Service's EndpointSlices: beside them, whatever the release namespace.
    expect(find(objects, 'Role', 'kube-node-ready-cluster-dns').metadata.namespace).toBe('kube-system');
    expect((find(objects, 'RoleBinding', 'kube-node-ready-cluster-dns').subjects as Array<{ namespace: string }>)[0]?.namespace).toBe('node-ready');
    const workerSa = find(objects, 'ServiceAccount', 'kube-node-ready-worker');
    expect(workerSa.metadata.namespace).toBe('kube-node-ready-worker');
  });
});

describe('largeDnsAnswer: a name whose DNS answer does not fit one packet, for the mtu check', () => {
  interface Slice extends KubeObject {
    addressType: string;
    ports: Array<{ name: string; port: number; protocol: string }>;
    endpoints: Array<{ addresses: string[]; conditions: { ready?: boolean } }>;
  }
  const largeDns = (objects: KubeObject[]) => objects.filter((o) => o.metadata.name.endsWith('-large-dns')).map((o) => `${o.kind}/${o.metadata.name}`);
  const workerChecks = (objects: KubeObject[]) => parseYaml((find(objects, 'ConfigMap', 'kube-node-ready-worker').data as Record<string, string>)['worker.yaml'] ?? '') as Record<string, unknown>;
  const controllerChecks = (objects: KubeObject[], configMap = 'kube-node-ready-config') =>
    withTempFile((find(objects, 'ConfigMap', configMap).data as Record<string, string>)['config.yaml'] ?? '', (p) => loadConfig(p)).worker.checks;

  it('default values: a headless Service without a selector, and our own EndpointSlice of ready TEST-NET-1 addresses', () => {
    const service = find(defaults, 'Service', 'kube-node-ready-large-dns') as KubeObject & { spec: Record<string, unknown> & { ports: Slice['ports'] } };
    expect(service.metadata.namespace).toBe('kube-node-ready-worker');
    expect(service.spec.clusterIP).toBe('None');
    expect(service.spec.selector).toBeUndefined();
    const slice = find(defaults, 'EndpointSlice', 'kube-node-ready-large-dns') as Slice;
    expect(slice.apiVersion).toBe('discovery.k8s.io/v1');
    expect(slice.metadata.namespace).toBe(service.metadata.namespace);
    expect(slice.metadata.labels?.['kubernetes.io/service-name']).toBe(service.metadata.name);
    // Not the EndpointSlice controller's: it would delete a slice it manages for a Service without a selector.
    expect(slice.metadata.labels?.['endpointslice.kubernetes.io/managed-by']).toBe('chart.kube-node-ready.io');
    expect(slice.addressType).toBe('IPv4');
    expect(slice.ports).toEqual(service.spec.ports);
    // Every endpoint ready (the cluster DNS publishes ready ones only), one address each, all
    // distinct and inside TEST-NET-1 (192.0.2.0/24, RFC 5737), which is routed nowhere.
    for (const e of slice.endpoints) expect(e.conditions.ready).toBe(true);
    const addresses = slice.endpoints.flatMap((e) => e.addresses);
    expect(addresses.length).toBe(slice.endpoints.length);
    expect(new Set(addresses).size).toBe(addresses.length);
    for (const a of addresses) expect(a, a).toMatch(/^192\.0\.2\.([1-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-4])$/);
  });

  it('the A answer for its name is well over one 1500-byte packet, even compressed', () => {
    const slice = find(defaults, 'EndpointSlice', 'kube-node-ready-large-dns') as Slice;
    const records = slice.endpoints.flatMap((e) => e.addresses).length;
    // A UDP answer that does not fit the client's buffer is compressed (miekg/dns, so CoreDNS):
    // each A record is then a 2-byte pointer to the question's name, type 2, class 2, TTL 4,
    // length 2 and the address 4 (RFC 1035 4.1.3, 4.1.4).
    const RECORD = 2 + 2 + 2 + 4 + 2 + 4;
    const question = LARGE_DNS_NAME.split('.').reduce((n, label) => n + 1 + label.length, 1) + 4;
    const answer = 12 + question + records * RECORD + 11; // header, question, records, EDNS OPT
    // The records alone exceed the worker's "large" by a quarter: the answer fills a UDP buffer of
    // a 1500-byte pod MTU (1472 bytes) with records to spare, and over TCP is more than one packet.
    expect(records * RECORD).toBeGreaterThan(1.25 * LARGE_ANSWER_BYTES);
    // Offered 1472 bytes (a 1500-byte packet), the server must leave records out: the packet is full.
    expect(Math.floor((1500 - 28 - 12 - question - 11) / RECORD)).toBeLessThan(records);
    expect(answer).toBe(2015); // 120 records
  });

  it('its name is the worker\'s mtu.largeName, in the worker ConfigMap and in the controller configuration that rewrites it, and the worker accepts it', () => {
    expect(workerChecks(defaults)).toEqual({ mtu: { largeName: LARGE_DNS_NAME } });
    expect(controllerChecks(defaults)).toEqual({ mtu: { largeName: LARGE_DNS_NAME } });
    expect(workerConfigSchema.parse(workerChecks(defaults)).mtu.largeName).toBe(LARGE_DNS_NAME);
  });

  it('follows the release name, the worker namespace and the cluster domain, and keeps the other mtu settings', async () => {
    const objects = await template({
      fullnameOverride: 'knr',
      config: { worker: { namespace: 'node-ready', checks: { clusterDomain: 'corp.example', mtu: { mtu: 1450 } } } },
    });
    expect(find(objects, 'Service', 'knr-large-dns').metadata.namespace).toBe('node-ready');
    expect(find(objects, 'EndpointSlice', 'knr-large-dns').metadata.labels?.['kubernetes.io/service-name']).toBe('knr-large-dns');
    const mtu = { mtu: 1450, largeName: 'knr-large-dns.node-ready.svc.corp.example' };
    expect(workerChecks(objects)).toEqual({ clusterDomain: 'corp.example', mtu });
    expect(controllerChecks(objects, 'knr-config')).toEqual({ clusterDomain: 'corp.example', mtu });
  });

  it('a mtu.largeName of the user\'s wins, and then nothing is rendered for it', async () => {
    const checks = { mtu: { largeName: 'big.example.svc.cluster.local' } };
    const objects = await template({ config: { worker: { checks } } });
    expect(largeDns(objects)).toEqual([]);
    expect(workerChecks(objects)).toEqual(checks);
    expect(controllerChecks(objects)).toEqual(checks);
  });

  it('largeDnsAnswer.enabled=false, or DaemonSet mode: neither object, and no mtu.largeName', async () => {
    const [off, daemonset] = await Promise.all([template({ largeDnsAnswer: { enabled: false } }), template({ deploymentMode: 'daemonset' })]);
    for (const objects of [off, daemonset]) {
      expect(largeDns(objects)).toEqual([]);
      expect(controllerChecks(objects)).toEqual({});
    }
    expect(workerChecks(off)).toEqual({});
  });

  it('needs no permission: the cluster DNS reads the EndpointSlice itself', async () => {
    expect(permissions(defaults)).toEqual(permissions(await template({ largeDnsAnswer: { enabled: false } })));
  });
});

describe('RBAC', () => {
  it('default install: exactly the listed permissions', () => {
    expect(permissions(defaults)).toEqual([...BASE_PERMISSIONS].sort());
  });

  it('remediation on (deleteFailedNodes): adds node deletion, NodeClaim get/list/watch/delete and get/update of its ledger ConfigMap, nothing else', () => {
    expect(permissions(everything)).toEqual([...BASE_PERMISSIONS, ...REMEDIATION_PERMISSIONS].sort());
  });

  it('readiness gates: list/watch of DaemonSets and pods in each namespace a required DaemonSet names (top level and profiles), of CSINodes when a CSI driver is required, nothing else', async () => {
    const gated = await template({
      config: {
        gates: { requireDaemonSets: [{ namespace: 'kube-system', name: 'aws-node' }, { namespace: 'gpu-operator', selector: { matchLabels: { tier: 'node' } } }] },
        profiles: [{ name: 'gpu', nodeSelector: {}, gates: { requireDaemonSets: [{ namespace: 'gpu-operator', name: 'nvidia-device-plugin' }], requireCSIDrivers: ['ebs.csi.aws.com'] } }],
      },
    });
    const gates = ['gpu-operator', 'kube-system'].flatMap((ns) => ['apps/daemonsets list', 'apps/daemonsets watch', 'core/pods list', 'core/pods watch'].map((p) => `Role/${ns}/kube-node-ready-gates ${p}`));
    expect(permissions(gated)).toEqual([...BASE_PERMISSIONS, ...gates, 'ClusterRole/kube-node-ready-controller storage.k8s.io/csinodes list', 'ClusterRole/kube-node-ready-controller storage.k8s.io/csinodes watch'].sort());
    expect(findAll(gated, 'RoleBinding').filter((b) => b.metadata.name === 'kube-node-ready-gates').map((b) => b.metadata.namespace).sort()).toEqual(['gpu-operator', 'kube-system']);
  });

  it('the ledger permission names the ConfigMap the controller uses, in the worker namespace, for any Lease name', async () => {
    for (const leaseName of ['knr', `${'a'.repeat(240)}.b-c`]) {
      const objects = await template({ config: { nodeManagement: { deleteFailedNodes: true }, leaderElection: { leaseName }, worker: { namespace: 'node-ready' } } });
      const config = withTempFile(configOf(objects), (p) => loadConfig(p));
      const ledger = ledgerLocation(config);
      expect(ledger.namespace).toBe('node-ready');
      const role = find(objects, 'Role', 'kube-node-ready-controller');
      expect(role.metadata.namespace).toBe('node-ready');
      expect((role.rules as Rule[]).filter((r) => r.resources.includes('configmaps') && r.resourceNames?.includes(ledger.name))).toEqual([
        { apiGroups: [''], resources: ['configmaps'], resourceNames: [ledger.name], verbs: ['get', 'update'] },
      ]);
    }
  });

  it('no wildcard, no secrets, no escalation verbs anywhere', () => {
    for (const p of permissions(everything)) {
      expect(p).not.toContain('*');
      expect(p).not.toMatch(/secrets|escalate|bind|impersonate|serviceaccounts\/token/);
    }
  });

  it('bindings grant each role to the right ServiceAccount', () => {
    const subjects = (kind: string, name: string) => (find(defaults, kind, name).subjects as Array<{ name: string; namespace: string }>).map((s) => `${s.namespace}/${s.name}`);
    expect(subjects('ClusterRoleBinding', 'kube-node-ready-controller')).toEqual(['kube-system/kube-node-ready-controller']);
    expect(subjects('RoleBinding', 'kube-node-ready-controller')).toEqual(['kube-system/kube-node-ready-controller']);
    expect(subjects('RoleBinding', 'kube-node-ready-leader-election')).toEqual(['kube-system/kube-node-ready-controller']);
    expect(subjects('RoleBinding', 'kube-node-ready-api-endpoints')).toEqual(['kube-system/kube-node-ready-controller']);
    expect(subjects('RoleBinding', 'kube-node-ready-cluster-dns')).toEqual(['kube-system/kube-node-ready-controller']);
    for (const binding of findAll(defaults, 'RoleBinding').filter((b) => b.metadata.name === 'kube-node-ready-worker')) {
      expect((binding.subjects as Array<{ name: string; namespace: string }>).map((s) => `${s.namespace}/${s.name}`)).toEqual(['kube-node-ready-worker/kube-node-ready-worker']);
    }
    // The controller names this ServiceAccount in every worker pod.
    expect(withTempFile(configOf(defaults), (p) => loadConfig(p)).worker.serviceAccountName).toBe('kube-node-ready-worker');
  });

  it('leader election off: no Lease role (and a single replica is required)', async () => {
    const objects = await template({ controller: { replicas: 1 }, config: { leaderElection: { enabled: false } } });
    expect(findAll(objects, 'Role').map((r) => r.metadata.name)).toEqual(['kube-node-ready-controller', 'kube-node-ready-api-endpoints', 'kube-node-ready-cluster-dns', 'kube-node-ready-worker', 'kube-node-ready-worker']);
    const twoReplicas = await tryTemplate({ config: { leaderElection: { enabled: false } } });
    expect(twoReplicas.code).not.toBe(0);
    expect(twoReplicas.stderr).toContain('controller.replicas must be 1 when config.leaderElection.enabled is false');
  });

  it('the cluster DNS Role follows config.reconciliation.clusterDnsService, and is left out when it is ""', async () => {
    const other = await template({ config: { reconciliation: { clusterDnsService: 'dns-system/coredns' } } });
    expect(find(other, 'Role', 'kube-node-ready-cluster-dns').metadata.namespace).toBe('dns-system');
    const none = await template({ config: { reconciliation: { clusterDnsService: '' } } });
    expect(findAll(none, 'Role').map((r) => r.metadata.name)).not.toContain('kube-node-ready-cluster-dns');
    expect(findAll(none, 'RoleBinding').map((r) => r.metadata.name)).not.toContain('kube-node-ready-cluster-dns');
  });

  it('the worker may read Services and EndpointSlices only in the namespaces of the Services its checks read (from config.worker.checks)', async () => {
    const workerRoles = (objects: KubeObject[]) => findAll(objects, 'Role').filter((r) => r.metadata.name === 'kube-node-ready-worker').map((r) => r.metadata.namespace).sort();
    expect(workerRoles(defaults)).toEqual(['default', 'kube-system']);
    const custom = await template({ config: { worker: { checks: { dnsService: 'dns-system/coredns', service: { services: ['default/kubernetes', 'shop/frontend', 'shop/cart'] } } } } });
    expect(workerRoles(custom)).toEqual(['default', 'dns-system', 'shop']);
    expect(findAll(custom, 'ClusterRole').map((r) => r.metadata.name)).toEqual(['kube-node-ready-controller']);
  });

  it('DaemonSet mode: exactly the agent permissions (its own nodes, their condition, their NodeVerifications, Events; the worker\'s reads), nothing of the controller', async () => {
    expect(permissions(await template({ deploymentMode: 'daemonset' }))).toEqual(
      [
        'ClusterRole/kube-node-ready-agent core/nodes get',
        'ClusterRole/kube-node-ready-agent core/nodes patch',
        'ClusterRole/kube-node-ready-agent core/nodes/status patch',
        'ClusterRole/kube-node-ready-agent kube-node-ready.io/nodeverifications get',
        'ClusterRole/kube-node-ready-agent kube-node-ready.io/nodeverifications create',
        'ClusterRole/kube-node-ready-agent kube-node-ready.io/nodeverifications update',
        'ClusterRole/kube-node-ready-agent kube-node-ready.io/nodeverifications delete',
        'ClusterRole/kube-node-ready-agent core/events create',
        'ClusterRole/kube-node-ready-agent core/events patch',
        'Role/default/kube-node-ready-worker core/services get',
        'Role/default/kube-node-ready-worker discovery.k8s.io/endpointslices list',
        'Role/kube-system/kube-node-ready-worker core/services get',
        'Role/kube-system/kube-node-ready-worker discovery.k8s.io/endpointslices list',
      ].sort(),
    );
  });

  it('rbac.create=false renders no roles or bindings', async () => {
    const objects = await template({ rbac: { create: false } });
    expect(objects.filter((o) => /Role/.test(o.kind))).toEqual([]);
  });
});

describe('admission policies (docs/installation.md#security)', () => {
  interface Policy {
    spec: {
      failurePolicy: string;
      matchConditions: Array<{ expression: string }>;
      variables?: Array<{ name: string; expression: string }>;
      validations: Array<{ expression: string; message: string }>;
    };
  }
  const policies = (objects: KubeObject[]) => findAll(objects, 'ValidatingAdmissionPolicy') as Array<KubeObject & Policy>;
  const text = (o: KubeObject) => JSON.stringify(o);

  it('on by default on Kubernetes 1.30+, each bound with Deny, failing closed, matching the controller\'s ServiceAccount only', () => {
    expect(policies(defaults).map((p) => p.metadata.name).sort()).toEqual(['kube-node-ready-controller-node-deletion', 'kube-node-ready-controller-node-writes', 'kube-node-ready-controller-pods']);
    for (const p of policies(defaults)) {
      expect(p.spec.failurePolicy).toBe('Fail');
      expect(p.spec.matchConditions.map((c) => c.expression)).toEqual(['request.userInfo.username == "system:serviceaccount:kube-system:kube-node-ready-controller"']);
      const binding = find(defaults, 'ValidatingAdmissionPolicyBinding', p.metadata.name);
      expect(binding.spec).toEqual({ policyName: p.metadata.name, validationActions: ['Deny'] });
    }
    // Remediation on: NodeClaim deletion is held too.
    expect(policies(everything).map((p) => p.metadata.name)).toContain('kube-node-ready-controller-nodeclaim-deletion');
  });

  it('follow the configuration: taints, verified label, condition, worker image, ServiceAccount and namespace', async () => {
    const objects = await template({
      image: { repository: 'registry.example.com/knr', digest: `sha256:${'a'.repeat(64)}` },
      config: {
        worker: { namespace: 'verify', serviceAccountName: 'checker' },
        nodeManagement: { taints: [{ key: 'example.com/unverified', value: 'x', effect: 'NoExecute' }], failedTaint: { key: 'example.com/failed' }, verifiedLabel: { key: 'example.com/ok', value: 'yes' }, condition: { type: 'example.com/Net' } },
      },
    });
    const pods = text(find(objects, 'ValidatingAdmissionPolicy', 'kube-node-ready-controller-pods'));
    expect(pods).toContain(`registry.example.com/knr@sha256:${'a'.repeat(64)}`);
    expect(pods).toContain('\\"checker\\"');
    expect(pods).toContain('\\"verify\\"');
    const writes = find(objects, 'ValidatingAdmissionPolicy', 'kube-node-ready-controller-node-writes') as KubeObject & Policy;
    const variable = (name: string) => JSON.parse(writes.spec.variables!.find((v) => v.name === name)!.expression) as string[];
    expect(variable('ourTaints')).toEqual(['example.com/unverified', 'example.com/failed']);
    expect(variable('verificationTaints')).toEqual(['example.com/unverified']);
    expect(text(writes)).toContain('example.com/ok');
    expect(text(writes)).toContain('example.com/Net');
    expect(text(find(objects, 'ValidatingAdmissionPolicy', 'kube-node-ready-controller-node-deletion'))).toContain('example.com/unverified');
  });

  it('admit beside the worker only the container checks\' images, top-level and per profile (none by default)', async () => {
    const expression = (objects: KubeObject[]) =>
      (find(objects, 'ValidatingAdmissionPolicy', 'kube-node-ready-controller-pods') as KubeObject & Policy).spec.validations.find((v) => v.message.startsWith('spec.containers:'))!.expression;
    expect(expression(defaults)).toContain("object.spec.containers.all(c, c.name == 'worker' || c.image in [])");
    const objects = await template(
      {
        config: {
          worker: { containerChecks: [{ name: 'gpu', image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04' }] },
          profiles: [
            { name: 'storage', nodeSelector: { matchLabels: { pool: 'storage' } }, worker: { containerChecks: [{ name: 'disk', image: 'busybox:1.36' }, { name: 'gpu', image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04' }] } },
            { name: 'plain', nodeSelector: { matchLabels: { pool: 'plain' } } },
          ],
        },
      },
    );
    expect(expression(objects)).toContain('c.image in ["nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04","busybox:1.36"]');
    expect(expression(objects)).toContain("object.spec.containers[0].name == 'worker'");
  });

  it('the controller changes no annotation on a Node (its progress is in NodeVerifications)', () => {
    const writes = find(defaults, 'ValidatingAdmissionPolicy', 'kube-node-ready-controller-node-writes') as KubeObject & Policy;
    expect(writes.spec.variables!.map((v) => v.name)).not.toContain('ourAnnotations');
    expect(writes.spec.validations.find((v) => v.message.startsWith('metadata.annotations:'))?.expression).toBe('variables.newAnnotations == variables.oldAnnotations');
    expect(text(writes)).not.toMatch(/kube-node-ready\.io\/(node-uid|attempt|failures|phase|next-attempt-at|last-outcome|last-message|verified-at|failing)\b/);
  });

  it('every validation\'s message names what it guards', () => {
    for (const p of [...policies(everything)]) {
      for (const v of p.spec.validations) expect(v.message, v.expression).toMatch(/^(spec|metadata|status)[.:]|^kube-node-ready's controller/);
    }
  });

  it('admissionPolicies.enabled=false, or Kubernetes before 1.30: none; validationActions reach the bindings', async () => {
    const off = await template({ admissionPolicies: { enabled: false } });
    expect(off.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'))).toEqual([]);
    const old = await template({}, { extraArgs: ['--kube-version', 'v1.29.4'] });
    expect(old.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'))).toEqual([]);
    const trial = await template({ admissionPolicies: { validationActions: ['Warn', 'Audit'] } });
    for (const b of findAll(trial, 'ValidatingAdmissionPolicyBinding')) expect((b.spec as { validationActions: string[] }).validationActions).toEqual(['Warn', 'Audit']);
    const bad = await tryTemplate({ admissionPolicies: { validationActions: ['Allow'] } });
    expect(bad.code).not.toBe(0);
  });
});

describe('the controller Deployment', () => {
  it('2 replicas, system-cluster-critical, its ServiceAccount, the controller subcommand with the mounted config', () => {
    const d = deploymentOf(defaults);
    expect(d.spec.replicas).toBe(2);
    const pod = d.spec.template.spec;
    expect(pod.priorityClassName).toBe('system-cluster-critical');
    expect(pod.serviceAccountName).toBe('kube-node-ready-controller');
    const c = controllerOf(defaults);
    expect(c.args).toEqual(['controller', '--config', '/etc/kube-node-ready/config.yaml']);
    expect(c.volumeMounts).toContainEqual({ name: 'config', mountPath: '/etc/kube-node-ready', readOnly: true });
    expect(c.resources.requests).toEqual({ cpu: '50m', memory: '128Mi' });
    expect(c.resources.limits).toEqual({ memory: '256Mi' });
  });

  it('restricted security context: non-root 65532, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault seccomp', () => {
    const pod = deploymentOf(defaults).spec.template.spec;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } });
    expect(controllerOf(defaults).securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
  });

  it('probes: liveness /healthz and readiness /readyz on the metrics port, or the health port when set', () => {
    const c = controllerOf(defaults);
    expect(c.ports).toEqual([{ name: 'http-metrics', containerPort: 8080, protocol: 'TCP' }]);
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http-metrics' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http-metrics' });
    const h = controllerOf(everything);
    expect(h.ports).toContainEqual({ name: 'health', containerPort: 8081, protocol: 'TCP' });
    expect(h.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(h.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
  });

  it('health on the metrics address is one port; health on another address with the same port is refused', async () => {
    const same = controllerOf(await template({ config: { health: { bindAddress: '0.0.0.0:8080' } } }));
    expect(same.ports).toEqual([{ name: 'http-metrics', containerPort: 8080, protocol: 'TCP' }]);
    expect(same.livenessProbe.httpGet.port).toBe('http-metrics');
    const clash = await tryTemplate({ config: { health: { bindAddress: '127.0.0.1:8080' } } });
    expect(clash.code).not.toBe(0);
    expect(clash.stderr).toContain('config.health.bindAddress must use another port');
  });

  it('the metrics Service port follows config.metrics.bindAddress', async () => {
    const objects = await template({ config: { metrics: { bindAddress: ':9100' } } });
    expect((find(objects, 'Service', 'kube-node-ready-metrics').spec as { ports: Array<{ port: number }> }).ports[0]?.port).toBe(9100);
    expect(controllerOf(objects).ports[0]?.containerPort).toBe(9100);
  });

  it('env POD_NAME, POD_NAMESPACE, NODE_NAME, POD_IP from the downward API', () => {
    const env = Object.fromEntries(controllerOf(defaults).env.map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
    expect(env).toEqual({ POD_NAME: 'metadata.name', POD_NAMESPACE: 'metadata.namespace', NODE_NAME: 'spec.nodeName', POD_IP: 'status.podIP' });
  });

  it('listenOnPodIP binds metrics and health to the pod IP', async () => {
    const objects = await template({ controller: { listenOnPodIP: true }, config: { health: { bindAddress: ':8081' } } });
    expect(controllerOf(objects).args).toEqual([
      'controller',
      '--config',
      '/etc/kube-node-ready/config.yaml',
      '--metrics-bind-address=$(POD_IP):8080',
      '--health-bind-address=$(POD_IP):8081',
    ]);
  });

  it('tolerates the verification taints (so it can start on a cluster of new nodes) and prefers verified nodes', async () => {
    const pod = deploymentOf(defaults).spec.template.spec;
    expect(pod.tolerations).toEqual([
      { key: 'node-ready/unverified', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'CriticalAddonsOnly', operator: 'Exists' },
    ]);
    expect(pod.affinity).toEqual({
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 100, preference: { matchExpressions: [{ key: 'node-ready/verified', operator: 'In', values: ['true'] }] } },
        ],
      },
    });
    const custom = await template({ config: { nodeManagement: { taints: [{ key: 'example.com/unverified', effect: 'NoExecute' }] } } });
    expect(deploymentOf(custom).spec.template.spec.tolerations[0]).toEqual({ key: 'example.com/unverified', operator: 'Exists', effect: 'NoExecute' });
  });

  it('spreads replicas across nodes (hard) and zones (soft)', () => {
    const spread = deploymentOf(defaults).spec.template.spec.topologySpreadConstraints;
    const selector = deploymentOf(defaults).spec.selector.matchLabels;
    expect(spread).toEqual([
      expect.objectContaining({ topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule', maxSkew: 1, labelSelector: { matchLabels: selector } }),
      expect.objectContaining({ topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway', maxSkew: 1, labelSelector: { matchLabels: selector } }),
    ]);
  });

  it('the selector is stable and matches the pod labels', () => {
    const d = deploymentOf(everything);
    expect(d.spec.selector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'kube-node-ready',
      'app.kubernetes.io/instance': 'kube-node-ready',
      'app.kubernetes.io/component': 'controller',
    });
    for (const [k, v] of Object.entries(d.spec.selector.matchLabels)) expect(d.spec.template.metadata.labels[k]).toBe(v);
    expect(d.spec.template.metadata.labels['example.com/tier']).toBe('system');
    expect(d.spec.template.metadata.annotations['example.com/owner']).toBe('platform');
  });

  it('imagePullSecrets go to the controller pods and, by default, the worker pods', () => {
    expect(deploymentOf(everything).spec.template.spec.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
    expect(withTempFile(configOf(everything), (p) => loadConfig(p)).worker.imagePullSecrets).toEqual(['registry-credentials']);
  });
});

describe('the config checksum rolls the Deployment on config changes only', () => {
  const checksum = (objects: KubeObject[]) => deploymentOf(objects).spec.template.metadata.annotations['checksum/config'];

  it('changes when the controller config changes, not when an unrelated value does', async () => {
    const [changed, unrelated] = await Promise.all([
      template({ config: { reconciliation: { maxRetries: 7 } } }),
      template({ controller: { podLabels: { extra: 'label' } } }),
    ]);
    expect(checksum(defaults)).toMatch(/^[a-f0-9]{64}$/);
    expect(checksum(changed)).not.toBe(checksum(defaults));
    expect(checksum(unrelated)).toBe(checksum(defaults));
  });

  it('changes when the image (and so the worker image in the config) changes', async () => {
    expect(checksum(await template({ image: { tag: '9.9.9' } }))).not.toBe(checksum(defaults));
  });
});

describe('PodDisruptionBudget', () => {
  it('lets a drain take at most one controller replica', () => {
    const pdb = find(defaults, 'PodDisruptionBudget');
    expect(pdb.apiVersion).toBe('policy/v1');
    expect(pdb.spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: deploymentOf(defaults).spec.selector.matchLabels } });
  });

  it('can be turned off', async () => {
    expect(findAll(await template({ podDisruptionBudget: { enabled: false } }), 'PodDisruptionBudget')).toEqual([]);
  });
});

describe('the rendered controller configuration', () => {
  it('default values: loadConfig accepts it; it is the controller default plus the release namespace and the chart image', () => {
    const config = withTempFile(configOf(defaults), (p) => loadConfig(p));
    const expected = parseConfig({ worker: { namespace: 'kube-node-ready-worker', image: { tag: '0.1.0' }, checks: { mtu: { largeName: LARGE_DNS_NAME } } } });
    expect(config).toEqual(expected);
  });

  it('every feature on: loadConfig accepts it', () => {
    const config = withTempFile(configOf(everything), (p) => loadConfig(p));
    expect(config.nodeManagement.deleteFailedNodes).toBe(true);
    expect(config.health.bindAddress).toBe('0.0.0.0:8081');
  });

  it('the worker image follows the chart image (tag, digest, repository) unless set', async () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    const objects = await template({ image: { repository: 'registry.example.com/knr', digest } });
    expect((controllerOf(objects) as Container & { image: string }).image).toBe(`registry.example.com/knr@${digest}`);
    const pinned = withTempFile(configOf(objects), (p) => loadConfig(p));
    expect(pinned.worker.image).toEqual({ repository: 'registry.example.com/knr', tag: '0.1.0', digest });
    const own = withTempFile(configOf(await template({ config: { worker: { image: { repository: 'other/worker', tag: '1.2.3' } } } })), (p) => loadConfig(p));
    expect(own.worker.image).toEqual({ repository: 'other/worker', tag: '1.2.3', digest: '' });
  });
});

describe('values.schema.json rejects bad values at install time', () => {
  const rejects = async (values: unknown, message: RegExp) => {
    const result = await tryTemplate(values);
    expect(result.code, `helm accepted ${JSON.stringify(values)}`).not.toBe(0);
    expect(result.stderr).toMatch(message);
  };

  it('a typo in a chart value', async () => {
    await rejects({ controller: { replica: 3 } }, /replica/);
    await rejects({ serviceMonitor: { enable: true } }, /enable/);
  });

  it('a typo in a controller config key', async () => {
    await rejects({ config: { reconciliation: { maxRetry: 3 } } }, /maxRetry/);
    await rejects({ config: { nodeManagment: {} } }, /nodeManagment/);
  });

  it('a typo or bad value in the worker checks (config.worker.checks, validated with the worker\'s schema)', async () => {
    await rejects({ config: { worker: { checks: { dns: { server: ['10.96.0.10'] } } } } }, /server/);
    await rejects({ config: { worker: { checks: { enabled: ['dns', 'ping'] } } } }, /enabled/);
    const ok = await tryTemplate({ config: { worker: { checks: { enabled: ['dns', 'api'], dns: { externalNames: ['example.com'] } } } } });
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('a bad controller config value (duration, enum, range)', async () => {
    await rejects({ config: { worker: { timeout: '10' } } }, /timeout/);
    await rejects({ config: { logging: { level: 'verbose' } } }, /level/);
    await rejects({ config: { reconciliation: { maxRetries: -1 } } }, /maxRetries/);
  });

  it('accepts examples/controller-config.yaml as the config value', async () => {
    const example = parseYaml(readFileSync(join(CHART_DIR, '..', '..', '..', 'examples', 'controller-config.yaml'), 'utf8')) as unknown;
    const ok = await tryTemplate({ config: example });
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('accepts valid partial overrides', async () => {
    const ok = await tryTemplate({ config: { worker: { timeout: '90s' }, reconciliation: { maxRetries: 3 } }, controller: { replicas: 3 } });
    expect(ok.code, ok.stderr).toBe(0);
  });
});

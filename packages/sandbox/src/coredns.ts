// Real CoreDNS, the cluster DNS of the real nodes: built from its Go module (go/build.sh coredns),
// made into an image like the upstream one (a static binary allowed to bind port 53 as a non-root
// user), pushed to the real nodes' registry and deployed as kubeadm deploys it, pinned to the
// sandbox's system node (real-node.ts). It serves the cluster domain from the API and forwards
// nothing: no upstream exists, and nothing outside the sandbox may be asked.
//
// It has a Service of its own (kube-system/coredns at CLUSTER_DNS_IP), not kube-dns: the simulated
// nodes keep the sandbox's kube-dns (dns.ts), which serves hundreds of them without a process each,
// and a kube-dns behind CoreDNS would need a real node in every sandbox.
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import dns2 from 'dns2';
import { stringify } from 'yaml';
import { k8s, loadKubeConfig, statusCode } from './kube.js';
import type { SandboxLayout } from './layout.js';
import { run, runOk, sleep } from './proc.js';

/** The real nodes' cluster DNS Service: the kubelets' clusterDNS, inside the sandbox's service CIDR (layout.ts) and apart from kube-dns. */
export const CLUSTER_DNS = { namespace: 'kube-system', name: 'coredns', ip: '10.96.0.53' } as const;
/** `kube-system/coredns`: the controller's reconciliation.clusterDnsService for real nodes. */
export const CLUSTER_DNS_SERVICE = `${CLUSTER_DNS.namespace}/${CLUSTER_DNS.name}`;
/** The pods' label (kube-dns's pods are the sandbox's own servers, labelled k8s-app=kube-dns). */
export const COREDNS_APP = 'coredns-real';
/** The system node: a real node started with the first real node, without the verification taint, where CoreDNS runs. */
export const SYSTEM_NODE = 'real-system';
/** The label marking the system node: CoreDNS's nodeSelector. */
export const SYSTEM_NODE_LABEL = 'sandbox.kube-node-ready.io/system';
/**
 * The system node's taint: only cluster add-ons run there (AKS taints its system node pools so;
 * kubeadm's CoreDNS tolerates it). Keeps the workloads of other tests, which expect simulated nodes
 * and images a real kubelet cannot pull, off the real node that never goes away.
 */
export const SYSTEM_NODE_TAINT = { key: 'CriticalAddonsOnly', value: 'true', effect: 'NoSchedule' } as const;

/** The CoreDNS version the wrapper module pins (go/coredns/go.mod). */
export function coreDnsVersion(root: string): string {
  const version = /github\.com\/coredns\/coredns (v[\d.]+)/.exec(readFileSync(join(root, 'packages', 'sandbox', 'go', 'coredns', 'go.mod'), 'utf8'))?.[1];
  if (!version) throw new Error('packages/sandbox/go/coredns/go.mod does not require github.com/coredns/coredns');
  return version;
}

/**
 * The Corefile: kubeadm's, without `forward` (no upstream may be asked: names outside the cluster
 * domain get SERVFAIL: no plugin is left to ask). `hosts` lists extra entries served before the kubernetes plugin
 * (an `/etc/hosts`-style block, each `IP NAME...`), for names a test wants answered.
 */
export function corefile(clusterDomain: string, hosts: readonly string[] = []): string {
  return [
    '.:53 {',
    '    errors',
    '    health {',
    '       lameduck 5s',
    '    }',
    '    ready',
    ...(hosts.length > 0 ? ['    hosts {', ...hosts.map((h) => `       ${h}`), '       fallthrough', '    }'] : []),
    `    kubernetes ${clusterDomain} in-addr.arpa ip6.arpa {`,
    '       pods insecure',
    '       fallthrough in-addr.arpa ip6.arpa',
    '       ttl 30',
    '    }',
    '    prometheus :9153',
    '    cache 30 {',
    `       disable success ${clusterDomain}`,
    `       disable denial ${clusterDomain}`,
    '    }',
    '    loop',
    '    reload',
    '    loadbalance',
    '}',
    '',
  ].join('\n');
}

/**
 * kubeadm's CoreDNS objects (cmd/kubeadm/app/phases/addons/dns/manifests.go): ServiceAccount,
 * ClusterRole and binding, ConfigMap, Deployment and Service, with the sandbox's differences: one
 * replica pinned to the system node, the pods labelled COREDNS_APP, and the Service CLUSTER_DNS.
 */
export function coreDnsObjects(opts: { image: string; clusterDomain: string; hosts?: readonly string[] }): k8s.KubernetesObject[] {
  const { namespace, name, ip } = CLUSTER_DNS;
  const labels = { 'k8s-app': COREDNS_APP };
  const port = (p: number | string) => p as unknown as k8s.IntOrString;
  const serviceAccount: k8s.V1ServiceAccount = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } };
  const role: k8s.V1ClusterRole = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'system:coredns' },
    rules: [
      { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
    ],
  };
  const binding: k8s.V1ClusterRoleBinding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'system:coredns' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:coredns' },
    subjects: [{ kind: 'ServiceAccount', name, namespace }],
  };
  const config: k8s.V1ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data: { Corefile: corefile(opts.clusterDomain, opts.hosts) } };
  const deployment: k8s.V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels },
    spec: {
      replicas: 1,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: port(1) } },
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          priorityClassName: 'system-cluster-critical',
          serviceAccountName: name,
          tolerations: [{ key: SYSTEM_NODE_TAINT.key, operator: 'Exists' }],
          nodeSelector: { 'kubernetes.io/os': 'linux', [SYSTEM_NODE_LABEL]: 'true' },
          containers: [
            {
              name: 'coredns',
              image: opts.image,
              imagePullPolicy: 'IfNotPresent',
              resources: { limits: { memory: '170Mi' }, requests: { cpu: '100m', memory: '70Mi' } },
              args: ['-conf', '/etc/coredns/Corefile'],
              volumeMounts: [{ name: 'config-volume', mountPath: '/etc/coredns', readOnly: true }],
              ports: [
                { containerPort: 53, name: 'dns', protocol: 'UDP' },
                { containerPort: 53, name: 'dns-tcp', protocol: 'TCP' },
                { containerPort: 9153, name: 'metrics', protocol: 'TCP' },
                { containerPort: 8080, name: 'liveness-probe', protocol: 'TCP' },
                { containerPort: 8181, name: 'readiness-probe', protocol: 'TCP' },
              ],
              livenessProbe: { httpGet: { path: '/health', port: port('liveness-probe'), scheme: 'HTTP' }, initialDelaySeconds: 60, timeoutSeconds: 5, successThreshold: 1, failureThreshold: 5 },
              // kubeadm leaves the rest at the API's defaults: every 10 s, 1 s timeout, 3 failures.
              readinessProbe: { httpGet: { path: '/ready', port: port('readiness-probe'), scheme: 'HTTP' }, periodSeconds: 10, failureThreshold: 3 },
              securityContext: { allowPrivilegeEscalation: false, capabilities: { add: ['NET_BIND_SERVICE'], drop: ['ALL'] }, readOnlyRootFilesystem: true },
            },
          ],
          dnsPolicy: 'Default',
          volumes: [{ name: 'config-volume', configMap: { name, items: [{ key: 'Corefile', path: 'Corefile' }] } }],
        },
      },
    },
  };
  const service: k8s.V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, labels: { ...labels, 'kubernetes.io/name': 'CoreDNS' } },
    spec: {
      clusterIP: ip,
      selector: labels,
      ports: [
        { name: 'dns', port: 53, protocol: 'UDP', targetPort: port(53) },
        { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: port(53) },
        { name: 'metrics', port: 9153, protocol: 'TCP', targetPort: port(9153) },
      ],
    },
  };
  return [serviceAccount, role, binding, config, deployment, service];
}

/**
 * The image, made as the upstream one is (its Dockerfile): the static binary at /coredns, allowed to
 * bind port 53 by a file capability (setcap cap_net_bind_service=+ep, kept in the layer as the
 * security.capability xattr), run as the non-root user 65532. The kubelet adds NET_BIND_SERVICE to
 * the container (the Deployment asks for it), which is what lets the file capability take effect
 * under allowPrivilegeEscalation: false. Appended to an empty base with crane, like the pause image.
 */
export async function pushCoreDnsImage(opts: { crane: (args: string[]) => Promise<string>; binary: string; workDir: string; image: string }): Promise<void> {
  const root = join(opts.workDir, 'root');
  rmSync(opts.workDir, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  const file = join(root, 'coredns');
  copyFileSync(opts.binary, file);
  chmodSync(file, 0o755);
  if ((await run('setcap', ['cap_net_bind_service=+ep', file])).code !== 0) {
    throw new Error('setcap cap_net_bind_service=+ep on the CoreDNS binary failed: the real nodes\' CoreDNS image needs setcap (Debian: apt-get install libcap2-bin) and CAP_SETFCAP');
  }
  const tar = join(opts.workDir, 'coredns.tar');
  // A PAX archive keeps the capability (SCHILY.xattr.security.capability), which containerd sets when it unpacks the layer.
  await runOk('tar', ['--xattrs', '--xattrs-include=security.capability', '--format=posix', '--pax-option=delete=atime,delete=ctime', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '-C', root, '-cf', tar, 'coredns']);
  const appended = (await opts.crane(['append', '--oci-empty-base', '-f', tar, '-t', opts.image])).trim().split('\n').pop()!;
  await opts.crane(['mutate', appended, '--entrypoint', '/coredns', '--user', '65532:65532', '--set-platform', 'linux/amd64', '-t', opts.image]);
  rmSync(opts.workDir, { recursive: true, force: true });
}

/**
 * Deploys CoreDNS on the system node `node` and resolves once it serves: the node Ready, the objects
 * applied, then waitForCoreDns. One budget for all of it.
 */
export async function deployCoreDns(opts: { layout: SandboxLayout; kubectl: string; node: string; image: string; hosts?: readonly string[]; timeoutMs: number }): Promise<{ pod: string; podIp: string }> {
  const { layout } = opts;
  const kc = loadKubeConfig(layout.paths.kubeconfig);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const deadline = Date.now() + opts.timeoutMs;
  let seen = 'not registered';
  for (;;) {
    const node = await core.readNode({ name: opts.node }).catch(() => undefined);
    const ready = node?.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready?.status === 'True') break;
    if (node) seen = ready ? `Ready=${ready.status} (${ready.reason ?? ''}: ${ready.message ?? ''})` : 'no Ready condition yet';
    if (Date.now() > deadline) throw new Error(`the system node ${opts.node} was not Ready within ${opts.timeoutMs} ms: ${seen}`);
    await sleep(500);
  }
  await applyCoreDns(opts.kubectl, layout.paths.kubeconfig, coreDnsObjects({ image: opts.image, clusterDomain: layout.clusterDomain, ...(opts.hosts ? { hosts: opts.hosts } : {}) }));
  return waitForCoreDns(kc, { clusterDomain: layout.clusterDomain, kubernetesServiceIp: layout.kubernetesServiceIp, timeoutMs: Math.max(1000, deadline - Date.now()) });
}

/** Applies the objects server-side with the sandbox's kubectl (idempotent: a daemon restarted on the same cluster re-applies them). */
export async function applyCoreDns(kubectl: string, kubeconfig: string, objects: readonly k8s.KubernetesObject[]): Promise<void> {
  await runOk(kubectl, ['--kubeconfig', kubeconfig, 'apply', '--server-side', '--force-conflicts', '--field-manager=sandbox', '-f', '-'], { input: objects.map((o) => stringify(o)).join('---\n') });
}

/**
 * Waits until CoreDNS serves: its pod Ready, the Service's EndpointSlice with a ready endpoint, and
 * the pod answering `kubernetes.default.svc.<domain>` with the kubernetes Service's ClusterIP (asked
 * at its pod IP from the sandbox's namespace). On timeout the error says what it saw.
 */
export async function waitForCoreDns(kc: k8s.KubeConfig, opts: { clusterDomain: string; kubernetesServiceIp: string; timeoutMs: number }): Promise<{ pod: string; podIp: string }> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  const { namespace, name } = CLUSTER_DNS;
  const question = `kubernetes.default.svc.${opts.clusterDomain}`;
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    let seen: string;
    try {
      const pods = (await core.listNamespacedPod({ namespace, labelSelector: `k8s-app=${COREDNS_APP}` })).items.filter((p) => !p.metadata?.deletionTimestamp);
      const ready = pods.find((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') && p.status?.podIP);
      if (!ready) {
        seen = pods.length === 0 ? 'no CoreDNS pod' : pods.map(describePod).join('; ');
      } else {
        const slices = await discovery.listNamespacedEndpointSlice({ namespace, labelSelector: `kubernetes.io/service-name=${name}` });
        const endpoints = slices.items.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready !== false);
        const podIp = ready.status!.podIP!;
        if (!endpoints.some((e) => e.addresses.includes(podIp))) {
          seen = `pod ${ready.metadata?.name} (${podIp}) Ready, not yet a ready endpoint of ${namespace}/${name}`;
        } else {
          const answer = await dns2.UDPClient({ dns: podIp, port: 53, timeout: 2000, retryOverTCP: false })(question, 'A').then(
            (r) => r.answers.map((a) => (a as { address?: string }).address).filter(Boolean),
            (err: unknown) => String(err),
          );
          if (Array.isArray(answer) && answer.includes(opts.kubernetesServiceIp)) return { pod: ready.metadata!.name!, podIp };
          seen = `pod ${ready.metadata?.name} (${podIp}) Ready and an endpoint, but ${question} @${podIp}:53 gave ${JSON.stringify(answer)}`;
        }
      }
    } catch (err) {
      seen = `reading CoreDNS's pods failed: ${statusCode(err) ?? ''} ${String(err)}`;
    }
    if (Date.now() > deadline) throw new Error(`CoreDNS (${namespace}/${name}) did not serve within ${opts.timeoutMs} ms; last seen: ${seen}`);
    await sleep(500);
  }
}

function describePod(p: k8s.V1Pod): string {
  const c = p.status?.containerStatuses?.[0];
  const state = c?.state?.waiting ? `waiting ${c.state.waiting.reason ?? ''} ${c.state.waiting.message ?? ''}`.trim() : c?.state?.terminated ? `terminated ${c.state.terminated.reason ?? ''} (exit ${c.state.terminated.exitCode})` : c?.state?.running ? `running, ready ${String(c.ready)}, restarts ${c.restartCount}` : '';
  return `pod ${p.metadata?.name} on ${p.spec?.nodeName ?? '(unscheduled)'}: ${p.status?.phase}${state ? `, ${state}` : ''}`;
}

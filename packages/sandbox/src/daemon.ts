import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import { COMPONENTS, startControlPlane, type Component } from './control-plane.js';
import { installKarpenterCrds, installKwokNodeClass } from './karpenter.js';
import { installOwnCrds } from './crds.js';
import { NotFound, startControlServer } from './control.js';
import { ServiceCatalog } from './catalog.js';
import { ClusterDns, DNS_CONFIGMAP } from './dns.js';
import { SimulatedKubelet, type ImageTable } from './kubelet.js';
import { createIgnoreExists, k8s, loadKubeConfig, statusCode } from './kube.js';
import type { SandboxLayout, SandboxState } from './layout.js';
import { simulatedNode } from './node-registry.js';
import { sleep } from './proc.js';
import { ServiceProxy } from './proxy.js';
import { startKarpenterRealNodes } from './karpenter-real-nodes.js';
import { parseTaint, RealNodes } from './real-node.js';
import { parseFaultSpec, parseRealNodeFault } from './real-node-faults.js';

export interface DaemonOptions {
  binDir: string;
  images: ImageTable;
  nodes: number;
  leaseRenewMs?: number;
  /** See StartOptions.auditWrites. */
  auditWrites?: boolean;
}

/**
 * Runs inside the sandbox's network namespace: the control plane, the cluster DNS, the service
 * proxy and the simulated kubelet. Writes state.json when everything is ready; stops all of it
 * on SIGTERM/SIGINT.
 */
/** The daemon's log message for a rejected promise nobody handled (a sandbox bug). */
export const DAEMON_UNHANDLED = 'unhandled rejection in the sandbox daemon (a sandbox bug; the cluster keeps running)';

export async function runDaemon(layout: SandboxLayout, opts: DaemonOptions, log: Logger): Promise<void> {
  const cp = await startControlPlane(layout, opts.binDir, log, () => installKarpenterCrds(loadKubeConfig(layout.paths.kubeconfig), join(opts.binDir, 'karpenter-crds')), {
    auditWrites: opts.auditWrites,
  });
  const kc = loadKubeConfig(cp.kubeconfig);
  await installOwnCrds(kc);
  const parts: Array<{ stop: () => unknown }> = [];
  let stopping = false;
  const shutdown = async (why: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ why }, 'sandbox stopping');
    for (const p of parts.reverse()) await p.stop();
    await cp.stop();
    writeState(layout, { ready: false });
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  // A rejected promise nobody waited for is a sandbox bug, but ending the daemon would end the whole
  // cluster (control plane and nodes) and fail every test after it for no visible reason. It is
  // logged instead, and the test suite fails on the line (test/global-setup.ts). Not while stopping,
  // when calls to a control plane going away may reject.
  process.on('unhandledRejection', (err) => {
    if (!stopping) log.error({ err: err instanceof Error ? (err.stack ?? err.message) : String(err) }, DAEMON_UNHANDLED);
  });

  try {
    log.info('bootstrapping cluster objects');
    await bootstrap(layout, kc);
    await installKwokNodeClass(kc);
    const catalog = new ServiceCatalog(kc);
    catalog.start();
    parts.push(catalog);
    const dns = new ClusterDns(layout, kc, catalog, log.child({ component: 'dns' }));
    await dns.start();
    parts.push(dns);
    const proxy = new ServiceProxy(layout, catalog, log.child({ component: 'proxy' }));
    proxy.start();
    parts.push(proxy);
    const kubelet = new SimulatedKubelet(layout, kc, log.child({ component: 'kubelet' }), {
      images: opts.images,
      caFile: cp.certs.caCert,
      leaseRenewMs: opts.leaseRenewMs,
    });
    kubelet.start();
    parts.push(kubelet);
    const realNodes = new RealNodes({ layout, binDir: opts.binDir, certs: cp.certs, log: log.child({ component: 'real-nodes' }) });
    parts.push(realNodes);
    // Stopped before the real nodes (parts stop in reverse order): none is started while they stop.
    parts.push(startKarpenterRealNodes(kc, realNodes, log.child({ component: 'karpenter-real-nodes' })));
    const control = startControlServer(layout.dir, async (method, path) => {
      const url = new URL(path, 'http://sandbox');
      const [, action, arg] = url.pathname.split('/');
      const component = arg as Component;
      const known = COMPONENTS.includes(component);
      if (method === 'POST' && action === 'restart' && known) return cp.restart(component);
      if (method === 'POST' && action === 'stop' && known) return cp.stopComponent(component);
      if (method === 'POST' && action === 'start' && known) return cp.startComponent(component);
      if (method === 'POST' && action === 'compact') return { revision: await cp.compact() };
      // A node's kubelet stops (its Lease is no longer renewed) or comes back.
      if (method === 'POST' && (action === 'stop-kubelet' || action === 'start-kubelet') && arg) return kubelet.agent.setKubeletStopped(arg, action === 'stop-kubelet');
      // Real nodes (real-node.ts): ?taint=KEY=VALUE:EFFECT and ?label=KEY=VALUE, each repeatable.
      if (method === 'POST' && action === 'add-real-node' && arg) {
        return realNodes.add({
          name: arg,
          taints: url.searchParams.getAll('taint').map(parseTaint),
          labels: Object.fromEntries(url.searchParams.getAll('label').map((l) => l.split('=', 2) as [string, string])),
          faults: url.searchParams.getAll('fault').map(parseFaultSpec),
        });
      }
      // POST /real-node-fault/<node>?fault=F&on=true|false[&value=V]
      if (method === 'POST' && action === 'real-node-fault' && arg) {
        return await realNodes.setFault(arg, parseRealNodeFault(url.searchParams.get('fault') ?? ''), url.searchParams.get('on') !== 'false', url.searchParams.get('value') ?? undefined);
      }
      if (method === 'POST' && action === 'remove-real-node' && arg) return realNodes.remove(arg);
      if (method === 'GET' && action === 'real-nodes') return { nodes: realNodes.names(), details: realNodes.details() };
      if (method === 'GET' && action === 'stats') return { processes: kubelet.runningProcesses(), dnsQueries: dns.queries };
      throw new NotFound(`unknown control action ${method} ${path}`);
    });
    parts.push({ stop: () => control.close() });
    const core = kc.makeApiClient(k8s.CoreV1Api);
    for (let i = 1; i <= opts.nodes; i++) {
      await createIgnoreExists(() => core.createNode({ body: simulatedNode({ name: `sandbox-node-${i}` }) }));
    }
    const version = (await kc.makeApiClient(k8s.VersionApi).getCode()).gitVersion;
    writeState(layout, {
      ready: true,
      pid: process.pid,
      slot: layout.slot,
      dir: layout.dir,
      netns: layout.netns,
      kubeconfig: layout.paths.kubeconfig,
      apiServer: `https://${layout.apiHost}:${layout.apiPort}`,
      kubernetesVersion: version,
      startedAt: new Date().toISOString(),
      binDir: opts.binDir,
    });
    log.info({ kubeconfig: layout.paths.kubeconfig, version }, 'sandbox ready');
  } catch (err) {
    log.error({ err: String(err) }, 'sandbox start failed');
    await shutdown('start-up failed');
  }
}

function writeState(layout: SandboxLayout, state: Partial<SandboxState>): void {
  writeFileSync(layout.paths.state, JSON.stringify(state, null, 2));
}

export function readState(layout: SandboxLayout): SandboxState | undefined {
  try {
    return JSON.parse(readFileSync(layout.paths.state, 'utf8')) as SandboxState;
  } catch {
    return undefined;
  }
}

/**
 * What a cluster's add-ons would have created: the kube-dns Service and its endpoints. Waits for
 * what kube-controller-manager creates (the `default` ServiceAccounts, `kube-root-ca.crt`) and the
 * apiserver's own `kubernetes` EndpointSlice, so tests start on a settled cluster.
 */
async function bootstrap(layout: SandboxLayout, kc: k8s.KubeConfig): Promise<void> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const discovery = kc.makeApiClient(k8s.DiscoveryV1Api);
  for (const ns of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
    await waitFor(async () => (await core.readNamespacedServiceAccount({ namespace: ns, name: 'default' }), true), `the default ServiceAccount of ${ns} (kube-controller-manager)`);
    await waitFor(async () => (await core.readNamespacedConfigMap({ namespace: ns, name: 'kube-root-ca.crt' }), true), `kube-root-ca.crt in ${ns} (kube-controller-manager)`);
  }
  // The apiserver's own endpoint reconciler publishes the kubernetes Service's endpoints.
  await waitFor(async () => {
    const slices = await discovery.listNamespacedEndpointSlice({ namespace: 'default', labelSelector: 'kubernetes.io/service-name=kubernetes' });
    return slices.items.some((s) => (s.endpoints ?? []).length > 0);
  }, 'the kubernetes EndpointSlice');
  await createIgnoreExists(() =>
    core.createNamespacedService({
      namespace: 'kube-system',
      body: {
        metadata: { name: 'kube-dns', labels: { 'k8s-app': 'kube-dns', 'kubernetes.io/name': 'CoreDNS' } },
        // No selector: the DNS "pods" are servers of the sandbox, not Pods, so their EndpointSlice
        // is the sandbox's (kube-controller-manager would add an empty one of its own for a selector).
        spec: {
          clusterIP: layout.clusterDnsIp,
          ports: [
            { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 as unknown as k8s.IntOrString },
            { name: 'dns-tcp', port: 53, protocol: 'TCP', targetPort: 53 as unknown as k8s.IntOrString },
          ],
        },
      },
    }),
  );
  await createIgnoreExists(() =>
    discovery.createNamespacedEndpointSlice({
      namespace: 'kube-system',
      body: {
        metadata: { name: 'kube-dns-sandbox', labels: { 'kubernetes.io/service-name': 'kube-dns', 'endpointslice.kubernetes.io/managed-by': 'sandbox.kube-node-ready.io' } },
        addressType: 'IPv4',
        endpoints: layout.dnsPodIps.map((ip, i) => ({ addresses: [ip], conditions: { ready: true }, targetRef: { kind: 'Pod', namespace: 'kube-system', name: `coredns-sandbox-${i}` } })),
        ports: [
          { name: 'dns', port: 53, protocol: 'UDP' },
          { name: 'dns-tcp', port: 53, protocol: 'TCP' },
        ],
      },
    }),
  );
  await createIgnoreExists(() =>
    core.createNamespacedConfigMap({ namespace: 'kube-system', body: { metadata: { name: DNS_CONFIGMAP }, data: { mode: 'ok', deadPods: '' } } }),
  );
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      if (statusCode(err) !== 404) last = err;
    }
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

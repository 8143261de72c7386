import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import { certPaths, ensureCerts, kubeconfigYaml, type SandboxCerts } from './certs.js';
import type { SandboxLayout } from './layout.js';
import { sleep, startLogged, stopProcess } from './proc.js';

export type Component = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler' | 'karpenter';
export const COMPONENTS: readonly Component[] = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'karpenter'];

export interface ControlPlane {
  certs: SandboxCerts;
  kubeconfig: string;
  /** Stops and starts one component with the same flags (fault injection); resolves when it is healthy again. */
  restart(component: Component): Promise<void>;
  /** Stops one component until `start` (fault injection: the API is down). */
  stopComponent(component: Component): Promise<void>;
  startComponent(component: Component): Promise<void>;
  /** Compacts etcd at its current revision, so watches from older revisions get 410 Gone. */
  compact(): Promise<number>;
  stop(): Promise<void>;
}

interface ComponentSpec {
  bin: string;
  args: string[];
  env?: Record<string, string>;
  health: () => Promise<void>;
  proc?: ChildProcess;
}

/**
 * Starts etcd, kube-apiserver (RBAC, service-account issuer, secure serving), kube-controller-manager,
 * kube-scheduler and Karpenter (its kwok cloud provider) as child processes of the caller, which runs
 * inside the sandbox's network namespace. `beforeKarpenter` runs once the API is up and before
 * Karpenter starts (it installs Karpenter's CRDs).
 */
/** Where the API server writes its audit log of write requests when the sandbox was started with auditWrites. */
export function auditLogPath(layout: SandboxLayout): string {
  return join(layout.paths.logs, 'audit-writes.log');
}

/**
 * The audit policy of auditWrites: one event per finished write request (who, with which user
 * agent, what), at Metadata level, nothing for reads; the log backend batches, so a burst's
 * requests do not wait for the file.
 */
const AUDIT_WRITES_POLICY = [
  'apiVersion: audit.k8s.io/v1',
  'kind: Policy',
  'omitStages: [RequestReceived]',
  'rules:',
  '  - level: Metadata',
  '    verbs: [create, update, patch, delete, deletecollection]',
  '  - level: None',
  '',
].join('\n');

export interface ControlPlaneOptions {
  /** See StartOptions.auditWrites. */
  auditWrites?: boolean;
}

export async function startControlPlane(layout: SandboxLayout, binDir: string, log: Logger, beforeKarpenter: () => Promise<void>, opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const L = layout;
  for (const d of [L.paths.logs, L.paths.etcdData]) mkdirSync(d, { recursive: true });
  const certs = await ensureCerts(L);
  const etcdUrl = `http://127.0.0.1:${L.etcdClientPort}`;
  const server = `https://${L.apiHost}:${L.apiPort}`;
  const schedKubeconfig = join(L.dir, 'scheduler.kubeconfig');
  const schedConfig = join(L.dir, 'scheduler.yaml');
  writeFileSync(L.paths.kubeconfig, kubeconfigYaml(server, certs.caCert, certs.adminCert, certs.adminKey, 'sandbox-admin'));
  writeFileSync(schedKubeconfig, kubeconfigYaml(server, certs.caCert, certs.schedulerCert, certs.schedulerKey, 'kube-scheduler'));
  writeFileSync(
    schedConfig,
    [
      'apiVersion: kubescheduler.config.k8s.io/v1',
      'kind: KubeSchedulerConfiguration',
      'clientConnection:',
      `  kubeconfig: ${schedKubeconfig}`,
      '  qps: 200',
      '  burst: 400',
      'leaderElection:',
      '  leaderElect: false',
      '',
    ].join('\n'),
  );

  const components: Record<Component, ComponentSpec> = {
    etcd: {
      bin: join(binDir, 'etcd'),
      args: [
        '--name=sandbox',
        `--data-dir=${L.paths.etcdData}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${L.etcdPeerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${L.etcdPeerPort}`,
        `--initial-cluster=sandbox=http://127.0.0.1:${L.etcdPeerPort}`,
        '--unsafe-no-fsync',
        '--quota-backend-bytes=4294967296',
        '--log-level=warn',
      ],
      health: () => waitHealthy(`${etcdUrl}/health`, undefined, 60_000, 'etcd'),
    },
    'kube-apiserver': {
      bin: join(binDir, 'kube-apiserver'),
      args: [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=0.0.0.0',
        `--secure-port=${L.apiPort}`,
        `--advertise-address=${L.advertiseAddress}`,
        `--service-cluster-ip-range=${L.serviceCidr}`,
        `--tls-cert-file=${certs.serverCert}`,
        `--tls-private-key-file=${certs.serverKey}`,
        `--client-ca-file=${certs.caCert}`,
        '--authorization-mode=Node,RBAC',
        `--service-account-issuer=https://kubernetes.default.svc.${L.clusterDomain}`,
        `--service-account-key-file=${certs.saPub}`,
        `--service-account-signing-key-file=${certs.saKey}`,
        '--enable-admission-plugins=NodeRestriction',
        `--requestheader-client-ca-file=${certs.caCert}`,
        '--requestheader-allowed-names=front-proxy-client',
        '--requestheader-username-headers=X-Remote-User',
        '--requestheader-group-headers=X-Remote-Group',
        '--requestheader-extra-headers-prefix=X-Remote-Extra-',
        // kubectl logs/exec: the apiserver dials the simulated kubelet's API on each node's InternalIP.
        '--kubelet-preferred-address-types=InternalIP',
        `--kubelet-client-certificate=${certs.adminCert}`,
        `--kubelet-client-key=${certs.adminKey}`,
        '--profiling=false',
        '--max-requests-inflight=800',
        '--max-mutating-requests-inflight=400',
        ...(opts.auditWrites ? auditWritesArgs(L) : []),
        '--v=0',
      ],
      health: () => waitHealthy(`https://127.0.0.1:${L.apiPort}/readyz`, certs, 90_000, 'kube-apiserver'),
    },
    // Every controller that makes sense without a cloud: garbage collection, Deployments and
    // ReplicaSets, DaemonSets, Jobs, EndpointSlices, namespace deletion, ServiceAccounts and
    // kube-root-ca.crt, the node lifecycle controller (Unknown nodes, not-ready/unreachable
    // taints, evictions), PodDisruptionBudget status.
    'kube-controller-manager': {
      bin: join(binDir, 'kube-controller-manager'),
      args: [
        `--kubeconfig=${L.paths.kubeconfig}`,
        `--authentication-kubeconfig=${L.paths.kubeconfig}`,
        `--authorization-kubeconfig=${L.paths.kubeconfig}`,
        '--controllers=*,-node-ipam-controller,-node-route-controller,-service-lb-controller,-cloud-node-lifecycle-controller',
        '--use-service-account-credentials=false',
        '--leader-elect=false',
        `--service-account-private-key-file=${certs.saKey}`,
        `--root-ca-file=${certs.caCert}`,
        `--cluster-signing-cert-file=${certs.caCert}`,
        `--cluster-signing-key-file=${certs.caKey}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${L.controllerManagerPort}`,
        // The node lifecycle controller's defaults, stated: a node whose kubelet posted nothing
        // (Lease or status) for 50 s goes Unknown; checked every 5 s.
        '--node-monitor-grace-period=50s',
        '--node-monitor-period=5s',
        '--kube-api-qps=100',
        '--kube-api-burst=200',
        '--v=0',
      ],
      health: () => waitHealthy(`https://127.0.0.1:${L.controllerManagerPort}/healthz`, undefined, 60_000, 'kube-controller-manager'),
    },
    'kube-scheduler': {
      bin: join(binDir, 'kube-scheduler'),
      args: [
        `--config=${schedConfig}`,
        `--authentication-kubeconfig=${schedKubeconfig}`,
        `--authorization-kubeconfig=${schedKubeconfig}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${L.schedulerPort}`,
        '--v=0',
      ],
      health: () => waitHealthy(`https://127.0.0.1:${L.schedulerPort}/healthz`, undefined, 60_000, 'kube-scheduler'),
    },
    // Karpenter with its in-tree kwok cloud provider: NodeClaims become Node objects (no VM); the
    // simulated kubelet plays the nodes of NodePools whose template carries the simulated label.
    karpenter: {
      bin: join(binDir, 'karpenter'),
      args: [],
      env: {
        KUBECONFIG: L.paths.kubeconfig,
        DISABLE_LEADER_ELECTION: 'true',
        METRICS_PORT: String(L.karpenterMetricsPort),
        HEALTH_PROBE_PORT: String(L.karpenterHealthPort),
        LOG_LEVEL: 'info',
        // Batch pending pods for 1 s (idle) up to 10 s, Karpenter's defaults.
        BATCH_IDLE_DURATION: '1s',
        BATCH_MAX_DURATION: '10s',
      },
      health: () => waitHealthy(`http://127.0.0.1:${L.karpenterHealthPort}/healthz`, undefined, 90_000, 'karpenter'),
    },
  };
  const order: Component[] = [...COMPONENTS];
  let stopping = false;
  let karpenterReady = false;

  const startComponent = async (name: Component) => {
    const c = components[name];
    if (c.proc && c.proc.exitCode === null && c.proc.signalCode === null) return;
    log.info(`starting ${name}`);
    if (name === 'karpenter' && !karpenterReady) {
      await beforeKarpenter();
      karpenterReady = true;
    }
    const proc = startLogged(c.bin, c.args, join(L.paths.logs, `${name}.log`), c.env ? { env: { ...process.env, ...c.env } } : {});
    c.proc = proc;
    proc.once('exit', (code, signal) => {
      if (!stopping && c.proc === proc) log.error({ component: name, code, signal }, `${name} exited; see ${join(L.paths.logs, `${name}.log`)}`);
    });
    const died = new Promise<never>((_, reject) =>
      proc.once('exit', () => reject(new Error(`${name} exited during start-up; see ${join(L.paths.logs, `${name}.log`)}`))),
    );
    died.catch(() => undefined);
    await Promise.race([c.health(), died]);
  };
  const stopComponent = async (name: Component) => {
    const c = components[name];
    const proc = c.proc;
    c.proc = undefined;
    if (proc) await stopProcess(proc);
  };
  const stop = async () => {
    stopping = true;
    for (const name of [...order].reverse()) await stopComponent(name);
  };

  try {
    for (const name of order) await startComponent(name);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    certs: certPaths(L.paths.certs),
    kubeconfig: L.paths.kubeconfig,
    restart: async (name) => {
      await stopComponent(name);
      await startComponent(name);
    },
    stopComponent,
    startComponent,
    compact: () => compactEtcd(etcdUrl),
    stop,
  };
}

/** Compacts etcd's keyspace at the current revision through etcd's JSON gateway; returns the revision. */
async function compactEtcd(etcdUrl: string): Promise<number> {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${etcdUrl}${path}`, { method: 'POST', body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { header?: { revision?: string } };
  };
  const status = await post('/v3/kv/range', { key: Buffer.from('/').toString('base64'), limit: 1 });
  const revision = Number(status.header?.revision ?? 0);
  await post('/v3/kv/compaction', { revision: String(revision), physical: true });
  return revision;
}

/** Polls an HTTPS health endpoint until it answers 200 "ok". */
async function waitHealthy(url: string, certs: SandboxCerts | undefined, timeoutMs: number, name: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    last = await get(url, certs).catch((err: Error) => err.message);
    if (last === '200') return;
    await sleep(250);
  }
  throw new Error(`${name} did not become healthy within ${timeoutMs / 1000}s (last: ${last})`);
}

function get(url: string, certs: SandboxCerts | undefined): Promise<string> {
  if (url.startsWith('http:')) return fetch(url, { signal: AbortSignal.timeout(2000) }).then((r) => String(r.status));
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        ca: certs ? readFileSync(certs.caCert) : undefined,
        cert: certs ? readFileSync(certs.adminCert) : undefined,
        key: certs ? readFileSync(certs.adminKey) : undefined,
        rejectUnauthorized: Boolean(certs),
        timeout: 2000,
      },
      (res) => {
        res.resume();
        resolve(String(res.statusCode));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

function auditWritesArgs(L: SandboxLayout): string[] {
  const policy = join(L.dir, 'audit-writes-policy.yaml');
  writeFileSync(policy, AUDIT_WRITES_POLICY);
  return [`--audit-policy-file=${policy}`, `--audit-log-path=${auditLogPath(L)}`, '--audit-log-format=json', '--audit-log-mode=batch', '--audit-log-batch-max-wait=1s', '--audit-log-maxsize=0'];
}

import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import { certPaths, ensureCerts, kubeconfigYaml, type SandboxCerts } from './certs.js';
import type { SandboxLayout } from './layout.js';
import { sleep, startLogged, stopProcess } from './proc.js';

export type Component = 'etcd' | 'kube-apiserver' | 'kube-scheduler';

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
  health: () => Promise<void>;
  proc?: ChildProcess;
}

/**
 * Starts etcd, kube-apiserver (RBAC, service-account issuer, secure serving) and kube-scheduler
 * as child processes of the caller, which runs inside the sandbox's network namespace.
 */
export async function startControlPlane(layout: SandboxLayout, binDir: string, log: Logger): Promise<ControlPlane> {
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
        '--profiling=false',
        '--max-requests-inflight=800',
        '--max-mutating-requests-inflight=400',
        '--v=0',
      ],
      health: () => waitHealthy(`https://127.0.0.1:${L.apiPort}/readyz`, certs, 90_000, 'kube-apiserver'),
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
  };
  const order: Component[] = ['etcd', 'kube-apiserver', 'kube-scheduler'];
  let stopping = false;

  const startComponent = async (name: Component) => {
    const c = components[name];
    if (c.proc && c.proc.exitCode === null && c.proc.signalCode === null) return;
    log.info(`starting ${name}`);
    const proc = startLogged(c.bin, c.args, join(L.paths.logs, `${name}.log`));
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

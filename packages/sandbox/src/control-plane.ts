import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import { certPaths, ensureCerts, kubeconfigYaml, type SandboxCerts } from './certs.js';
import type { SandboxLayout } from './layout.js';
import { sleep, startLogged, stopProcess } from './proc.js';

export interface ControlPlane {
  certs: SandboxCerts;
  kubeconfig: string;
  stop(): Promise<void>;
}

/**
 * Starts etcd, kube-apiserver (RBAC, service-account issuer, secure serving) and kube-scheduler
 * as child processes of the caller, which runs inside the sandbox's network namespace.
 */
export async function startControlPlane(layout: SandboxLayout, binDir: string, log: Logger): Promise<ControlPlane> {
  const L = layout;
  for (const d of [L.paths.logs, L.paths.etcdData]) mkdirSync(d, { recursive: true });
  const certs = await ensureCerts(L);
  const procs: ChildProcess[] = [];
  const stop = async () => {
    for (const p of procs.reverse()) await stopProcess(p);
  };
  const watchExit = (name: string, p: ChildProcess) =>
    p.once('exit', (code, signal) => {
      if (!stopping) log.error({ component: name, code, signal }, `${name} exited; see ${join(L.paths.logs, `${name}.log`)}`);
    });
  let stopping = false;

  try {
    const etcdUrl = `http://127.0.0.1:${L.etcdClientPort}`;
    log.info('starting etcd');
    const etcd = startLogged(
      join(binDir, 'etcd'),
      [
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
      join(L.paths.logs, 'etcd.log'),
    );
    procs.push(etcd);
    watchExit('etcd', etcd);

    log.info('starting kube-apiserver');
    const apiserver = startLogged(
      join(binDir, 'kube-apiserver'),
      [
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
      join(L.paths.logs, 'kube-apiserver.log'),
    );
    procs.push(apiserver);
    watchExit('kube-apiserver', apiserver);
    await waitHealthy(`https://127.0.0.1:${L.apiPort}/readyz`, certs, 90_000, () => apiserver.exitCode !== null, 'kube-apiserver');

    const server = `https://${L.apiHost}:${L.apiPort}`;
    writeFileSync(L.paths.kubeconfig, kubeconfigYaml(server, certs.caCert, certs.adminCert, certs.adminKey, 'sandbox-admin'));
    const schedKubeconfig = join(L.dir, 'scheduler.kubeconfig');
    writeFileSync(schedKubeconfig, kubeconfigYaml(server, certs.caCert, certs.schedulerCert, certs.schedulerKey, 'kube-scheduler'));
    const schedConfig = join(L.dir, 'scheduler.yaml');
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
    log.info('starting kube-scheduler');
    const scheduler = startLogged(
      join(binDir, 'kube-scheduler'),
      [
        `--config=${schedConfig}`,
        `--authentication-kubeconfig=${schedKubeconfig}`,
        `--authorization-kubeconfig=${schedKubeconfig}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${L.schedulerPort}`,
        '--v=0',
      ],
      join(L.paths.logs, 'kube-scheduler.log'),
    );
    procs.push(scheduler);
    watchExit('kube-scheduler', scheduler);
    await waitHealthy(`https://127.0.0.1:${L.schedulerPort}/healthz`, undefined, 60_000, () => scheduler.exitCode !== null, 'kube-scheduler');
  } catch (err) {
    stopping = true;
    await stop();
    throw err;
  }
  return {
    certs: certPaths(L.paths.certs),
    kubeconfig: L.paths.kubeconfig,
    stop: async () => {
      stopping = true;
      await stop();
    },
  };
}

/** Polls an HTTPS health endpoint until it answers 200 "ok". */
async function waitHealthy(url: string, certs: SandboxCerts | undefined, timeoutMs: number, died: () => boolean, name: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (died()) throw new Error(`${name} exited during start-up; see its log in the sandbox logs directory`);
    last = await get(url, certs).catch((err: Error) => err.message);
    if (last === '200') return;
    await sleep(250);
  }
  throw new Error(`${name} did not become healthy within ${timeoutMs / 1000}s (last: ${last})`);
}

function get(url: string, certs: SandboxCerts | undefined): Promise<string> {
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

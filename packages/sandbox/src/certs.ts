import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxLayout } from './layout.js';
import { runOk } from './proc.js';

export interface SandboxCerts {
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
  schedulerCert: string;
  schedulerKey: string;
  saKey: string;
  saPub: string;
}

export function certPaths(dir: string): SandboxCerts {
  const p = (name: string) => join(dir, name);
  return {
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    serverCert: p('apiserver.crt'),
    serverKey: p('apiserver.key'),
    adminCert: p('admin.crt'),
    adminKey: p('admin.key'),
    schedulerCert: p('scheduler.crt'),
    schedulerKey: p('scheduler.key'),
    saKey: p('sa.key'),
    saPub: p('sa.pub'),
  };
}

/** Generates (once) a CA, the apiserver serving cert, client certs and the service-account key pair with the openssl CLI. */
export async function ensureCerts(layout: SandboxLayout): Promise<SandboxCerts> {
  const dir = layout.paths.certs;
  const c = certPaths(dir);
  if (existsSync(c.saPub)) return c;
  mkdirSync(dir, { recursive: true });
  const ossl = (...args: string[]) => runOk('openssl', args, { cwd: dir });
  await ossl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', c.caKey, '-out', c.caCert, '-days', '3650', '-subj', '/CN=kube-node-ready-sandbox-ca');

  const sans = [
    `IP:${layout.advertiseAddress}`,
    `IP:${layout.kubernetesServiceIp}`,
    `IP:${layout.apiHost}`,
    'IP:127.0.0.1',
    'DNS:localhost',
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    `DNS:kubernetes.default.svc.${layout.clusterDomain}`,
  ].join(',');
  const serverExt = join(dir, 'server.ext');
  writeFileSync(serverExt, `subjectAltName=${sans}\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n`);
  const clientExt = join(dir, 'client.ext');
  writeFileSync(clientExt, 'keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');

  const issue = async (cert: string, key: string, subj: string, ext: string) => {
    const csr = `${cert}.csr`;
    await ossl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', subj);
    await ossl('x509', '-req', '-in', csr, '-CA', c.caCert, '-CAkey', c.caKey, '-CAcreateserial', '-out', cert, '-days', '3650', '-extfile', ext);
  };
  await issue(c.serverCert, c.serverKey, '/CN=kube-apiserver', serverExt);
  await issue(c.adminCert, c.adminKey, '/O=system:masters/CN=sandbox-admin', clientExt);
  await issue(c.schedulerCert, c.schedulerKey, '/CN=system:kube-scheduler', clientExt);
  await ossl('genrsa', '-out', c.saKey, '2048');
  await ossl('rsa', '-in', c.saKey, '-pubout', '-out', c.saPub);
  return c;
}

/** A kubeconfig with client-certificate auth (file references, so it stays small and readable). */
export function kubeconfigYaml(server: string, caFile: string, certFile: string, keyFile: string, user: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: sandbox',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority: ${caFile}`,
    'users:',
    `- name: ${user}`,
    '  user:',
    `    client-certificate: ${certFile}`,
    `    client-key: ${keyFile}`,
    'contexts:',
    '- name: sandbox',
    '  context:',
    '    cluster: sandbox',
    `    user: ${user}`,
    'current-context: sandbox',
    '',
  ].join('\n');
}

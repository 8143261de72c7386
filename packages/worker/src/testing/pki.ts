import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A CA and a server certificate for 127.0.0.1 made with the openssl CLI, plus an unrelated CA. */
export interface TestPki {
  ca: string;
  serverCert: string;
  serverKey: string;
  otherCa: string;
}

export function makePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'knr-pki-'));
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const makeCa = (name: string) =>
    ssl('req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-subj', `/CN=${name}`, '-days', '2',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  makeCa('ca');
  makeCa('other-ca');
  ssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=kube-apiserver');
  writeFileSync(
    join(dir, 'server.ext'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n',
  );
  ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext');
  const read = (file: string) => readFileSync(join(dir, file), 'utf8');
  const pki = { ca: read('ca.crt'), serverCert: read('server.crt'), serverKey: read('server.key'), otherCa: read('other-ca.crt') };
  rmSync(dir, { recursive: true, force: true });
  return pki;
}

/** A service-account directory as the kubelet mounts it. */
export function writeServiceAccount(ca: string, token: string, namespace = 'kube-system'): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'knr-sa-'));
  writeFileSync(join(dir, 'token'), token);
  writeFileSync(join(dir, 'ca.crt'), ca);
  writeFileSync(join(dir, 'namespace'), namespace);
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

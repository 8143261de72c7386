import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TerminalError } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { loadKubeConfig } from './config.js';

describe('loadKubeConfig reads credential files once', () => {
  const dir = mkdtempSync(join(tmpdir(), 'knr-kubeconfig-'));
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };
  const kubeconfig = (ca: string) =>
    file(
      'config',
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{ name: c, cluster: { server: "https://127.0.0.1:6443", certificate-authority: ' + ca + ' } }]',
        'users: [{ name: u, user: { client-certificate: cert.pem, client-key: key.pem } }]',
        'contexts: [{ name: x, context: { cluster: c, user: u } }]',
        'current-context: x',
      ].join('\n'),
    );

  it('the CA, client certificate and key (relative to the kubeconfig) become data', () => {
    file('ca.pem', 'the CA');
    file('cert.pem', 'the certificate');
    file('key.pem', 'the key');
    const kc = loadKubeConfig(kubeconfig('ca.pem'));
    const b64 = (text: string) => Buffer.from(text).toString('base64');
    expect(kc.getCurrentCluster()).toMatchObject({ caData: b64('the CA'), caFile: undefined });
    expect(kc.getCurrentUser()).toMatchObject({ certData: b64('the certificate'), certFile: undefined, keyData: b64('the key'), keyFile: undefined });
  });

  it('a missing file fails at load, naming it', () => {
    expect(() => loadKubeConfig(kubeconfig('missing-ca.pem'))).toThrow(TerminalError);
    expect(() => loadKubeConfig(kubeconfig('missing-ca.pem'))).toThrow(`cannot read the certificate authority file of cluster c (${join(dir, 'missing-ca.pem')}): ENOENT`);
  });
});

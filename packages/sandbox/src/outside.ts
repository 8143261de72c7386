// What lies outside the cluster, for real nodes' pods: one HTTPS server at an address outside every
// cluster range (203.0.113.10, TEST-NET-3, RFC 5737), local to the sandbox's namespace, which the real
// nodes' CoreDNS names OUTSIDE.name (a `hosts` entry). The worker's egress check connects to it
// (`dns.externalNames`); the real-node fault egress-blocked drops the way there. Nothing leaves the
// machine: the address exists only inside the sandbox's namespace.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:tls';
import { runOk } from './proc.js';

export const OUTSIDE = { name: 'www.outside.test', ip: '203.0.113.10', port: 443 } as const;

/** Starts the server; the daemon runs in the sandbox's namespace, so the address is added there. */
export async function startOutside(dir: string): Promise<{ stop: () => Promise<void> }> {
  mkdirSync(dir, { recursive: true });
  const key = join(dir, 'outside.key');
  const cert = join(dir, 'outside.crt');
  // Self-signed: the egress check completes a TLS handshake naming the host and does not verify it.
  await runOk('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '30', '-subj', `/CN=${OUTSIDE.name}`, '-addext', `subjectAltName=DNS:${OUTSIDE.name}`]);
  await runOk('ip', ['addr', 'replace', `${OUTSIDE.ip}/32`, 'dev', 'lo']);
  const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => socket.end());
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(OUTSIDE.port, OUTSIDE.ip, resolve));
  return { stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

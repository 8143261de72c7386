import { Writable } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger } from '@kube-node-ready/core';
import { KubeClient } from '../kube/client.js';
import { FakeClock } from './fake-clock.js';

/**
 * A KubeClient on a fake clock whose kubeconfig points at a closed loopback port: for tests of what
 * the client does around a call (rate limit, retries, write fence), made with closures in place of
 * requests, so no request leaves the process.
 */
export async function offlineKubeClient(opts: { qps?: number; burst?: number } = {}): Promise<{ clock: FakeClock; kube: KubeClient }> {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const clock = new FakeClock();
  const log = await createLogger({ level: 'silent', destination: new Writable({ write: (_c, _e, done) => done() }) });
  return { clock, kube: new KubeClient(kc, { qps: opts.qps ?? 100, burst: opts.burst ?? 100, clock, log }) };
}

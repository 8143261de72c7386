import { readFileSync } from 'node:fs';
import type { AgentOptions } from 'node:https';
import { type Cluster, type DispatcherOptions, KubeConfig, type RequestContext } from '@kubernetes/client-node';
import { TerminalError } from '@kube-node-ready/core';
import { messageOf } from './errors.js';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

/**
 * A KubeConfig whose requests share one connection pool. client-node 2.0 builds a new undici Agent
 * for every request it authenticates (applySecurityAuthentication), so every API call and every
 * watch opened a TLS connection of its own (a handshake each), left open until that agent's
 * keep-alive ran out: hundreds of sockets and their TLS buffers in a burst (pool.sandbox.test.ts
 * counts them). The first Agent made for the current cluster and user is kept and given to every
 * later request, as client-go keeps one transport per configuration; later requests build none.
 * Its TLS settings are those of the first request, so the CA, client certificate and key files are
 * read once, when the configuration is loaded (inlineCredentialFiles; client-node would read all
 * three again for every request). The bearer token is still read as client-node reads it (a
 * rotated service-account token file is picked up within a minute).
 */
export class PooledKubeConfig extends KubeConfig {
  private readonly dispatchers = new Map<string, Dispatcher>();

  /** A copy of `kc`'s clusters, users and contexts with a pool of its own (or `kc` itself, already pooled). */
  static of(kc: KubeConfig): PooledKubeConfig {
    if (kc instanceof PooledKubeConfig) return kc;
    const pooled = new PooledKubeConfig();
    pooled.loadFromOptions({ clusters: kc.clusters, users: kc.users, contexts: kc.contexts, currentContext: kc.currentContext });
    return pooled;
  }

  override createDispatcherOptions(cluster: Cluster | null, agentOptions: AgentOptions): DispatcherOptions {
    // 'none': client-node sets no dispatcher, and applySecurityAuthentication gives the shared one.
    if (this.dispatchers.has(this.poolKey())) return { type: 'none' };
    const options = super.createDispatcherOptions(cluster, agentOptions);
    // Without TLS settings (plain HTTP) client-node makes no Agent and fetch would use undici's global
    // one; the pool is made all the same, so that every request has it (LeanRequests sends on it).
    return options.type === 'none' ? { type: 'agent', connect: { keepAlive: true, keepAliveInitialDelay: 30_000 } } : options;
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const key = this.poolKey();
    const made = context.getDispatcher();
    const shared = this.dispatchers.get(key);
    if (!shared) {
      if (made) this.dispatchers.set(key, made);
      return;
    }
    context.setDispatcher(shared);
    // Two first requests in flight at once each built one: the later one is not kept.
    if (made && made !== shared) made.close().catch(() => undefined); // never connected: nothing to wait for
  }

  /**
   * Replaces the current cluster's and user's CA, client certificate and key files by their
   * contents (the pool keeps the TLS settings of its first request, so later reads were never
   * used). A file that cannot be read fails here, at start-up, naming the file.
   */
  inlineCredentialFiles(): this {
    const read = (file: string, what: string): string => {
      try {
        return readFileSync(file).toString('base64');
      } catch (err) {
        throw new TerminalError(`kubeconfig: cannot read the ${what} (${file}): ${messageOf(err)}; fix the path in the kubeconfig or make the file readable`, { cause: err });
      }
    };
    this.clusters = this.clusters.map((c) => (c.caFile ? { ...c, caData: read(c.caFile, `certificate authority file of cluster ${c.name}`), caFile: undefined } : c));
    this.users = this.users.map((u) => ({
      ...u,
      ...(u.certFile ? { certData: read(u.certFile, `client certificate file of user ${u.name}`), certFile: undefined } : {}),
      ...(u.keyFile ? { keyData: read(u.keyFile, `client key file of user ${u.name}`), keyFile: undefined } : {}),
    }));
    return this;
  }

  private poolKey(): string {
    return JSON.stringify([this.getCurrentCluster()?.name ?? '', this.getCurrentUser()?.name ?? '']);
  }
}

/**
 * A KubeConfig from an explicit file, else KUBECONFIG or ~/.kube/config, else in-cluster: the
 * service-account token and CA (re-read as the kubelet rotates the token) and
 * KUBERNETES_SERVICE_HOST/PORT. KNR_SERVICEACCOUNT_DIR overrides the service-account directory
 * (the test sandbox uses it in place of the kubelet's mount, docs/sandbox.md).
 */
export function loadKubeConfig(path: string | undefined, env: Readonly<Record<string, string | undefined>> = {}): KubeConfig {
  const kc = new PooledKubeConfig();
  if (path) {
    kc.loadFromFile(path);
    return kc.inlineCredentialFiles();
  }
  const dir = env.KNR_SERVICEACCOUNT_DIR;
  if (!env.KUBECONFIG && dir && env.KUBERNETES_SERVICE_HOST) {
    const host = env.KUBERNETES_SERVICE_HOST.includes(':') ? `[${env.KUBERNETES_SERVICE_HOST}]` : env.KUBERNETES_SERVICE_HOST;
    kc.loadFromOptions({
      clusters: [{ name: 'inCluster', server: `https://${host}:${env.KUBERNETES_SERVICE_PORT ?? '443'}`, caFile: `${dir}/ca.crt`, skipTLSVerify: false }],
      users: [{ name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: `${dir}/token` } } }],
      contexts: [{ name: 'inClusterContext', cluster: 'inCluster', user: 'inClusterUser' }],
      currentContext: 'inClusterContext',
    });
    return kc.inlineCredentialFiles();
  }
  kc.loadFromDefault();
  return kc.inlineCredentialFiles();
}

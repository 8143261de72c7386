// One scenario's cluster: a fresh sandbox, the chart's ServiceAccounts and RBAC, the fault proxy
// between the controller and the apiserver, and two controller replicas as users run them
// (dist/kube-node-ready.mjs, leader election on, the controller's ServiceAccount token), which the
// scenarios can SIGKILL and start again.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { k8s, loadKubeConfig, sandboxLayout, startSandbox, stopSandbox, type FaultProxy, type SandboxState } from '@kube-node-ready/sandbox';
import { applyChartRbac, ControllerProcess, controllerKubeconfig, NAMESPACE, startProxy, TAINT, VERIFIED_LABEL } from '../../bench/src/controller.js';

export { NAMESPACE, TAINT, VERIFIED_LABEL };
export const LEASE = 'kube-node-ready-controller';
/** The controller's node condition type (nodeManagement.condition.type; the suite keeps the default). */
export const CONDITION_TYPE = 'kube-node-ready.io/NetworkVerified';

/** Remediation guards the suite runs with: small enough that exceeding them shows. */
export const GUARDS = { maxPerHour: 6, maxInFlight: 2, minSamples: 5 };

export interface ChaosEnv {
  dir: string;
  slot: number;
  logDir: string;
  out: (line: string) => void;
}

/** The controller configuration of the suite: short timeouts and backoffs so a scenario ends in minutes, remediation on. */
export function chaosConfig(metricsPort: number): Record<string, unknown> {
  return {
    worker: {
      image: { repository: 'ghcr.io/kube-node-ready/kube-node-ready', tag: 'chaos' },
      namespace: NAMESPACE,
      timeout: '20s',
      scheduleTimeout: '20s',
      startTimeout: '8s',
    },
    reconciliation: { maxRetries: 2, initialBackoff: '2s', maxBackoff: '5s', resyncInterval: '20s', maxConcurrentVerifications: 20, workers: 10 },
    nodeManagement: {
      taints: [TAINT],
      deleteFailedNodes: true,
      remediation: {
        minNodeAge: '0s',
        maxPerHour: GUARDS.maxPerHour,
        maxInFlight: GUARDS.maxInFlight,
        circuitBreaker: { minSamples: GUARDS.minSamples },
      },
    },
    leaderElection: { namespace: NAMESPACE, leaseDuration: '6s', renewDeadline: '4s', retryPeriod: '1s' },
    metrics: { bindAddress: `127.0.0.1:${metricsPort}` },
    kubernetes: { qps: 100, burst: 200 },
  };
}

import { deepMerge as mergeConfig } from '../../packages/core/src/testing/merge.js';

export { mergeConfig };

export class Cluster {
  readonly replicas: Array<ControllerProcess | undefined> = [undefined, undefined];
  /** Leader-election identity of each running replica. */
  private readonly identities: Array<string | undefined> = [undefined, undefined];
  private starts = 0;
  /** Starts in progress, per replica: one replica index never gets two processes. */
  private readonly starting = new Map<number, Promise<ControllerProcess>>();
  private stopKeeper: (() => void) | undefined;
  /** Replicas restarted by keepUp() after they exited on their own. */
  restarts = 0;

  private constructor(
    readonly env: ChaosEnv,
    readonly state: SandboxState,
    readonly kc: k8s.KubeConfig,
    readonly proxy: FaultProxy,
    private readonly kubeconfig: string,
    private readonly scenario: string,
    /** The scenario's changes to chaosConfig(), merged into every replica's configuration. */
    private readonly configOverride: Record<string, unknown>,
  ) {}

  static async start(env: ChaosEnv, scenario: string, configOverride: Record<string, unknown> = {}): Promise<Cluster> {
    const state = await startSandbox({ dir: env.dir, slot: env.slot, leaseRenewMs: 30_000, progress: () => {} });
    const kc = loadKubeConfig(state.kubeconfig);
    // The chart's RBAC and admission policies with remediation on (nodes delete, NodeClaims), as the suite's config has it.
    const workerImage = (mergeConfig(chaosConfig(0), configOverride) as { worker: { image: { repository: string; tag: string } } }).worker.image;
    await applyChartRbac(state, workerImage, ['config.nodeManagement.deleteFailedNodes=true']);
    const proxy = await startProxy(sandboxLayout(env.dir, env.slot));
    const kubeconfig = join(env.dir, 'controller.kubeconfig');
    await controllerKubeconfig(kc, sandboxLayout(env.dir, env.slot), proxy, kubeconfig);
    return new Cluster(env, state, kc, proxy, kubeconfig, scenario, configOverride);
  }

  get core(): k8s.CoreV1Api {
    return this.kc.makeApiClient(k8s.CoreV1Api);
  }

  /** Starts replica i (0 or 1) and waits until it has connected to the API server (leader or follower). */
  startReplica(i: number): Promise<ControllerProcess> {
    const pending = this.starting.get(i);
    if (pending) return pending;
    const started = this.start(i).finally(() => this.starting.delete(i));
    this.starting.set(i, started);
    return started;
  }

  private async start(i: number): Promise<ControllerProcess> {
    const n = ++this.starts;
    const port = 20_000 + this.env.slot * 100 + n;
    const configFile = join(this.env.dir, `controller-${n}.yaml`);
    writeFileSync(configFile, stringify(mergeConfig(chaosConfig(port), this.configOverride)));
    const proc = new ControllerProcess(configFile, this.kubeconfig, join(this.env.logDir, `${this.scenario}-controller-${n}.log`), port, undefined, `chaos-${i}`);
    this.replicas[i] = proc;
    await proc.waitForLog('"msg":"waiting to lead"', 60_000);
    this.identities[i] = /"identity":"([^"]+)"[^\n]*"msg":"waiting to lead"/.exec(proc.recentOutput)?.[1];
    return proc;
  }

  /** SIGKILL, no goodbye: the Lease is not released. */
  async kill(i: number): Promise<void> {
    const proc = this.replicas[i];
    if (!proc || proc.exited) return;
    const exited = new Promise<void>((r) => proc.child.once('exit', () => r()));
    proc.child.kill('SIGKILL');
    await exited;
  }

  /** The running replica holding the Lease, if any (a killed leader's identity may still hold it). */
  async leader(): Promise<number | undefined> {
    const coord = this.kc.makeApiClient(k8s.CoordinationV1Api);
    const lease = await coord.readNamespacedLease({ name: LEASE, namespace: NAMESPACE }).catch(() => undefined);
    const holder = lease?.spec?.holderIdentity;
    const i = holder ? this.identities.indexOf(holder) : -1;
    const proc = this.replicas[i];
    return i >= 0 && proc && !proc.exited ? i : undefined;
  }

  /** Restarts replicas that exited on their own (a leader that lost its Lease exits, as in a Deployment). */
  async reviveExited(): Promise<void> {
    for (let i = 0; i < this.replicas.length; i++) {
      const p = this.replicas[i];
      if (p?.exited) await this.startReplica(i);
    }
  }

  /**
   * From now on a replica that exits on its own (a leader that missed its renew deadline exits, and
   * on a loaded machine that happens without any fault) is started again within a second, as its
   * Deployment would restart it.
   */
  keepUp(log: (line: string) => void): void {
    const timer = setInterval(() => {
      this.replicas.forEach((p, i) => {
        if (!p?.exited || this.starting.has(i)) return;
        this.restarts++;
        log(`replica ${i} exited on its own (${p.child.exitCode ?? p.child.signalCode}); starting it again, as its Deployment would`);
        this.startReplica(i).catch((err: unknown) => log(`starting replica ${i} again: ${String(err)}`));
      });
    }, 1000);
    this.stopKeeper = () => clearInterval(timer);
  }

  async stop(): Promise<void> {
    this.stopKeeper?.();
    await Promise.allSettled(this.starting.values());
    await Promise.all(this.replicas.map((p) => p?.stop()));
    await this.proxy.close();
    await stopSandbox(this.env.dir, this.env.slot, () => {});
  }
}

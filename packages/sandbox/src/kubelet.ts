import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import type { Server as HttpsServer } from 'node:https';
import { join } from 'node:path';
import { parseDuration, type Logger } from '@kube-node-ready/core';
import type { SandboxLayout } from './layout.js';
import { k8s, listWatch, statusCode } from './kube.js';
import { NodeAgent } from './node-agent.js';
import { FAULT, SIMULATED_LABEL } from './node-registry.js';
import { bringUpPlan } from './bring-up.js';
import { certPaths } from './certs.js';
import { ContainerLogFile } from './kubelet/container-log.js';
import { containerFieldPath, KubeletEvents, REASON, type EventType } from './kubelet/events.js';
import { goDuration, ImageCache, type PullPolicy } from './kubelet/images.js';
import { podStatus, type ConditionMemory, type ContainerView } from './kubelet/pod-status.js';
import { ContainerProbes, runExecProcess, type ProbeKind } from './kubelet/probes.js';
import { CniHealthEndpoint } from './kubelet/cni-health.js';
import { ensureKubeletCerts, KUBELET_PORT, startKubeletServer, type LogLookup, type LogSource } from './kubelet/server.js';
import { ContainerRuntime, type PodSandbox, type PreparedContainer } from './runtime/runtime.js';
import { POD_MTU_ANNOTATION, type DnsPathFault } from './runtime/pod-network.js';

/** How an image becomes a local command: the image's entrypoint, by image name without registry and tag. */
export type ImageTable = Record<string, string[]>;

export interface KubeletOptions {
  images: ImageTable;
  /** Node lease renewal period (default 10 s, as a real kubelet). */
  leaseRenewMs?: number;
  /** Fallback CA for projected kube-root-ca.crt when the ConfigMap does not exist (no controller-manager). */
  caFile: string;
}

const SA_MOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';
const MAX_TERMINATION_MESSAGE = 4096;

/** A container run as the kubelet holds it: what the status reports (ContainerView), plus its process, probes and logs. */
interface ContainerRun extends ContainerView {
  proc?: ChildProcess;
  probes?: ContainerProbes;
  /** Resolves when the current run's process has exited and been accounted for. */
  exited?: Promise<void>;
  /** The logs of the current run and the one before (kubectl logs, --previous). */
  logs?: ContainerLogFile[];
}

interface PodRun {
  uid: string;
  namespace: string;
  name: string;
  node: string;
  dir: string;
  podIP?: string;
  startTime?: string;
  containers: ContainerRun[];
  deadlineTimer?: NodeJS.Timeout;
  mounts: Mount[];
  finished: boolean;
  killing: boolean;
  /** Its deletion (deletionTimestamp) is being carried out: stopped, then confirmed once. */
  terminating?: boolean;
  deadlineExceeded: boolean;
  /** Someone else (an eviction) marked the pod finished in the API: its containers are stopped and it is never reported again. */
  finishedElsewhere: boolean;
  /** Fault: the termination message containers report instead of their own ('garbage': random bytes); exit code kept. */
  forcedMessage: string | undefined;
  statusChain: Promise<void>;
  /** The pod sandbox exists (its network is set up): containers can start. */
  sandboxReady?: boolean;
  /** The pod's network namespace and container cgroups (runtime/runtime.ts). */
  sandbox?: PodSandbox;
  /** The pod conditions last reported, for their transition times. */
  conditions?: ConditionMemory;
}

/**
 * The simulated kubelet: plays every Node labelled sandbox.kube-node-ready.io/simulated=true.
 * It keeps the node's Lease fresh, runs each container of the pods bound to those nodes as a
 * local process (image -> command through the image table), gives it what a kubelet gives
 * (env with fieldRef values, a service-account token from TokenRequest, mounted volumes, a
 * resolv.conf, a termination-message file) and reports real pod status transitions. It runs a
 * pod as a kubelet does: the pod sandbox (after the node's CNI delay), image pulls (the node's
 * pull delay, then cached), init containers in order, then the containers with their probes
 * (kubelet/probes.ts); it writes the pod Events a kubelet writes (kubelet/events.ts) and serves
 * container logs on the kubelet API (kubelet/server.ts).
 *
 * Where a container would see a file at an absolute path, the process gets a per-pod directory
 * instead: volume mount paths in args/env are rewritten to it, and KNR_SERVICEACCOUNT_DIR,
 * KNR_RESOLV_CONF and KNR_TERMINATION_LOG point at the service-account directory, the resolv.conf
 * and the termination-message file (see docs/sandbox.md).
 */
export class SimulatedKubelet implements LogSource {
  private nodes = new Map<string, k8s.V1Node>();
  private pods = new Map<string, PodRun>();
  /** Pods bound to a node name no node of ours has now (its node deleted, maybe created again later), by uid. */
  private unplaced = new Map<string, k8s.V1Pod>();
  private watches: Array<{ stop: () => void }> = [];
  /** The node side: registration status, Lease, bring-up. */
  readonly agent: NodeAgent;
  private nextPodIp = 2;
  private readonly core: k8s.CoreV1Api;
  private stopped = false;
  /** Pod Events (Pulling, Created, Started, Unhealthy, ...), written as a kubelet writes them. */
  private readonly events: KubeletEvents;
  /** The images each node has pulled. */
  private readonly images = new ImageCache();
  /** The kubelet API (container logs) on :10250. */
  private server?: Promise<HttpsServer | undefined>;
  /** Every node's CNI health endpoint on :9099 (kubelet/cni-health.ts). */
  private cniHealth?: CniHealthEndpoint;
  /** Pod network namespaces and container cgroups (runtime/). */
  private readonly runtime: ContainerRuntime;

  constructor(
    private readonly layout: SandboxLayout,
    private readonly kc: k8s.KubeConfig,
    private readonly log: Logger,
    private readonly opts: KubeletOptions,
  ) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.agent = new NodeAgent(kc, log.child({ component: 'node-agent' }), opts.leaseRenewMs);
    this.events = new KubeletEvents(this.core, log.child({ component: 'events' }));
    this.runtime = new ContainerRuntime(layout, log.child({ component: 'runtime' }));
  }

  start(): void {
    mkdirSync(this.layout.paths.pods, { recursive: true });
    this.watches.push(
      listWatch<k8s.V1Node>(
        this.kc,
        `/api/v1/nodes?labelSelector=${encodeURIComponent(`${SIMULATED_LABEL}=true`)}`,
        () => this.core.listNode({ labelSelector: `${SIMULATED_LABEL}=true` }),
        (type, node) => this.onNode(type, node),
        (items) => {
          const names = new Set(items.map((n) => n.metadata!.name!));
          for (const name of [...this.nodes.keys()]) if (!names.has(name)) this.onNode('DELETED', this.nodes.get(name)!);
          for (const n of items) this.onNode('ADDED', n);
        },
        (err) => this.log.debug({ err: String(err) }, 'node watch restarted'),
      ),
      listWatch<k8s.V1Pod>(
        this.kc,
        '/api/v1/pods?fieldSelector=spec.nodeName!%3D',
        () => this.core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName!=' }),
        (type, pod) => this.onPod(type, pod),
        (items) => {
          const uids = new Set(items.map((p) => p.metadata!.uid!));
          for (const run of this.pods.values()) if (!uids.has(run.uid)) this.kill(run, 'pod no longer exists');
          this.unplaced.clear();
          for (const p of items) this.onPod('ADDED', p);
        },
        (err) => this.log.debug({ err: String(err) }, 'pod watch restarted'),
      ),
    );
    this.agent.start();
    this.server = this.startServer();
    this.cniHealth = new CniHealthEndpoint(this.log.child({ component: 'cni-health' }));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const w of this.watches) w.stop();
    this.agent.stop();
    const server = await this.server;
    server?.close();
    server?.closeAllConnections();
    this.cniHealth?.stop();
    await Promise.all([...this.pods.values()].map((run) => this.kill(run, 'sandbox stopping')));
    await this.runtime.stop();
  }

  /** Number of container processes running now (for status output). */
  runningProcesses(): number {
    let n = 0;
    for (const run of this.pods.values()) for (const c of run.containers) if (c.proc && c.proc.exitCode === null) n++;
    return n;
  }

  // ---- nodes ---------------------------------------------------------------------------------

  private onNode(type: string, node: k8s.V1Node): void {
    const name = node.metadata?.name;
    if (!name) return;
    this.agent.onNode(type === 'DELETED' ? 'DELETED' : 'MODIFIED', node);
    const ip = this.agent.nodeIp(name);
    if (type !== 'DELETED' && ip) this.cniHealth?.set(name, ip, bringUpPlan(node).cniReadyAt ?? 0);
    if (type === 'DELETED') {
      this.cniHealth?.remove(name);
      this.nodes.delete(name);
      this.images.forgetNode(node.metadata?.uid ?? '');
      for (const run of this.pods.values()) if (run.node === name) this.kill(run, 'node deleted');
      return;
    }
    const known = this.nodes.has(name);
    this.nodes.set(name, node);
    if (known) return;
    // A node this kubelet did not play until now (new, or deleted and created again under the same
    // name): as a starting kubelet lists the pods bound to its node name, take up the ones that
    // changed while the node was unknown. A pod being deleted in particular: its deletion is
    // confirmed, or it would stay Terminating (the pod GC leaves pods of an existing node alone).
    for (const pod of [...this.unplaced.values()]) if (pod.spec?.nodeName === name) this.onPod('MODIFIED', pod);
  }

  // ---- pods ----------------------------------------------------------------------------------

  private onPod(type: string, pod: k8s.V1Pod): void {
    const uid = pod.metadata?.uid;
    const nodeName = pod.spec?.nodeName;
    if (uid) this.unplaced.delete(uid);
    if (!uid || !nodeName || !this.nodes.has(nodeName)) {
      const run = uid ? this.pods.get(uid) : undefined;
      if (run) this.kill(run, 'pod left the node');
      if (uid && nodeName && type !== 'DELETED') this.unplaced.set(uid, pod);
      return;
    }
    const existing = this.pods.get(uid);
    if (type === 'DELETED') {
      if (existing) this.kill(existing, 'pod deleted').then(() => this.forget(existing));
      return;
    }
    if (pod.metadata?.deletionTimestamp) {
      void this.terminate(pod, existing);
      return;
    }
    const phase = pod.status?.phase;
    const terminal = phase === 'Succeeded' || phase === 'Failed';
    if (existing) {
      // Marked finished by someone else (an eviction): like a kubelet, stop the containers and
      // never move the pod out of its terminal phase. Our own terminal reports set finished first.
      if (terminal && !existing.finished && !existing.finishedElsewhere) {
        existing.finishedElsewhere = true;
        void this.kill(existing, `pod marked ${phase}${pod.status?.reason ? ` (${pod.status.reason})` : ''}`);
      }
      return;
    }
    if (terminal) return; // finished before we (re)started
    void this.startPod(pod).catch((err) => this.log.error({ err: String(err), pod: pod.metadata?.name }, 'pod start failed'));
  }

  /** Graceful deletion: stop the containers, then confirm the deletion (grace period 0), as a kubelet does. */
  private async terminate(pod: k8s.V1Pod, run: PodRun | undefined): Promise<void> {
    if (run) {
      if (run.terminating) return;
      run.terminating = true;
      if (run.killing) {
        // Already being stopped (its node was deleted, it was evicted): confirm once its processes are gone.
        await Promise.all(run.containers.map((c) => c.exited));
      } else {
        for (const c of run.containers) if (c.proc && c.proc.exitCode === null && c.proc.signalCode === null) this.containerEvent(run, c, 'Normal', REASON.killing, `Stopping container ${c.name}`);
        await this.kill(run, 'pod deleted', (pod.metadata?.deletionGracePeriodSeconds ?? 30) * 1000);
      }
      this.forget(run);
    }
    this.log.debug({ pod: pod.metadata?.name }, 'confirming pod deletion');
    await this.core
      .deleteNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata!.uid! } } })
      .catch((err) => {
        if (statusCode(err) !== 404) this.log.warn({ err: String(err), pod: pod.metadata?.name }, 'confirming pod deletion failed');
      });
  }

  private forget(run: PodRun): void {
    this.pods.delete(run.uid);
    this.events.forgetPod(run.uid);
    rmSync(run.dir, { recursive: true, force: true });
  }

  private allocatePodIp(): string {
    const n = this.nextPodIp++;
    const [a, b] = this.layout.podIpBase;
    return `${a}.${b + ((n >> 16) & 3)}.${(n >> 8) & 255}.${n & 255}`;
  }

  private async startPod(pod: k8s.V1Pod): Promise<void> {
    const node = this.nodes.get(pod.spec!.nodeName!)!;
    const ann = node.metadata?.annotations ?? {};
    const run: PodRun = {
      uid: pod.metadata!.uid!,
      namespace: pod.metadata!.namespace!,
      name: pod.metadata!.name!,
      node: node.metadata!.name!,
      dir: join(this.layout.paths.pods, pod.metadata!.uid!),
      // Init containers first; names are unique across both lists.
      containers: [
        ...(pod.spec?.initContainers ?? []).map((c) => ({ name: c.name, restartCount: 0, init: c.restartPolicy === 'Always' ? ('sidecar' as const) : ('init' as const) })),
        ...(pod.spec?.containers ?? []).map((c) => ({ name: c.name, restartCount: 0 })),
      ],
      mounts: [],
      finished: false,
      killing: false,
      deadlineExceeded: false,
      finishedElsewhere: false,
      forcedMessage: ann[FAULT.terminationMessage],
      statusChain: Promise.resolve(),
    };
    this.pods.set(run.uid, run);
    const log = this.log.child({ pod: `${run.namespace}/${run.name}`, node: run.node });

    const neverStart = ann[FAULT.neverStart] === 'true';
    const delayMs = ann[FAULT.startDelay] ? parseDuration(ann[FAULT.startDelay]!) : 0;
    // never-start: the pod sandbox is created, then the containers never start (an image pull or
    // a container runtime that hangs). A sandbox that is never created is cni-delay's part.
    if (neverStart) run.sandboxReady = true;
    if (neverStart || delayMs > 0) this.writeStatus(pod, run); // Pending, ContainerCreating
    if (neverStart) {
      log.info('node never starts containers (fault): pod stays Pending');
      return;
    }
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    if (run.killing || this.stopped) return;
    if (!(await this.createPodSandbox(pod, run, log))) return;

    run.startTime = new Date().toISOString();
    mkdirSync(run.dir, { recursive: true });
    try {
      run.mounts = await this.materializeVolumes(pod, run);
    } catch (err) {
      for (const c of run.containers) c.waiting = { reason: 'CreateContainerConfigError', message: String(err) };
      this.writeStatus(pod, run);
      log.warn({ err: String(err) }, 'volume setup failed');
      return;
    }
    writeFileSync(join(run.dir, 'resolv.conf'), this.resolvConf(pod, node));

    const deadline = pod.spec?.activeDeadlineSeconds;
    if (deadline) {
      run.deadlineTimer = setTimeout(() => {
        run.deadlineExceeded = true;
        log.info('activeDeadlineSeconds exceeded: killing pod');
        void this.kill(run, 'deadline exceeded', 0).then(() => this.writeStatus(pod, run));
      }, deadline * 1000);
    }
    if (!(await this.runInitContainers(pod, run, log))) return;
    await Promise.all(
      (pod.spec?.containers ?? []).map((spec) => this.startContainer(pod, run, spec, run.containers.find((x) => x.name === spec.name)!, log)),
    );
    this.writeStatus(pod, run);
  }

  private async startContainer(pod: k8s.V1Pod, run: PodRun, spec: k8s.V1Container, c: ContainerRun, log: Logger): Promise<void> {
    if (!(await this.pullImage(pod, run, spec, c))) return;
    if (run.killing || this.stopped) return;
    // The termination-message file is "mounted" at terminationMessagePath like the volumes are.
    const terminationFile = join(run.dir, `${c.name}.termination-log`);
    writeFileSync(terminationFile, '');
    const mounts = [...run.mounts, { mountPath: spec.terminationMessagePath ?? '/dev/termination-log', hostPath: terminationFile }];
    let argv: string[];
    let env: Record<string, string>;
    let prepared: PreparedContainer;
    try {
      env = await this.containerEnv(pod, run, spec, mounts);
      argv = this.commandFor(spec, env, mounts);
      // In the pod's network namespace, in a cgroup with the container's limits.
      prepared = this.runtime.prepareContainer(run.sandbox!, c.name, spec.resources, argv, { PATH: env.PATH, cwd: run.dir });
    } catch (err) {
      c.waiting = { reason: 'CreateContainerError', message: String(err) };
      this.containerEvent(run, c, 'Warning', REASON.failed, `Error: ${String(err)}`);
      log.warn({ container: c.name, err: String(err) }, 'container cannot start');
      return;
    }
    env.KNR_TERMINATION_LOG = terminationFile;
    const logFile = join(run.dir, `${c.name}.log`);
    const out = createWriteStream(logFile, { flags: 'a' });
    const runLog = this.openRunLog(run, c);
    if (c.exitCode !== undefined) c.lastTerminated = { exitCode: c.exitCode, reason: c.reason, message: c.message, startedAt: c.startedAt, finishedAt: c.finishedAt };
    c.waiting = undefined;
    c.exitCode = undefined;
    c.finishedAt = undefined;
    c.startedAt = new Date().toISOString();
    const proc = spawn(prepared.argv[0]!, prepared.argv.slice(1), { env, cwd: run.dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    c.proc = proc;
    proc.stdout?.pipe(out, { end: false });
    proc.stderr?.pipe(out, { end: false });
    runLog.attach('stdout', proc.stdout);
    runLog.attach('stderr', proc.stderr);
    this.containerStarted(pod, run, spec, c, env, mounts, log);
    log.debug({ container: c.name, argv }, 'container started');
    proc.on('error', (err) => {
      c.exitCode = 128;
      c.reason = 'StartError';
      c.message = String(err);
    });
    const exited = (code: number | null, signal: NodeJS.Signals | null): void => {
      this.containerStopped(c);
      c.finishedAt = new Date().toISOString();
      c.exitCode = code ?? (signal ? 128 + (signal === 'SIGKILL' ? 9 : 15) : 1);
      // OOMKilled when the kernel's OOM killer killed a process of the container's cgroup (as containerd reports it).
      c.reason = prepared.exited().oomKilled ? 'OOMKilled' : c.exitCode === 0 ? 'Completed' : 'Error';
      const forced = run.forcedMessage === 'garbage' ? garbage() : run.forcedMessage;
      c.message = forced ?? this.terminationMessage(spec, terminationFile, logFile, c.exitCode);
      log.debug({ container: c.name, exitCode: c.exitCode }, 'container exited');
      if (run.killing || this.stopped) return;
      if (c.init === 'init') return; // runInitContainers decides what comes next
      if (c.init === 'sidecar' && run.finished) return; // stopped because the pod is done
      const policy = c.init === 'sidecar' ? 'Always' : (pod.spec?.restartPolicy ?? 'Always');
      if (policy === 'Always' || (policy === 'OnFailure' && c.exitCode !== 0)) {
        c.restartCount++;
        const backoff = Math.min(10_000 * 2 ** Math.max(0, c.restartCount - 1), 300_000);
        c.waiting = { reason: 'CrashLoopBackOff', message: `back-off ${backoff / 1000}s restarting failed container=${c.name} pod=${run.name}` };
        this.containerEvent(run, c, 'Warning', REASON.backOff, `Back-off restarting failed container ${c.name} in pod ${run.name}_${run.namespace}(${run.uid})`);
        this.writeStatus(pod, run);
        setTimeout(() => {
          if (!run.killing && !this.stopped) {
            void this.startContainer(pod, run, spec, c, log).then(() => this.writeStatus(pod, run));
          }
        }, backoff);
        return;
      }
      this.writeStatus(pod, run);
    };
    // The exit is handled once the log file has everything the container wrote (its stream has
    // flushed): a termination message that falls back to the log reads it.
    c.exited = new Promise((resolve) => proc.once('close', (code, signal) => out.end(() => {
      exited(code, signal);
      resolve();
    })));
  }

  private terminationMessage(spec: k8s.V1Container, file: string, logFile: string, exitCode: number): string | undefined {
    let msg = '';
    try {
      msg = readFileSync(file).subarray(0, MAX_TERMINATION_MESSAGE).toString('utf8');
    } catch {
      /* no file: no message */
    }
    if (!msg && exitCode !== 0 && spec.terminationMessagePolicy === 'FallbackToLogsOnError') {
      try {
        const lines = readFileSync(logFile, 'utf8').split('\n').slice(-80).join('\n');
        msg = Buffer.from(lines).subarray(-2048).toString('utf8');
      } catch {
        /* no log */
      }
    }
    return msg || undefined;
  }

  /** Kills every container process of the pod (SIGTERM, then SIGKILL after graceMs). */
  private async kill(run: PodRun, why: string, graceMs = 2000): Promise<void> {
    run.killing = true;
    clearTimeout(run.deadlineTimer);
    const live = run.containers.map((c) => c.proc).filter((p): p is ChildProcess => !!p && p.exitCode === null && p.signalCode === null);
    if (live.length) this.log.debug({ pod: `${run.namespace}/${run.name}`, why }, 'killing pod processes');
    await Promise.all(
      live.map(
        (p) =>
          new Promise<void>((resolve) => {
            const t = setTimeout(() => killGroup(p, 'SIGKILL'), graceMs);
            p.once('close', () => {
              clearTimeout(t);
              resolve();
            });
            killGroup(p, graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
          }),
      ),
    );
    await this.releasePodSandbox(run);
  }

  // ---- pod lifecycle: sandbox, image pulls, init containers, probes, events, logs -------------

  /**
   * Creates the pod sandbox. Until the node's CNI is ready (bring-up knob cni-delay), the CNI ADD
   * fails: the pod stays ContainerCreating and gets a FailedCreatePodSandBox Warning each attempt,
   * retried every SANDBOX_RETRY_MS as a kubelet's pod worker does. Host-network pods need no CNI.
   * False when the pod went away meanwhile.
   */
  private async createPodSandbox(pod: k8s.V1Pod, run: PodRun, log: Logger): Promise<boolean> {
    const cniReadyAt = () => {
      const node = this.nodes.get(run.node);
      if (!node || pod.spec?.hostNetwork) return 0;
      const plan = bringUpPlan(node);
      if (plan.invalid) log.warn({ invalid: plan.invalid }, 'bad bring-up annotation; ignored');
      return plan.cniReadyAt ?? 0;
    };
    if (Date.now() < cniReadyAt()) {
      this.writeStatus(pod, run); // Pending, ContainerCreating
      const sandboxId = createHash('sha256').update(`sandbox/${run.uid}`).digest('hex');
      do {
        this.podEvent(run, 'Warning', REASON.failedCreatePodSandBox, cniAddFailure(sandboxId));
        await new Promise((r) => setTimeout(r, SANDBOX_RETRY_MS));
        if (run.killing || this.stopped) return false;
      } while (Date.now() < cniReadyAt());
      log.debug('CNI ready: pod sandbox created');
    }
    if (!(await this.setUpPodNetwork(pod, run, log))) return false;
    run.sandboxReady = true;
    return true;
  }

  /**
   * The CNI ADD: a network namespace with the pod IP (runtime/pod-network.ts), or the node's
   * address for a hostNetwork pod. False when it failed (a FailedCreatePodSandBox Warning) or the
   * pod went away meanwhile.
   */
  private async setUpPodNetwork(pod: k8s.V1Pod, run: PodRun, log: Logger): Promise<boolean> {
    const nodeIP = this.agent.nodeIp(run.node) ?? this.layout.advertiseAddress;
    const hostNetwork = !!pod.spec?.hostNetwork;
    const mtuAnnotation = this.nodes.get(run.node)?.metadata?.annotations?.[POD_MTU_ANNOTATION];
    const mtu = mtuAnnotation && /^\d+$/.test(mtuAnnotation) ? Number(mtuAnnotation) : undefined;
    if (mtuAnnotation && mtu === undefined) log.warn({ [POD_MTU_ANNOTATION]: mtuAnnotation }, 'bad pod MTU annotation; ignored');
    const podIP = hostNetwork ? nodeIP : this.allocatePodIp();
    try {
      run.sandbox = await this.runtime.createPodSandbox(run.uid, { podIP, hostNetwork, mtu, nodeIP, dnsFault: this.dnsFault(run.node) });
    } catch (err) {
      this.podEvent(run, 'Warning', REASON.failedCreatePodSandBox, `Failed to create pod sandbox: ${String(err)}`);
      this.writeStatus(pod, run);
      log.warn({ err: String(err) }, 'pod network set-up failed');
      return false;
    }
    run.podIP = podIP;
    if (run.killing || this.stopped) {
      await this.runtime.removePodSandbox(run.sandbox);
      return false;
    }
    return true;
  }

  /** Removes the pod's network and cgroups once every container process of the pod has exited. */
  private async releasePodSandbox(run: PodRun): Promise<void> {
    await Promise.all(run.containers.map((c) => c.exited));
    await this.runtime.removePodSandbox(run.sandbox);
  }

  /**
   * Makes the container's image available on its node (bring-up knob image-pull-delay, see
   * kubelet/images.ts), with the kubelet's Pulling/Pulled Events. False when it cannot be (pull
   * policy Never and the image is not on the node).
   */
  private async pullImage(pod: k8s.V1Pod, run: PodRun, spec: k8s.V1Container, c: ContainerRun): Promise<boolean> {
    const node = this.nodes.get(run.node);
    const image = spec.image ?? '';
    const firstPullMs = node ? (bringUpPlan(node).imagePullMs ?? 0) : 0;
    const outcome = await this.images.ensure(node?.metadata?.uid ?? run.node, image, spec.imagePullPolicy as PullPolicy | undefined, firstPullMs, {
      onPulling: () => {
        this.containerEvent(run, c, 'Normal', REASON.pulling, `Pulling image "${image}"`);
        // A pull that takes time shows in the API as ContainerCreating (the first status of the pod otherwise waits for its start).
        if (firstPullMs > 0 && !c.startedAt) this.writeStatus(pod, run);
      },
    });
    if (outcome.kind === 'present') this.containerEvent(run, c, 'Normal', REASON.pulled, `Container image "${image}" already present on machine`);
    else if (outcome.kind === 'pulled')
      this.containerEvent(run, c, 'Normal', REASON.pulled, `Successfully pulled image "${image}" in ${goDuration(outcome.pullMs)} (${goDuration(outcome.waitedMs)} including waiting). Image size: ${outcome.sizeBytes} bytes.`);
    else {
      const message = `Container image "${image}" is not present with pull policy of Never`;
      c.waiting = { reason: 'ErrImageNeverPull', message };
      this.containerEvent(run, c, 'Warning', REASON.errImageNeverPull, message);
      this.writeStatus(pod, run);
      return false;
    }
    return true;
  }

  /**
   * Runs the init containers in order, each to completion, before any container starts. A failed
   * one is run again after a back-off (restartPolicy Always or OnFailure) or fails the pod (Never).
   * A sidecar (an init container with restartPolicy Always) is started, and the next one runs once
   * it has started (its startup probe passed); it keeps running beside the containers.
   * False when the containers must not start (the pod failed, went away or cannot start).
   */
  private async runInitContainers(pod: k8s.V1Pod, run: PodRun, log: Logger): Promise<boolean> {
    const policy = pod.spec?.restartPolicy ?? 'Always';
    const gone = () => run.killing || this.stopped;
    for (const spec of pod.spec?.initContainers ?? []) {
      const c = run.containers.find((x) => x.name === spec.name)!;
      if (c.init === 'sidecar') {
        await this.startContainer(pod, run, spec, c, log);
        while (!c.started && !c.waiting?.reason.startsWith('Create') && !c.waiting?.reason.startsWith('ErrImage') && !gone()) await new Promise((r) => setTimeout(r, 100));
        if (gone() || !c.started) return false;
        continue;
      }
      for (;;) {
        await this.startContainer(pod, run, spec, c, log);
        if (gone()) return false;
        if (c.waiting || !c.exited) {
          this.writeStatus(pod, run); // it cannot start: Init:CreateContainerError and the like
          return false;
        }
        this.writeStatus(pod, run); // Init:i/N
        await c.exited;
        if (gone()) return false;
        if (c.exitCode === 0) break;
        if (policy === 'Never') {
          log.info({ container: c.name, exitCode: c.exitCode }, 'init container failed: pod failed');
          this.writeStatus(pod, run);
          return false;
        }
        c.restartCount++;
        const backoff = Math.min(10_000 * 2 ** Math.max(0, c.restartCount - 1), 300_000);
        c.waiting = { reason: 'CrashLoopBackOff', message: `back-off ${backoff / 1000}s restarting failed container=${c.name} pod=${run.name}` };
        this.containerEvent(run, c, 'Warning', REASON.backOff, `Back-off restarting failed container ${c.name} in pod ${run.name}_${run.namespace}(${run.uid})`);
        this.writeStatus(pod, run);
        await new Promise((r) => setTimeout(r, backoff));
        if (gone()) return false;
      }
    }
    return true;
  }

  /** A container's run has begun: the Created and Started Events, and its probes. */
  private containerStarted(pod: k8s.V1Pod, run: PodRun, spec: k8s.V1Container, c: ContainerRun, env: Record<string, string>, mounts: Mount[], log: Logger): void {
    this.containerEvent(run, c, 'Normal', REASON.created, `Created container: ${c.name}`);
    this.containerEvent(run, c, 'Normal', REASON.started, `Started container ${c.name}`);
    c.started = !spec.startupProbe;
    c.ready = c.started && !spec.readinessProbe;
    // Regular init containers cannot have probes (the API server refuses them).
    if (c.init === 'init' || !ContainerProbes.needed(spec)) return;
    const target = {
      get podIP() {
        return run.podIP ?? '127.0.0.1';
      },
      ports: spec.ports ?? [],
      exec: (command: string[], timeoutMs: number) => this.execInContainer(run, spec, env, mounts, command, timeoutMs),
    };
    const probes: ContainerProbes = new ContainerProbes(spec, target, {
      onReady: (ready) => {
        c.ready = ready;
        this.writeStatus(pod, run);
      },
      onStarted: () => {
        c.started = true;
        c.ready = probes.ready;
        this.writeStatus(pod, run);
      },
      onUnhealthy: (kind, output) => this.containerEvent(run, c, 'Warning', REASON.unhealthy, `${PROBE_NAME[kind]} probe failed: ${output}`),
      onFailed: (kind) => {
        log.info({ container: c.name, probe: kind }, 'probe failed: restarting container');
        this.containerEvent(run, c, 'Normal', REASON.killing, `Container ${c.name} failed ${kind} probe, will be restarted`);
        const probe = kind === 'liveness' ? spec.livenessProbe : spec.startupProbe;
        const graceS = probe?.terminationGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
        this.stopContainer(c, graceS * 1000);
      },
    });
    c.probes = probes;
    probes.start(Date.now());
  }

  /** A container's run has ended: its probes stop; it is neither started nor ready. */
  private containerStopped(c: ContainerRun): void {
    c.probes?.stop();
    c.probes = undefined;
    c.ready = false;
    c.started = false;
  }

  /** Stops one container's process (SIGTERM, SIGKILL after graceMs); its exit is handled as any exit (restart policy). */
  private stopContainer(c: ContainerRun, graceMs: number): void {
    const p = c.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const t = setTimeout(() => killGroup(p, 'SIGKILL'), graceMs);
    p.once('close', () => clearTimeout(t));
    killGroup(p, 'SIGTERM');
  }

  /** An exec probe: the command runs as the container's process does (its env, its directory, its mount paths). */
  private execInContainer(run: PodRun, spec: k8s.V1Container, env: Record<string, string>, mounts: Mount[], command: string[], timeoutMs: number) {
    const argv = this.commandFor({ ...spec, command, args: [] }, env, mounts);
    const inPod = run.sandbox ? this.runtime.execArgv(run.sandbox, argv) : argv;
    return runExecProcess(() => spawn(inPod[0]!, inPod.slice(1), { env, cwd: run.dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true }), timeoutMs);
  }

  /** Opens the CRI-format log of a container's next run; keeps the previous run's (kubectl logs --previous). */
  private openRunLog(run: PodRun, c: ContainerRun): ContainerLogFile {
    const dir = join(run.dir, 'logs', c.name);
    mkdirSync(dir, { recursive: true });
    const file = new ContainerLogFile(join(dir, `${c.restartCount}.log`));
    const logs = [...(c.logs ?? []), file];
    for (const old of logs.splice(0, Math.max(0, logs.length - 2))) rmSync(old.path, { force: true });
    c.logs = logs;
    return file;
  }

  /** The kubelet API's container logs (kubelet/server.ts): which run's log, as a kubelet picks it. */
  containerLog(namespace: string, name: string, container: string, previous: boolean): LogLookup {
    let run: PodRun | undefined;
    for (const r of this.pods.values()) if (r.namespace === namespace && r.name === name && (!run || run.killing)) run = r;
    if (!run) return { ok: false, status: 404, message: `pod "${name}" does not exist` };
    const c = run.containers.find((x) => x.name === container);
    if (!c) return { ok: false, status: 404, message: `container "${container}" not found in pod "${name}"` };
    const logs = c.logs ?? [];
    const current = logs[logs.length - 1];
    const crashed = c.waiting !== undefined && c.exitCode !== undefined; // between runs, in back-off
    if (previous) {
      const prev = crashed ? current : c.lastTerminated ? logs[logs.length - 2] : undefined;
      if (!prev) return { ok: false, status: 400, message: `previous terminated container "${container}" in pod "${name}" not found` };
      return { ok: true, path: prev.path };
    }
    if (!current) return { ok: false, status: 400, message: `container "${container}" in pod "${name}" is waiting to start: ${c.waiting?.reason ?? 'ContainerCreating'}` };
    return { ok: true, path: current.path, live: current };
  }

  private async startServer(): Promise<HttpsServer | undefined> {
    try {
      const certs = await ensureKubeletCerts(this.layout);
      const server = await startKubeletServer({
        certFile: certs.serverCert,
        keyFile: certs.serverKey,
        caFile: certPaths(this.layout.paths.certs).caCert,
        logs: this,
        log: this.log.child({ component: 'kubelet-api' }),
      });
      this.log.debug({ port: KUBELET_PORT }, 'kubelet API listening');
      return server;
    } catch (err) {
      this.log.warn({ err: String(err) }, 'kubelet API not started: kubectl logs will not work');
      return undefined;
    }
  }

  private containerEvent(run: PodRun, c: ContainerRun, type: EventType, reason: string, message: string): void {
    this.events.record({ namespace: run.namespace, name: run.name, uid: run.uid, node: run.node, fieldPath: containerFieldPath(c.name, c.init !== undefined) }, type, reason, message);
  }

  private podEvent(run: PodRun, type: EventType, reason: string, message: string): void {
    this.events.record({ namespace: run.namespace, name: run.name, uid: run.uid, node: run.node }, type, reason, message);
  }

  // ---- what a container gets -----------------------------------------------------------------

  /**
   * The pods' nameserver is the cluster DNS address, as every kubelet of a cluster writes it, unless
   * the node's dns fault is an IPv4 address (a kubelet configured with another clusterDNS). The
   * named faults break the node's path to that same address instead (dnsFault), so a broken node
   * fails against the target healthy nodes pass against, as on a real cluster.
   */
  private resolvConf(pod: k8s.V1Pod, node: k8s.V1Node): string {
    const L = this.layout;
    const choice = node.metadata?.annotations?.[FAULT.dns] ?? 'ok';
    const server = /^\d{1,3}(\.\d{1,3}){3}$/.test(choice) ? choice : L.clusterDnsIp;
    const ns = pod.metadata!.namespace!;
    const d = L.clusterDomain;
    return `search ${ns}.svc.${d} svc.${d} ${d}\nnameserver ${server}\noptions ndots:5\n`;
  }

  /** The node's named dns fault as where its pods' DNS traffic to the cluster DNS address goes instead. */
  private dnsFault(node: string): DnsPathFault | undefined {
    const L = this.layout;
    const choice = this.nodes.get(node)?.metadata?.annotations?.[FAULT.dns] ?? 'ok';
    const to = ({ dead: L.deadDnsIp, blackhole: L.blackholeDnsIp, lying: L.lyingDnsIp } as Record<string, string | undefined>)[choice];
    return to === undefined ? undefined : { clusterDnsIp: L.clusterDnsIp, to };
  }

  private async containerEnv(pod: k8s.V1Pod, run: PodRun, spec: k8s.V1Container, mounts: Mount[]): Promise<Record<string, string>> {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: run.dir,
      HOSTNAME: run.name,
      KUBERNETES_SERVICE_HOST: this.layout.kubernetesServiceIp,
      KUBERNETES_SERVICE_PORT: '443',
      KUBERNETES_SERVICE_PORT_HTTPS: '443',
      KUBERNETES_PORT: `tcp://${this.layout.kubernetesServiceIp}:443`,
      KNR_RESOLV_CONF: join(run.dir, 'resolv.conf'),
    };
    const sa = mounts.find((m) => m.mountPath === SA_MOUNT);
    if (sa) env.KNR_SERVICEACCOUNT_DIR = sa.hostPath;
    for (const e of spec.env ?? []) {
      if (e.value !== undefined) env[e.name] = expand(rewritePaths(e.value, mounts), env);
      else if (e.valueFrom?.fieldRef) env[e.name] = this.fieldRef(pod, run, e.valueFrom.fieldRef.fieldPath);
      else if (e.valueFrom?.configMapKeyRef) {
        const ref = e.valueFrom.configMapKeyRef;
        const cm = await this.core.readNamespacedConfigMap({ name: ref.name!, namespace: run.namespace });
        const v = cm.data?.[ref.key];
        if (v === undefined && !ref.optional) throw new Error(`couldn't find key ${ref.key} in ConfigMap ${run.namespace}/${ref.name}`);
        if (v !== undefined) env[e.name] = v;
      } else if (e.valueFrom?.secretKeyRef) {
        const ref = e.valueFrom.secretKeyRef;
        const sec = await this.core.readNamespacedSecret({ name: ref.name!, namespace: run.namespace });
        const v = sec.data?.[ref.key];
        if (v === undefined && !ref.optional) throw new Error(`couldn't find key ${ref.key} in Secret ${run.namespace}/${ref.name}`);
        if (v !== undefined) env[e.name] = Buffer.from(v, 'base64').toString('utf8');
      }
    }
    return env;
  }

  private fieldRef(pod: k8s.V1Pod, run: PodRun, path: string): string {
    const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
    if (m) return (m[1] === 'labels' ? pod.metadata?.labels : pod.metadata?.annotations)?.[m[2]!] ?? '';
    switch (path) {
      case 'metadata.name':
        return run.name;
      case 'metadata.namespace':
        return run.namespace;
      case 'metadata.uid':
        return run.uid;
      case 'spec.nodeName':
        return run.node;
      case 'spec.serviceAccountName':
        return pod.spec?.serviceAccountName ?? 'default';
      case 'status.podIP':
        return run.podIP ?? '';
      case 'status.hostIP':
        return this.agent.nodeIp(run.node) ?? this.layout.advertiseAddress;
      default:
        throw new Error(`fieldRef ${path} is not supported by the sandbox kubelet`);
    }
  }

  private commandFor(spec: k8s.V1Container, env: Record<string, string>, mounts: Mount[]): string[] {
    const image = spec.image ?? '';
    const base = image.replace(/@.*$/, '').replace(/:[^/:]+$/, '').split('/').pop() ?? '';
    const entrypoint = this.opts.images[base] ?? this.opts.images[image.replace(/:[^/:]+$/, '')];
    if (!entrypoint) throw new Error(`sandbox: no local command for image "${image}" (known: ${Object.keys(this.opts.images).join(', ')})`);
    const fix = (s: string) => expand(rewritePaths(s, mounts), env);
    const command = spec.command?.length ? spec.command.map(fix) : [];
    // A command naming the image's own program runs the mapped entrypoint; any other command is a local binary.
    const head = command.length ? (command[0] === base || command[0]?.endsWith(`/${base}`) ? [...entrypoint, ...command.slice(1)] : command) : entrypoint;
    return [...head, ...(spec.args ?? []).map(fix)];
  }

  private async materializeVolumes(pod: k8s.V1Pod, run: PodRun): Promise<Mount[]> {
    const mounts: Mount[] = [];
    const volumes = new Map((pod.spec?.volumes ?? []).map((v) => [v.name, v]));
    const ns = run.namespace;
    const written = new Map<string, string>();
    for (const spec of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
      for (const vm of spec.volumeMounts ?? []) {
        const vol = volumes.get(vm.name);
        if (!vol) throw new Error(`volume ${vm.name} not found in pod spec`);
        let dir = written.get(vm.name);
        if (!dir) {
          dir = join(run.dir, 'volumes', vm.name);
          mkdirSync(dir, { recursive: true });
          await this.fillVolume(pod, run, vol, dir, ns);
          written.set(vm.name, dir);
        }
        mounts.push({ mountPath: vm.mountPath.replace(/\/$/, ''), hostPath: vm.subPath ? join(dir, vm.subPath) : dir });
      }
    }
    return mounts.sort((a, b) => b.mountPath.length - a.mountPath.length);
  }

  private async fillVolume(pod: k8s.V1Pod, run: PodRun, vol: k8s.V1Volume, dir: string, ns: string): Promise<void> {
    const put = (file: string, data: string | Buffer) => {
      mkdirSync(join(dir, file, '..'), { recursive: true });
      writeFileSync(join(dir, file), data);
    };
    if (vol.emptyDir) return;
    if (vol.configMap) {
      const cm = await this.core.readNamespacedConfigMap({ name: vol.configMap.name!, namespace: ns });
      const items = vol.configMap.items ?? Object.keys(cm.data ?? {}).map((key) => ({ key, path: key }));
      for (const it of items) put(it.path, cm.data?.[it.key] ?? '');
      return;
    }
    if (vol.secret) {
      const s = await this.core.readNamespacedSecret({ name: vol.secret.secretName!, namespace: ns });
      const items = vol.secret.items ?? Object.keys(s.data ?? {}).map((key) => ({ key, path: key }));
      for (const it of items) put(it.path, Buffer.from(s.data?.[it.key] ?? '', 'base64'));
      return;
    }
    if (vol.downwardAPI) {
      for (const it of vol.downwardAPI.items ?? []) if (it.fieldRef) put(it.path, this.fieldRef(pod, run, it.fieldRef.fieldPath));
      return;
    }
    if (vol.projected) {
      for (const src of vol.projected.sources ?? []) {
        if (src.serviceAccountToken) {
          const tr = await this.core.createNamespacedServiceAccountToken({
            name: pod.spec?.serviceAccountName ?? 'default',
            namespace: ns,
            body: {
              spec: {
                audiences: src.serviceAccountToken.audience ? [src.serviceAccountToken.audience] : [],
                expirationSeconds: src.serviceAccountToken.expirationSeconds ?? 3607,
                boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: run.name, uid: run.uid },
              },
            },
          });
          put(src.serviceAccountToken.path, tr.status?.token ?? '');
        } else if (src.configMap) {
          let data: Record<string, string> | undefined;
          try {
            data = (await this.core.readNamespacedConfigMap({ name: src.configMap.name!, namespace: ns })).data;
          } catch (err) {
            if (statusCode(err) !== 404 || src.configMap.name !== 'kube-root-ca.crt') throw err;
            data = { 'ca.crt': readFileSync(this.opts.caFile, 'utf8') }; // published by kube-controller-manager in a real cluster
          }
          const items = src.configMap.items ?? Object.keys(data ?? {}).map((key) => ({ key, path: key }));
          for (const it of items) put(it.path, data?.[it.key] ?? '');
        } else if (src.downwardAPI) {
          for (const it of src.downwardAPI.items ?? []) if (it.fieldRef) put(it.path, this.fieldRef(pod, run, it.fieldRef.fieldPath));
        } else if (src.secret) {
          const s = await this.core.readNamespacedSecret({ name: src.secret.name!, namespace: ns });
          const items = src.secret.items ?? Object.keys(s.data ?? {}).map((key) => ({ key, path: key }));
          for (const it of items) put(it.path, Buffer.from(s.data?.[it.key] ?? '', 'base64'));
        }
      }
      return;
    }
    throw new Error(`volume ${vol.name}: only emptyDir, configMap, secret, downwardAPI and projected volumes are supported by the sandbox kubelet`);
  }

  // ---- status --------------------------------------------------------------------------------

  /** Serialises status writes per pod so they land in order. */
  /**
   * Reports the pod's current status. Like a kubelet's status manager, it keeps trying (every
   * second, for up to two minutes) while the API server does not take it, e.g. during a restart;
   * a retry sends the status of that moment, never an older one.
   */
  private writeStatus(pod: k8s.V1Pod, run: PodRun, retry = 0): void {
    run.statusChain = run.statusChain.then(() => this.sendStatus(pod, run, retry > 0)).catch((err) => {
      if (statusCode(err) === 404 || this.stopped || run.killing) return;
      // Invalid (422) is a bug in the status the kubelet builds, not a passing outage: make it seen.
      this.log[statusCode(err) === 422 ? 'warn' : 'debug']({ err: String(err), pod: run.name, retry }, 'pod status update failed; retrying');
      if (retry < 120) setTimeout(() => this.writeStatus(pod, run, retry + 1), 1000).unref();
    });
  }

  private async sendStatus(pod: k8s.V1Pod, run: PodRun, resend = false): Promise<void> {
    if (run.finishedElsewhere || (run.finished && !resend)) return;
    const now = new Date().toISOString();
    const s = podStatus(pod, { uid: run.uid, sandboxReady: !!run.sandboxReady, deadlineExceeded: run.deadlineExceeded, containers: run.containers }, run.conditions ?? {}, now);
    run.conditions = s.memory;
    const phase = s.phase;
    if (phase === 'Succeeded' || phase === 'Failed') {
      run.finished = true;
      clearTimeout(run.deadlineTimer);
      // Sidecars (restartable init containers) are stopped once the pod's containers are done.
      for (const c of run.containers) if (c.init === 'sidecar' && c.proc && c.proc.exitCode === null && c.proc.signalCode === null) killGroup(c.proc, 'SIGTERM');
      // A finished pod's network and cgroups go once its last process has (the pod IP is released).
      void this.releasePodSandbox(run);
    }
    // The node's InternalIP, known to the node agent from the node's first sight on (before the Node
    // object shows it), so a pod's hostIP never changes.
    const hostIP = this.agent.nodeIp(run.node) ?? this.layout.advertiseAddress;
    const status: Record<string, unknown> = {
      phase,
      reason: s.reason,
      message: s.message,
      hostIP,
      hostIPs: [{ ip: hostIP }],
      conditions: s.conditions,
      containerStatuses: s.containerStatuses,
      ...(s.initContainerStatuses.length ? { initContainerStatuses: s.initContainerStatuses } : {}),
    };
    if (run.startTime) status.startTime = run.startTime;
    if (run.podIP) {
      status.podIP = run.podIP;
      status.podIPs = [{ ip: run.podIP }];
    }
    await this.core.patchNamespacedPodStatus(
      { name: run.name, namespace: run.namespace, body: { metadata: { uid: run.uid }, status } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
    );
  }
}

interface Mount {
  mountPath: string;
  hostPath: string;
}

/** How often a kubelet retries creating a pod sandbox while the CNI fails. */
const SANDBOX_RETRY_MS = 5000;

const PROBE_NAME: Record<ProbeKind, string> = { liveness: 'Liveness', readiness: 'Readiness', startup: 'Startup' };

/** What a kubelet reports while the AWS VPC CNI's ipamd is not up yet. */
function cniAddFailure(sandboxId: string): string {
  return (
    `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "${sandboxId}": ` +
    'plugin type="aws-cni" name="aws-cni" failed (add): add cmd: Error received from AddNetwork gRPC call: rpc error: code = Unavailable ' +
    'desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:50051: connect: connection refused"'
  );
}

/**
 * Rewrites absolute paths under a volume mount to the pod's host directory, in one pass (a host
 * path is never rewritten again when it happens to lie under another mount path). Mounts are
 * sorted longest first, so the most specific mount wins.
 */
function rewritePaths(value: string, mounts: Mount[]): string {
  if (!mounts.length) return value;
  const byPath = new Map(mounts.map((m) => [m.mountPath, m.hostPath]));
  const alternatives = mounts.map((m) => escapeRe(m.mountPath)).join('|');
  return value.replace(new RegExp(`(^|[=:,\\s])(${alternatives})(?=/|$|[,:\\s])`, 'g'), (_all, pre: string, path: string) => `${pre}${byPath.get(path)}`);
}

/** Kubernetes $(VAR) expansion in command, args and env values; $$ escapes. */
function expand(value: string, env: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (all, name: string | undefined) => {
    if (all === '$$') return '$';
    return name !== undefined && env[name] !== undefined ? env[name]! : all;
  });
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function killGroup(p: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (p.pid) process.kill(-p.pid, signal);
  } catch {
    try {
      p.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

/** 1 to 4096 random ASCII bytes (control characters included), as a corrupted termination-message file would hold. */
function garbage(): string {
  const bytes = randomBytes(1 + Math.floor(Math.random() * MAX_TERMINATION_MESSAGE));
  for (let i = 0; i < bytes.length; i++) bytes[i] = 1 + (bytes[i]! % 127);
  return bytes.toString('latin1');
}

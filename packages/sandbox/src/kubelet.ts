import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { parseDuration, type Logger } from '@kube-node-ready/core';
import type { SandboxLayout } from './layout.js';
import { k8s, listWatch, statusCode } from './kube.js';
import { FAULT, SIMULATED_LABEL } from './node-registry.js';

/** How an image becomes a local command: the image's entrypoint, by image name without registry and tag. */
export type ImageTable = Record<string, string[]>;

export interface KubeletOptions {
  images: ImageTable;
  /** Node lease renewal period (a real kubelet renews every 10s; the sandbox defaults to 30s to stay light at 1000 nodes). */
  leaseRenewMs?: number;
  /** Fallback CA for projected kube-root-ca.crt when the ConfigMap does not exist (no controller-manager). */
  caFile: string;
}

const SA_MOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';
const NOT_READY_TAINT = 'node.kubernetes.io/not-ready';
const MAX_TERMINATION_MESSAGE = 4096;

interface ContainerRun {
  name: string;
  proc?: ChildProcess;
  startedAt?: string;
  finishedAt?: string;
  exitCode?: number;
  reason?: string;
  message?: string;
  restartCount: number;
  waiting?: { reason: string; message?: string };
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
  deadlineExceeded: boolean;
  /** Someone else (an eviction) marked the pod finished in the API: its containers are stopped and it is never reported again. */
  finishedElsewhere: boolean;
  /** Fault: the termination message containers report instead of their own ('garbage': random bytes); exit code kept. */
  forcedMessage: string | undefined;
  statusChain: Promise<void>;
}

/**
 * The simulated kubelet: plays every Node labelled sandbox.kube-node-ready.io/simulated=true.
 * It keeps the node's Lease fresh, runs each container of the pods bound to those nodes as a
 * local process (image -> command through the image table), gives it what a kubelet gives
 * (env with fieldRef values, a service-account token from TokenRequest, mounted volumes, a
 * resolv.conf, a termination-message file) and reports real pod status transitions.
 *
 * Where a container would see a file at an absolute path, the process gets a per-pod directory
 * instead: volume mount paths in args/env are rewritten to it, and KNR_SERVICEACCOUNT_DIR,
 * KNR_RESOLV_CONF and KNR_TERMINATION_LOG point at the service-account directory, the resolv.conf
 * and the termination-message file (see docs/sandbox.md).
 */
export class SimulatedKubelet {
  private nodes = new Map<string, k8s.V1Node>();
  private pods = new Map<string, PodRun>();
  private watches: Array<{ stop: () => void }> = [];
  private leaseTimer?: NodeJS.Timeout;
  private nextPodIp = 2;
  private readonly core: k8s.CoreV1Api;
  private readonly coord: k8s.CoordinationV1Api;
  private stopped = false;

  constructor(
    private readonly layout: SandboxLayout,
    private readonly kc: k8s.KubeConfig,
    private readonly log: Logger,
    private readonly opts: KubeletOptions,
  ) {
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.coord = kc.makeApiClient(k8s.CoordinationV1Api);
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
          for (const p of items) this.onPod('ADDED', p);
        },
        (err) => this.log.debug({ err: String(err) }, 'pod watch restarted'),
      ),
    );
    const renew = this.opts.leaseRenewMs ?? 30_000;
    this.leaseTimer = setInterval(() => void this.renewLeases(), renew);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const w of this.watches) w.stop();
    clearInterval(this.leaseTimer);
    await Promise.all([...this.pods.values()].map((run) => this.kill(run, 'sandbox stopping')));
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
    if (type === 'DELETED') {
      this.nodes.delete(name);
      for (const run of this.pods.values()) if (run.node === name) this.kill(run, 'node deleted');
      return;
    }
    const known = this.nodes.get(name);
    this.nodes.set(name, node);
    if (!known || known.metadata?.uid !== node.metadata?.uid) void this.renewLease(node);
    void this.syncReadyCondition(node);
    void this.syncNotReadyTaint(node);
  }

  /**
   * Plays kube-controller-manager's node lifecycle controller: the apiserver's admission adds
   * node.kubernetes.io/not-ready:NoSchedule to every new Node; it is removed once Ready=True
   * (and added back when the node turns NotReady). JSON patch guarded by a test on the taint list.
   */
  private async syncNotReadyTaint(node: k8s.V1Node): Promise<void> {
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
    const taints = node.spec?.taints ?? [];
    const idx = taints.findIndex((t) => t.key === NOT_READY_TAINT && t.effect === 'NoSchedule');
    if (ready === (idx < 0)) return;
    const patch = ready
      ? [
          { op: 'test', path: `/spec/taints/${idx}`, value: taints[idx] },
          { op: 'remove', path: `/spec/taints/${idx}` },
        ]
      : taints.length
        ? [{ op: 'add', path: '/spec/taints/-', value: { key: NOT_READY_TAINT, effect: 'NoSchedule' } }]
        : [{ op: 'add', path: '/spec/taints', value: [{ key: NOT_READY_TAINT, effect: 'NoSchedule' }] }];
    await this.core
      .patchNode({ name: node.metadata!.name!, body: patch }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch))
      .catch((err) => this.log.debug({ err: String(err), node: node.metadata?.name }, 'not-ready taint update conflicted; next event retries'));
  }

  private async syncReadyCondition(node: k8s.V1Node): Promise<void> {
    const wantReady = node.metadata?.annotations?.[FAULT.notReady] !== 'true';
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready && (ready.status === 'True') === wantReady) return;
    const now = new Date().toISOString();
    const condition = wantReady
      ? { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: now, lastTransitionTime: now }
      : { type: 'Ready', status: 'False', reason: 'KubeletNotReady', message: 'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized', lastHeartbeatTime: now, lastTransitionTime: now };
    await this.core
      .patchNodeStatus(
        { name: node.metadata!.name!, body: { status: { conditions: [condition] } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
      )
      .catch((err) => this.log.debug({ err: String(err), node: node.metadata?.name }, 'node status update failed'));
  }

  private async renewLeases(): Promise<void> {
    for (const node of this.nodes.values()) {
      if (this.stopped) return;
      await this.renewLease(node);
    }
  }

  private async renewLease(node: k8s.V1Node): Promise<void> {
    const name = node.metadata!.name!;
    const body: k8s.V1Lease = {
      metadata: {
        name,
        namespace: 'kube-node-lease',
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: node.metadata!.uid! }],
      },
      spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: new k8s.V1MicroTime() },
    };
    try {
      await this.coord.replaceNamespacedLease({ name, namespace: 'kube-node-lease', body });
    } catch (err) {
      if (statusCode(err) === 404) {
        await this.coord.createNamespacedLease({ namespace: 'kube-node-lease', body }).catch(() => undefined);
      }
    }
  }

  // ---- pods ----------------------------------------------------------------------------------

  private onPod(type: string, pod: k8s.V1Pod): void {
    const uid = pod.metadata?.uid;
    const nodeName = pod.spec?.nodeName;
    if (!uid || !nodeName || !this.nodes.has(nodeName)) {
      const run = uid ? this.pods.get(uid) : undefined;
      if (run) this.kill(run, 'pod left the node');
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
      if (run.killing) return;
      await this.kill(run, 'pod deleted', (pod.metadata?.deletionGracePeriodSeconds ?? 30) * 1000);
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
      containers: (pod.spec?.containers ?? []).map((c) => ({ name: c.name, restartCount: 0 })),
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
    if (neverStart || delayMs > 0) {
      for (const c of run.containers) c.waiting = { reason: 'ContainerCreating' };
      this.writeStatus(pod, run);
    }
    if (neverStart) {
      log.info('node never starts containers (fault): pod stays Pending');
      return;
    }
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    if (run.killing || this.stopped) return;

    run.startTime = new Date().toISOString();
    run.podIP = this.allocatePodIp();
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
    await Promise.all(
      (pod.spec?.containers ?? []).map((spec) => this.startContainer(pod, run, spec, run.containers.find((x) => x.name === spec.name)!, log)),
    );
    this.writeStatus(pod, run);
  }

  private async startContainer(pod: k8s.V1Pod, run: PodRun, spec: k8s.V1Container, c: ContainerRun, log: Logger): Promise<void> {
    // The termination-message file is "mounted" at terminationMessagePath like the volumes are.
    const terminationFile = join(run.dir, `${c.name}.termination-log`);
    writeFileSync(terminationFile, '');
    const mounts = [...run.mounts, { mountPath: spec.terminationMessagePath ?? '/dev/termination-log', hostPath: terminationFile }];
    let argv: string[];
    let env: Record<string, string>;
    try {
      env = await this.containerEnv(pod, run, spec, mounts);
      argv = this.commandFor(spec, env, mounts);
    } catch (err) {
      c.waiting = { reason: 'CreateContainerError', message: String(err) };
      log.warn({ container: c.name, err: String(err) }, 'container cannot start');
      return;
    }
    env.KNR_TERMINATION_LOG = terminationFile;
    const logFile = join(run.dir, `${c.name}.log`);
    const out = createWriteStream(logFile, { flags: 'a' });
    c.waiting = undefined;
    c.exitCode = undefined;
    c.finishedAt = undefined;
    c.startedAt = new Date().toISOString();
    const proc = spawn(argv[0]!, argv.slice(1), { env, cwd: run.dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    c.proc = proc;
    proc.stdout?.pipe(out, { end: false });
    proc.stderr?.pipe(out, { end: false });
    log.debug({ container: c.name, argv }, 'container started');
    proc.on('error', (err) => {
      c.exitCode = 128;
      c.reason = 'StartError';
      c.message = String(err);
    });
    proc.on('close', (code, signal) => {
      out.end();
      c.finishedAt = new Date().toISOString();
      c.exitCode = code ?? (signal ? 128 + (signal === 'SIGKILL' ? 9 : 15) : 1);
      c.reason = c.exitCode === 0 ? 'Completed' : 'Error';
      const forced = run.forcedMessage === 'garbage' ? garbage() : run.forcedMessage;
      c.message = forced ?? this.terminationMessage(spec, terminationFile, logFile, c.exitCode);
      log.debug({ container: c.name, exitCode: c.exitCode }, 'container exited');
      if (run.killing || this.stopped) return;
      const policy = pod.spec?.restartPolicy ?? 'Always';
      if (policy === 'Always' || (policy === 'OnFailure' && c.exitCode !== 0)) {
        c.restartCount++;
        const backoff = Math.min(10_000 * 2 ** Math.max(0, c.restartCount - 1), 300_000);
        c.waiting = { reason: 'CrashLoopBackOff', message: `back-off ${backoff / 1000}s restarting failed container=${c.name} pod=${run.name}` };
        this.writeStatus(pod, run);
        setTimeout(() => {
          if (!run.killing && !this.stopped) {
            void this.startContainer(pod, run, spec, c, log).then(() => this.writeStatus(pod, run));
          }
        }, backoff);
        return;
      }
      this.writeStatus(pod, run);
    });
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
  }

  // ---- what a container gets -----------------------------------------------------------------

  private resolvConf(pod: k8s.V1Pod, node: k8s.V1Node): string {
    const L = this.layout;
    const choice = node.metadata?.annotations?.[FAULT.dns] ?? 'ok';
    const server = { ok: L.clusterDnsIp, dead: L.deadDnsIp, blackhole: L.blackholeDnsIp, lying: L.lyingDnsIp }[choice] ?? choice;
    const ns = pod.metadata!.namespace!;
    const d = L.clusterDomain;
    return `search ${ns}.svc.${d} svc.${d} ${d}\nnameserver ${server}\noptions ndots:5\n`;
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
        return this.layout.advertiseAddress;
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
    for (const spec of pod.spec?.containers ?? []) {
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
      this.log.debug({ err: String(err), pod: run.name, retry }, 'pod status update failed; retrying');
      if (retry < 120) setTimeout(() => this.writeStatus(pod, run, retry + 1), 1000).unref();
    });
  }

  private async sendStatus(pod: k8s.V1Pod, run: PodRun, resend = false): Promise<void> {
    if (run.finishedElsewhere || (run.finished && !resend)) return;
    const policy = pod.spec?.restartPolicy ?? 'Always';
    const cs = run.containers;
    const allDone = cs.every((c) => c.exitCode !== undefined && !c.waiting);
    let phase: string;
    let reason: string | undefined;
    let message: string | undefined;
    if (run.deadlineExceeded) {
      phase = 'Failed';
      reason = 'DeadlineExceeded';
      message = `Pod was active on the node longer than the specified deadline`;
    } else if (!run.startTime || cs.some((c) => c.waiting?.reason === 'ContainerCreating')) phase = 'Pending';
    else if (policy !== 'Always' && allDone) phase = cs.every((c) => c.exitCode === 0) ? 'Succeeded' : 'Failed';
    else if (cs.some((c) => c.waiting && !c.startedAt)) phase = 'Pending';
    else phase = 'Running';
    if (phase === 'Succeeded' || phase === 'Failed') {
      run.finished = true;
      clearTimeout(run.deadlineTimer);
    }
    const running = phase === 'Running' && cs.every((c) => c.proc && c.exitCode === undefined);
    const now = new Date().toISOString();
    const containerStatuses = (pod.spec?.containers ?? []).map((spec) => {
      const c = cs.find((x) => x.name === spec.name)!;
      let state: k8s.V1ContainerState;
      if (c.waiting) state = { waiting: c.waiting };
      else if (c.exitCode !== undefined)
        state = { terminated: { exitCode: c.exitCode, reason: run.deadlineExceeded && c.exitCode !== 0 ? 'Error' : c.reason, message: c.message, startedAt: c.startedAt as unknown as Date, finishedAt: c.finishedAt as unknown as Date } };
      else if (c.startedAt) state = { running: { startedAt: c.startedAt as unknown as Date } };
      else state = { waiting: { reason: 'ContainerCreating' } };
      return {
        name: spec.name,
        image: spec.image ?? '',
        imageID: `sandbox://${spec.image}`,
        containerID: c.startedAt ? `sandbox://${run.uid}/${c.name}` : undefined,
        ready: state.running !== undefined,
        started: state.running !== undefined,
        restartCount: c.restartCount,
        state,
      };
    });
    const cond = (type: string, ok: boolean) => ({ type, status: ok ? 'True' : 'False', lastTransitionTime: now, lastProbeTime: null });
    const status: Record<string, unknown> = {
      phase,
      reason,
      message,
      hostIP: this.layout.advertiseAddress,
      hostIPs: [{ ip: this.layout.advertiseAddress }],
      conditions: [cond('PodReadyToStartContainers', !!run.startTime), cond('Initialized', true), cond('ContainersReady', running), cond('Ready', running)],
      containerStatuses,
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

import type { ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import type { k8s } from '../kube.js';

export type ProbeKind = 'liveness' | 'readiness' | 'startup';
export type ProbeResult = 'success' | 'failure';

/** One probe attempt: the result and, for a failure, what a kubelet puts in the Unhealthy Event. */
export interface ProbeOutcome {
  result: ProbeResult;
  output: string;
}

/** A probe's settings with the API server's defaults filled in. */
export interface ProbeTiming {
  initialDelaySeconds: number;
  periodSeconds: number;
  timeoutSeconds: number;
  successThreshold: number;
  failureThreshold: number;
}

export function probeTiming(p: k8s.V1Probe): ProbeTiming {
  return {
    initialDelaySeconds: p.initialDelaySeconds ?? 0,
    periodSeconds: Math.max(1, p.periodSeconds ?? 10),
    timeoutSeconds: Math.max(1, p.timeoutSeconds ?? 1),
    successThreshold: Math.max(1, p.successThreshold ?? 1),
    failureThreshold: Math.max(1, p.failureThreshold ?? 3),
  };
}

/** The state of one probe worker (k8s.io/kubernetes/pkg/kubelet/prober/worker.go). */
export interface ProbeState {
  /** The result the kubelet acts on: readiness starts failed, liveness succeeded, startup unknown. */
  result: ProbeResult | 'unknown';
  lastResult: ProbeResult | 'unknown';
  /** Consecutive attempts with lastResult. */
  run: number;
  /** A liveness or startup probe that failed stops probing: the container is being restarted. */
  onHold: boolean;
}

export function initialProbeState(kind: ProbeKind): ProbeState {
  return { result: kind === 'readiness' ? 'failure' : kind === 'liveness' ? 'success' : 'unknown', lastResult: 'unknown', run: 0, onHold: false };
}

/**
 * Folds one attempt into a worker's state, as a kubelet's probe worker does: the acted-on result
 * changes only after successThreshold consecutive successes or failureThreshold consecutive
 * failures. `changed` says whether the acted-on result changed (or a failure was confirmed again).
 */
export function observe(kind: ProbeKind, timing: ProbeTiming, state: ProbeState, attempt: ProbeResult): { state: ProbeState; changed: boolean } {
  const run = state.lastResult === attempt ? state.run + 1 : 1;
  const next: ProbeState = { ...state, lastResult: attempt, run };
  const below = attempt === 'failure' ? run < timing.failureThreshold : run < timing.successThreshold;
  if (below) return { state: next, changed: false };
  const changed = next.result !== attempt;
  next.result = attempt;
  if ((kind === 'liveness' || kind === 'startup') && attempt === 'failure') {
    next.onHold = true;
    next.run = 0;
    return { state: next, changed: true };
  }
  return { state: next, changed };
}

// ---- running one attempt ---------------------------------------------------------------------

/** Runs a command as the container would (its env, its network); resolves with its exit and output. */
export type ExecFn = (command: string[], timeoutMs: number) => Promise<{ exitCode: number | null; output: string; timedOut: boolean }>;

export interface ProbeTarget {
  /** Where httpGet and tcpSocket probes go when they name no host: the pod IP. */
  podIP: string;
  /** The container's ports, for probes that name a port. */
  ports: k8s.V1ContainerPort[];
  exec: ExecFn;
}

/** A kubelet reads at most this much of a probe's output. */
const MAX_OUTPUT = 10 * 1024;
const USER_AGENT = 'kube-probe/1.36';

export async function runProbe(probe: k8s.V1Probe, target: ProbeTarget, timeoutMs: number): Promise<ProbeOutcome> {
  try {
    if (probe.exec) return await execProbe(probe.exec.command ?? [], target.exec, timeoutMs);
    if (probe.httpGet) return await httpProbe(probe.httpGet, target, timeoutMs);
    if (probe.tcpSocket) return await tcpProbe(probe.tcpSocket.host || target.podIP, resolvePort(probe.tcpSocket.port, target.ports), timeoutMs);
    if (probe.grpc) return { result: 'failure', output: 'grpc probes are not run by the sandbox kubelet' };
    return { result: 'failure', output: 'missing probe handler' };
  } catch (err) {
    return { result: 'failure', output: (err as Error).message };
  }
}

/** A probe's port: a number, or the name of one of the container's ports. */
export function resolvePort(port: k8s.IntOrString | undefined, ports: k8s.V1ContainerPort[]): number {
  if (typeof port === 'number') return port;
  const named = ports.find((p) => p.name === port);
  if (named) return named.containerPort;
  if (typeof port === 'string' && /^\d+$/.test(port)) return Number(port);
  throw new Error(`couldn't find port: ${String(port)} in container ports [${ports.map((p) => p.name ?? p.containerPort).join(' ')}]`);
}

async function execProbe(command: string[], exec: ExecFn, timeoutMs: number): Promise<ProbeOutcome> {
  const r = await exec(command, timeoutMs);
  if (r.timedOut) return { result: 'failure', output: `command ${JSON.stringify(command.join(' '))} timed out` };
  return { result: r.exitCode === 0 ? 'success' : 'failure', output: r.output.slice(0, MAX_OUTPUT) };
}

function httpProbe(get: k8s.V1HTTPGetAction, target: ProbeTarget, timeoutMs: number): Promise<ProbeOutcome> {
  const https = get.scheme === 'HTTPS';
  const host = get.host || target.podIP;
  const port = resolvePort(get.port, target.ports);
  const path = get.path ? (get.path.startsWith('/') ? get.path : `/${get.path}`) : '/';
  const url = `${https ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}${path}`;
  const headers: Record<string, string> = { 'User-Agent': USER_AGENT, Accept: '*/*' };
  for (const h of get.httpHeaders ?? []) headers[h.name] = h.value;
  return new Promise((resolve) => {
    let settled = false;
    const done = (o: ProbeOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(o);
    };
    const req = (https ? httpsRequest : httpRequest)(url, { method: 'GET', headers, rejectUnauthorized: false, agent: false }, (res) => {
      const code = res.statusCode ?? 0;
      res.resume();
      if (code >= 200 && code < 400) done({ result: 'success', output: '' });
      else done({ result: 'failure', output: `HTTP probe failed with statuscode: ${code}` });
    });
    const timer = setTimeout(() => done({ result: 'failure', output: `Get "${url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)` }), timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => done({ result: 'failure', output: `Get "${url}": ${dialError(host, port, err)}` }));
    req.end();
  });
}

function tcpProbe(host: string, port: number, timeoutMs: number): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (o: ProbeOutcome) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => done({ result: 'failure', output: `dial tcp ${host}:${port}: i/o timeout` }), timeoutMs);
    socket.once('connect', () => done({ result: 'success', output: '' }));
    socket.once('error', (err: NodeJS.ErrnoException) => done({ result: 'failure', output: dialError(host, port, err) }));
  });
}

/** A socket error in Go's words, as the kubelet's Events show it. */
function dialError(host: string, port: number, err: NodeJS.ErrnoException): string {
  const what: Record<string, string> = { ECONNREFUSED: 'connect: connection refused', EHOSTUNREACH: 'connect: no route to host', ENETUNREACH: 'connect: network is unreachable', ECONNRESET: 'read: connection reset by peer' };
  return `dial tcp ${host}:${port}: ${what[err.code ?? ''] ?? err.message}`;
}

/** Runs an exec probe's process (made by `spawn`), kills its process group at the timeout, collects its output. */
export function runExecProcess(spawn: () => ChildProcess, timeoutMs: number): Promise<{ exitCode: number | null; output: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    let output = '';
    let timedOut = false;
    let proc: ChildProcess;
    try {
      proc = spawn();
    } catch (err) {
      resolve({ exitCode: 126, output: (err as Error).message, timedOut: false });
      return;
    }
    const collect = (d: Buffer) => {
      if (output.length < MAX_OUTPUT) output += d.toString('utf8');
    };
    proc.stdout?.on('data', collect);
    proc.stderr?.on('data', collect);
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        if (proc.pid) process.kill(-proc.pid, 'SIGKILL');
      } catch {
        proc.kill('SIGKILL');
      }
    }, timeoutMs);
    proc.once('error', (err) => {
      clearTimeout(timer);
      resolve({ exitCode: 126, output: err.message, timedOut: false });
    });
    proc.once('close', (code) => {
      clearTimeout(timer);
      resolve({ exitCode: code, output, timedOut });
    });
  });
}

// ---- the probes of one running container -------------------------------------------------------

export interface ProbeListener {
  /** The container's readiness changed (it starts not ready when it has a readiness probe). */
  onReady(ready: boolean): void;
  /** The startup probe succeeded: liveness and readiness probes start. */
  onStarted(): void;
  /** One failed attempt (a Warning Unhealthy Event: "<Kind> probe failed: <output>"). */
  onUnhealthy(kind: ProbeKind, output: string): void;
  /** A liveness or startup probe failed failureThreshold times in a row: restart the container. */
  onFailed(kind: 'liveness' | 'startup', output: string): void;
}

/**
 * The liveness, readiness and startup probes of one container run (a new run after a restart gets
 * new ones). Each probe is attempted initialDelaySeconds after the container started and then
 * every periodSeconds, an attempt at a time, with timeoutSeconds per attempt. Until a startup
 * probe succeeds, the liveness and readiness probes are not run and the container is neither
 * started nor ready. A container without a readiness probe is ready once started.
 */
export class ContainerProbes {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly onStartedHooks: Array<() => void> = [];
  private stopped = false;
  private startedFlag: boolean;
  private readyFlag: boolean;

  constructor(
    private readonly spec: k8s.V1Container,
    private readonly target: ProbeTarget,
    private readonly listener: ProbeListener,
    private readonly attempt: (probe: k8s.V1Probe, target: ProbeTarget, timeoutMs: number) => Promise<ProbeOutcome> = runProbe,
  ) {
    this.startedFlag = !spec.startupProbe;
    this.readyFlag = this.startedFlag && !spec.readinessProbe;
  }

  get started(): boolean {
    return this.startedFlag;
  }

  get ready(): boolean {
    return this.readyFlag;
  }

  /** Whether the container has any probe (a container without one needs no worker). */
  static needed(spec: k8s.V1Container): boolean {
    return Boolean(spec.startupProbe || spec.readinessProbe || spec.livenessProbe);
  }

  start(startedAtMs: number): void {
    const kinds: Array<[ProbeKind, k8s.V1Probe | undefined]> = [
      ['startup', this.spec.startupProbe],
      ['readiness', this.spec.readinessProbe],
      ['liveness', this.spec.livenessProbe],
    ];
    for (const [kind, probe] of kinds) if (probe) this.worker(kind, probe, startedAtMs);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private worker(kind: ProbeKind, probe: k8s.V1Probe, startedAtMs: number): void {
    const timing = probeTiming(probe);
    let state = initialProbeState(kind);
    let timer: NodeJS.Timeout | undefined;
    let running = false;
    const schedule = (when: number) => {
      if (timer) {
        clearTimeout(timer);
        this.timers.delete(timer);
      }
      const t = setTimeout(() => {
        this.timers.delete(t);
        timer = undefined;
        void tick();
      }, Math.max(0, when - Date.now()));
      timer = t;
      this.timers.add(t);
    };
    const tick = async () => {
      if (this.stopped || running) return;
      const next = Date.now() + timing.periodSeconds * 1000;
      // Liveness and readiness wait for the startup probe; the startup probe stops once it succeeded.
      const idle = kind === 'startup' ? this.startedFlag : !this.startedFlag;
      if (!idle && !state.onHold) {
        running = true;
        const outcome = await this.attempt(probe, this.target, timing.timeoutSeconds * 1000);
        running = false;
        if (this.stopped) return;
        if (outcome.result === 'failure') this.listener.onUnhealthy(kind, outcome.output);
        const r = observe(kind, timing, state, outcome.result);
        state = r.state;
        if (r.changed) this.apply(kind, state, outcome.output);
      }
      if (!this.stopped && !timer) schedule(next);
    };
    const firstAt = startedAtMs + timing.initialDelaySeconds * 1000;
    // A kubelet probes readiness at once when the container has just started (its manual trigger),
    // rather than waiting a whole period; never before initialDelaySeconds.
    if (kind === 'readiness') this.onStartedHooks.push(() => schedule(Math.max(firstAt, Date.now())));
    schedule(firstAt);
  }

  private apply(kind: ProbeKind, state: ProbeState, output: string): void {
    if (kind === 'readiness') {
      const ready = state.result === 'success' && this.startedFlag;
      if (ready !== this.readyFlag) {
        this.readyFlag = ready;
        this.listener.onReady(ready);
      }
      return;
    }
    if (state.result === 'failure') {
      this.listener.onFailed(kind, output);
      return;
    }
    if (kind === 'startup' && state.result === 'success' && !this.startedFlag) {
      this.startedFlag = true;
      if (!this.spec.readinessProbe) this.readyFlag = true;
      this.listener.onStarted();
      for (const hook of this.onStartedHooks) hook();
    }
  }
}

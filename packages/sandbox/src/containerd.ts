// A real container runtime for tests: containerd (Debian's package) and runc, with a root, state
// directory and socket of their own, driven through `ctr` as a user would. Everything it started
// (tasks, shims, the snapshotter's mounts) is gone after stop().
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cgroupHierarchyRoots, removeTree } from './runtime/cgroups.js';
import { join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** A bind mount into the container: `source` on the host, `destination` in the container. */
export interface Mount {
  source: string;
  destination: string;
  readOnly?: boolean;
}

/** Where a kubelet mounts a pod's service-account token, CA and namespace. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface PodFilesOptions {
  /** A service-account token (TokenRequest). */
  token: string;
  /** The cluster CA certificate (PEM). */
  caCert: string;
  namespace: string;
  clusterDomain: string;
  /** The cluster DNS address, the pod's nameserver. */
  nameserver: string;
  /** Files to mount read-only under /etc/kube-node-ready (name -> content). */
  config?: Record<string, string>;
}

export interface PodFiles {
  mounts: Mount[];
  /** The host side of /dev/termination-log. */
  terminationLog: string;
}

/**
 * The files a kubelet gives a pod's container, written under `dir`, with their mounts at the real
 * paths: the projected service-account volume, the pod's resolv.conf (cluster DNS, the namespace's
 * search path, ndots:5), an empty termination-message file and, optionally, configuration files.
 */
export function writePodFiles(dir: string, o: PodFilesOptions): PodFiles {
  mkdirSync(join(dir, 'sa'), { recursive: true });
  writeFileSync(join(dir, 'sa', 'token'), o.token);
  writeFileSync(join(dir, 'sa', 'ca.crt'), o.caCert);
  writeFileSync(join(dir, 'sa', 'namespace'), o.namespace);
  const d = o.clusterDomain;
  writeFileSync(join(dir, 'resolv.conf'), `search ${o.namespace}.svc.${d} svc.${d} ${d}\nnameserver ${o.nameserver}\noptions ndots:5\n`);
  // World-writable, as the kubelet makes it: the container's user is rarely the file's owner.
  writeFileSync(join(dir, 'termination-log'), '');
  chmodSync(join(dir, 'termination-log'), 0o666);
  const mounts: Mount[] = [
    { source: join(dir, 'sa'), destination: SERVICE_ACCOUNT_DIR, readOnly: true },
    { source: join(dir, 'resolv.conf'), destination: '/etc/resolv.conf', readOnly: true },
    { source: join(dir, 'termination-log'), destination: '/dev/termination-log' },
  ];
  if (o.config) {
    mkdirSync(join(dir, 'config'), { recursive: true });
    for (const [name, content] of Object.entries(o.config)) writeFileSync(join(dir, 'config', name), content);
    mounts.push({ source: join(dir, 'config'), destination: '/etc/kube-node-ready', readOnly: true });
  }
  return { mounts, terminationLog: join(dir, 'termination-log') };
}

export interface RunOptions {
  /** An image reference already pulled into this containerd. */
  image: string;
  /** The container's id, unique among the running ones. */
  id: string;
  /** The whole process command line (ctr does not prepend the image's entrypoint to it). */
  args: string[];
  env?: Record<string, string>;
  mounts?: Mount[];
  /** A network namespace to join (a path such as /run/netns/NAME); default: a new, empty one. */
  netns?: string;
  readOnlyRoot?: boolean;
  timeoutMs?: number;
}

export interface RunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export class Containerd {
  readonly socket: string;
  /** Its containers' namespace, also the parent of their cgroups: one per directory, so runtimes side by side never share one. */
  readonly namespace: string;
  private proc: ChildProcess | undefined;

  private constructor(readonly dir: string) {
    this.socket = join(dir, 'containerd.sock');
    this.namespace = `knr-${createHash('sha256').update(dir).digest('hex').slice(0, 10)}`;
  }

  /** Starts containerd in `dir` (created, emptied of an earlier run's state) and waits until it answers. */
  static async start(dir: string): Promise<Containerd> {
    for (const bin of ['containerd', 'ctr', 'runc', 'containerd-shim-runc-v2']) {
      if (!(await exec('which', [bin]).then(() => true, () => false))) throw new Error(`${bin} is not installed: apt-get install containerd runc (make system-deps does)`);
    }
    const c = new Containerd(dir);
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    // The CRI plugin is for a kubelet; ctr needs none of it.
    writeFileSync(join(dir, 'config.toml'), containerdConfig(dir, c.socket, ['disabled_plugins = ["io.containerd.grpc.v1.cri"]']));
    c.proc = spawn('containerd', ['--config', join(dir, 'config.toml')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    c.proc.stderr!.on('data', (b: Buffer) => {
      log = (log + b.toString()).slice(-20_000);
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (await c.ctr(['version']).then(() => true, () => false)) return c;
      if (c.proc.exitCode !== null || Date.now() > deadline) {
        c.proc.kill('SIGKILL');
        throw new Error(`containerd did not start in ${dir}: ${log.split('\n').slice(-10).join('\n')}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** `ctr` against this containerd, in its namespace. */
  async ctr(args: string[], timeoutMs = 120_000): Promise<{ stdout: string; stderr: string }> {
    return exec('ctr', ['--address', this.socket, '--namespace', this.namespace, ...args], { timeout: timeoutMs, maxBuffer: 64 << 20 });
  }

  /** Pulls `ref` over plain HTTP (a loopback registry) for one platform; returns the time it took. */
  async pull(ref: string, platform: string): Promise<number> {
    const started = Date.now();
    await this.ctr(['image', 'pull', '--plain-http', '--platform', platform, ref], 300_000);
    return Date.now() - started;
  }

  /** Runs a container to its end (removed afterwards) and returns its exit code and output. */
  async run(opts: RunOptions): Promise<RunResult> {
    const args = ['run', '--rm'];
    if (opts.readOnlyRoot) args.push('--read-only');
    if (opts.netns) args.push('--with-ns', `network:${opts.netns}`);
    for (const [k, v] of Object.entries(opts.env ?? {})) args.push('--env', `${k}=${v}`);
    for (const m of opts.mounts ?? []) args.push('--mount', `type=bind,src=${m.source},dst=${m.destination},options=rbind:${m.readOnly ? 'ro' : 'rw'}`);
    args.push(opts.image, opts.id, ...opts.args);
    try {
      const { stdout, stderr } = await this.ctr(args, opts.timeoutMs ?? 120_000);
      return { exitCode: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code?: unknown; stdout?: string; stderr?: string; killed?: boolean; message: string };
      if (typeof e.code !== 'number' || e.killed) throw new Error(`ctr ${args.join(' ')}: ${e.message}`, { cause: err });
      return { exitCode: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
    }
  }

  /**
   * Starts a container in the background; returns its host PID, its output so far, stop (kills
   * its task and removes it) and reap (removes a task that has exited, returning its exit code).
   */
  async start(opts: Omit<RunOptions, 'timeoutMs'>): Promise<{ pid: number; stop(): Promise<void>; logs(): string; reap(): Promise<number> }> {
    const args = ['run', '-d'];
    if (opts.readOnlyRoot) args.push('--read-only');
    if (opts.netns) args.push('--with-ns', `network:${opts.netns}`);
    for (const [k, v] of Object.entries(opts.env ?? {})) args.push('--env', `${k}=${v}`);
    for (const m of opts.mounts ?? []) args.push('--mount', `type=bind,src=${m.source},dst=${m.destination},options=rbind:${m.readOnly ? 'ro' : 'rw'}`);
    // ctr run -d leaves the output to the shim: send it to a file through `--log-uri`.
    const logFile = join(this.dir, `${opts.id}.log`);
    args.push('--log-uri', `file://${logFile}`);
    args.push(opts.image, opts.id, ...opts.args);
    await this.ctr(args);
    const { stdout } = await this.ctr(['task', 'ls']);
    const line = stdout.split('\n').find((l) => l.split(/\s+/)[0] === opts.id);
    const pid = Number(line?.split(/\s+/)[1]);
    if (!pid) throw new Error(`container ${opts.id} started but ctr task ls does not show its PID:\n${stdout}`);
    return {
      pid,
      logs: () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''),
      // A stopped task's exit code: `ctr task delete` exits with it.
      reap: async () => {
        const code = await this.ctr(['task', 'delete', opts.id]).then(
          () => 0,
          (err: { code?: unknown }) => (typeof err.code === 'number' ? err.code : -1),
        );
        await this.ctr(['container', 'delete', opts.id]).catch(() => undefined);
        return code;
      },
      stop: async () => {
        await this.ctr(['task', 'kill', '--signal', 'SIGKILL', opts.id]).catch(() => undefined);
        for (let i = 0; i < 50; i++) {
          if (await this.ctr(['task', 'delete', opts.id]).then(() => true, () => false)) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        await this.ctr(['container', 'delete', opts.id]).catch(() => undefined);
      },
    };
  }

  /** Kills every task, stops containerd and its shims, unmounts what its snapshotter mounted, removes its directory. */
  async stop(): Promise<void> {
    const tasks = await this.ctr(['task', 'ls', '-q']).then((r) => r.stdout.split('\n').filter(Boolean), () => []);
    for (const t of tasks) {
      await this.ctr(['task', 'kill', '--signal', 'SIGKILL', t]).catch(() => undefined);
      await this.ctr(['task', 'delete', '--force', t]).catch(() => undefined);
    }
    this.proc?.kill('SIGTERM');
    await new Promise<void>((resolve) => {
      if (!this.proc || this.proc.exitCode !== null) return resolve();
      const t = setTimeout(() => {
        this.proc?.kill('SIGKILL');
        resolve();
      }, 10_000);
      this.proc.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
    });
    // A shim outlives containerd by design; ours serve only this directory's containers.
    await exec('pkill', ['-KILL', '-f', `containerd-shim-runc-v2 -namespace ${this.namespace} .*-address ${this.socket}`]).catch(() => undefined);
    await unmountUnder(this.dir);
    // runc removes each container's cgroups; the namespace's parent group is containerd's to leave.
    for (const group of cgroupDirs(this.namespace)) await removeTree(group).catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
    const left = [
      ...mountsUnder(this.dir).map((m) => `mount ${m}`),
      ...cgroupDirs(this.namespace).map((g) => `cgroup ${g}`),
      ...(await exec('pgrep', ['-f', `containerd-shim-runc-v2 -namespace ${this.namespace} .*-address ${this.socket}`]).then((r) => r.stdout.split('\n').filter(Boolean).map((p) => `shim process ${p}`), () => [])),
    ];
    if (left.length) throw new Error(`containerd in ${this.dir} left behind: ${left.join(', ')}`);
  }
}

/** The namespace's cgroup directory in every hierarchy where it exists. */
function cgroupDirs(namespace: string): string[] {
  return cgroupHierarchyRoots()
    .map((h) => join(h, namespace))
    .filter((d) => existsSync(d));
}

/**
 * containerd's configuration (version 2) with its root, state directory, sockets and opt directory
 * under `dir`, and `extra` lines after them (plugins, their settings).
 */
export function containerdConfig(dir: string, socket: string, extra: string[]): string {
  return [
    'version = 2',
    `root = "${dir}/root"`,
    `state = "${dir}/state"`,
    '[grpc]',
    `  address = "${socket}"`,
    '[ttrpc]',
    `  address = "${socket}.ttrpc"`,
    '[plugins."io.containerd.internal.v1.opt"]',
    `  path = "${dir}/opt"`,
    ...extra,
    '',
  ].join('\n');
}

/** Mount points under `dir`, deepest first. */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((m): m is string => !!m && (m === dir || m.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
}

/** Unmounts (lazily) everything mounted under `dir`, deepest first. */
export async function unmountUnder(dir: string): Promise<void> {
  for (const m of mountsUnder(dir)) await exec('umount', ['-l', m]).catch(() => undefined);
}

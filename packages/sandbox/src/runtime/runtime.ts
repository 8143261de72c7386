import { accessSync, constants, mkdirSync, writeFileSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import type { SandboxLayout } from '../layout.js';
import { sleep } from '../proc.js';
import { Cgroups, containerLimits, type ContainerCgroup } from './cgroups.js';
import { PodNetwork, removePodNetworks, type DnsPathFault, type PodNetns } from './pod-network.js';

/** What the runtime holds for one pod: its network and the cgroups of its containers. */
export interface PodSandbox {
  uid: string;
  podIP: string;
  /** Undefined for hostNetwork pods, which run in the sandbox namespace. */
  netns?: PodNetns;
  /** Container cgroups being removed; the pod's own cgroup goes after them. */
  removals: Set<Promise<void>>;
  released: boolean;
}

/** How to start one run of a container, and what to do once it has exited. */
export interface PreparedContainer {
  argv: string[];
  /** Call once the process has exited: reads whether the kernel OOM-killed it and removes its cgroup. Idempotent. */
  exited(): { oomKilled: boolean };
}

export interface RuntimeStats {
  podNetworks: number;
  setupMsMean: number;
  setupMsMax: number;
  cgroups: string;
}

/**
 * Joins the container's cgroup(s), then runs the command: `sh -c SCRIPT knr-container
 * <cgroup.procs files> -- <argv>`. The shell writes its own pid before exec, so the command and
 * everything it forks are limited from their first instruction.
 */
const JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

/**
 * In a mount namespace of the container's own (`unshare --mount`), shows the pod's network devices
 * under /sys (/sys/class/net and /sys/devices/virtual/net from a sysfs mounted inside the pod's network
 * namespace), as a container sees them: the MTU of its eth0, not the machine's interfaces. The rest
 * of /sys, /sys/fs/cgroup included, stays as it is. Then joins the cgroups and runs the command.
 * `$1` is the fstab of those three mounts (containerSysfsTable): one `mount` process for all of
 * them, as container starts in a burst compete for two cores. That sysfs stays mounted where the
 * table mounts it, seen only in the container's mount namespace: it is the pod's own, as a real
 * container's /sys is.
 */
const POD_SYSFS = 'mount -a -T "$1"; shift; ' + JOIN_CGROUPS;

/** The fstab POD_SYSFS mounts from, with the directory the pod's sysfs is mounted on (`sys` beside it). */
function containerSysfsTable(layout: SandboxLayout): string {
  const dir = join(layout.dir, 'container-sysfs');
  const sys = join(dir, 'sys');
  mkdirSync(sys, { recursive: true });
  const field = (path: string) => path.replace(/[\s\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
  const table = [
    `sysfs ${field(sys)} sysfs defaults 0 0`,
    `${field(join(sys, 'class/net'))} /sys/class/net none bind 0 0`,
    `${field(join(sys, 'devices/virtual/net'))} /sys/devices/virtual/net none bind 0 0`,
  ];
  const file = join(dir, 'fstab');
  writeFileSync(file, table.join('\n') + '\n');
  return file;
}

/**
 * The simulated kubelet's container runtime: a network namespace per pod (PodNetwork) and a
 * cgroup per container run with the container's limits (Cgroups). The kubelet creates a sandbox
 * when a pod starts, asks for the argv of each container run, reports OOM kills from `exited()`
 * and removes the sandbox when the pod is killed, finished or forgotten.
 */
export class ContainerRuntime {
  private readonly network: PodNetwork;
  private readonly unshare: string;
  private readonly cgroups: Cgroups;
  /** The fstab of the pod's sysfs mounts (POD_SYSFS). */
  private readonly sysfsTable: string;
  private readonly sandboxes = new Set<PodSandbox>();
  private setups = { count: 0, totalMs: 0, maxMs: 0 };

  constructor(
    private readonly layout: SandboxLayout,
    private readonly log: Logger,
  ) {
    this.network = new PodNetwork(layout, findExecutable('nsenter', process.env.PATH ?? '/usr/bin:/bin', '/'));
    this.unshare = findExecutable('unshare', process.env.PATH ?? '/usr/bin:/bin', '/') ?? 'unshare';
    this.cgroups = Cgroups.detect(layout, log);
    this.sysfsTable = containerSysfsTable(layout);
  }

  /**
   * Creates the pod's network: a namespace with `podIP` unless `hostNetwork` (then `podIP` is the
   * node's address and the pod runs in the sandbox namespace). `mtu` sets the pod interfaces' MTU;
   * `nodeIP` is the address the node's own traffic to the pod comes from; `dnsFault` breaks the
   * pod's path to the cluster DNS address.
   */
  async createPodSandbox(uid: string, opts: { podIP: string; hostNetwork: boolean; mtu?: number; nodeIP?: string; dnsFault?: DnsPathFault }): Promise<PodSandbox> {
    const sb: PodSandbox = { uid, podIP: opts.podIP, removals: new Set(), released: false };
    this.sandboxes.add(sb);
    if (opts.hostNetwork) return sb;
    const started = performance.now();
    for (let attempt = 1; ; attempt++) {
      try {
        sb.netns = await this.network.create(opts.podIP, { mtu: opts.mtu, nodeIP: opts.nodeIP, dnsFault: opts.dnsFault });
        break;
      } catch (err) {
        if (attempt >= 3) {
          this.sandboxes.delete(sb);
          throw err;
        }
        this.log.warn({ err: String(err), attempt }, 'pod network set-up failed; retrying');
        await sleep(500 * attempt);
      }
    }
    const ms = performance.now() - started;
    this.setups = { count: this.setups.count + 1, totalMs: this.setups.totalMs + ms, maxMs: Math.max(this.setups.maxMs, ms) };
    this.log.debug({ uid, netns: sb.netns.name, ip: opts.podIP, ms: Math.round(ms * 10) / 10 }, 'pod network ready');
    return sb;
  }

  /**
   * The argv to spawn for one run of a container (in the pod's namespace and its own cgroup with
   * the limits of `resources`). A command that cannot be found is returned unwrapped, so spawning
   * it fails as a missing command does (a StartError), not as a wrapper's exit code.
   */
  prepareContainer(sb: PodSandbox, name: string, resources: { limits?: Record<string, string> } | undefined, argv: string[], env: { PATH?: string; cwd: string }): PreparedContainer {
    if (sb.released) throw new Error(`the sandbox of pod ${sb.uid} is gone`);
    if (!findExecutable(argv[0] ?? '', env.PATH ?? '', env.cwd)) return { argv, exited: () => ({ oomKilled: false }) };
    const cg = this.cgroups.create(sb.uid, name, containerLimits(resources?.limits));
    let full = argv;
    if (sb.netns) full = this.network.execArgv(sb.netns, [this.unshare, '--mount', '--propagation', 'private', '/bin/sh', '-c', POD_SYSFS, 'knr-container', this.sysfsTable, ...(cg?.procsFiles ?? []), '--', ...full]);
    else if (cg) full = ['/bin/sh', '-c', JOIN_CGROUPS, 'knr-container', ...cg.procsFiles, '--', ...full];
    let result: { oomKilled: boolean } | undefined;
    return {
      argv: full,
      exited: () => {
        if (result) return result;
        result = { oomKilled: !!cg && cg.oomKills() > 0 };
        if (cg) this.track(sb, cg);
        return result;
      },
    };
  }

  /** argv that runs a command in the pod's network namespace (exec probes). */
  execArgv(sb: PodSandbox, argv: string[]): string[] {
    return sb.netns ? this.network.execArgv(sb.netns, argv) : argv;
  }

  /** Removes the pod's namespace (with its veth pair and route) and cgroups. Idempotent. */
  async removePodSandbox(sb: PodSandbox | undefined): Promise<void> {
    if (!sb || sb.released) return;
    sb.released = true;
    try {
      await Promise.allSettled([...sb.removals]);
      await Promise.all([sb.netns ? this.network.remove(sb.netns) : undefined, this.cgroups.removePod(sb.uid)]);
    } catch (err) {
      this.log.warn({ err: String(err), uid: sb.uid }, 'pod sandbox clean-up failed');
    } finally {
      this.sandboxes.delete(sb);
    }
  }

  /** Removes every pod sandbox and the sandbox's cgroups (the kubelet has stopped every container). */
  async stop(): Promise<void> {
    await Promise.all([...this.sandboxes].map((sb) => this.removePodSandbox(sb)));
    await this.cgroups.removeAll().catch((err) => this.log.warn({ err: String(err) }, 'cgroup clean-up failed'));
    await removePodNetworks(this.layout.slot);
  }

  stats(): RuntimeStats {
    const { count, totalMs, maxMs } = this.setups;
    return { podNetworks: count, setupMsMean: count ? Math.round((totalMs / count) * 10) / 10 : 0, setupMsMax: Math.round(maxMs * 10) / 10, cgroups: this.cgroups.summary };
  }

  private track(sb: PodSandbox, cg: ContainerCgroup): void {
    const p = cg
      .remove()
      .catch((err) => this.log.warn({ err: String(err), uid: sb.uid }, 'container cgroup clean-up failed'))
      .finally(() => sb.removals.delete(p));
    sb.removals.add(p);
  }
}

/** The path `cmd` would be executed from (PATH lookup as execvp does), or undefined. */
function findExecutable(cmd: string, path: string, cwd: string): string | undefined {
  if (!cmd) return undefined;
  const candidates = cmd.includes('/') ? [isAbsolute(cmd) ? cmd : join(cwd, cmd)] : path.split(delimiter).filter(Boolean).map((d) => join(d, cmd));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      /* next */
    }
  }
  return undefined;
}

import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, type Dirent } from 'node:fs';
import { readdir, rmdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Logger } from '@kube-node-ready/core';
import type { SandboxLayout } from '../layout.js';
import { sleep } from '../proc.js';

/** A container's limits in the units the kernel takes. */
export interface ContainerLimits {
  memoryBytes?: number;
  cpuMillis?: number;
}

/** `resources.limits` of a container spec as kernel units (requests do not limit anything). */
export function containerLimits(limits: Record<string, string> | undefined): ContainerLimits {
  const out: ContainerLimits = {};
  if (limits?.memory !== undefined) out.memoryBytes = Math.ceil(parseQuantity(limits.memory));
  if (limits?.cpu !== undefined) out.cpuMillis = Math.ceil(parseQuantity(limits.cpu) * 1000);
  return out;
}

const SUFFIX: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity ("128Mi", "1.5G", "500m", "1e9") as a number. */
export function parseQuantity(q: string): number {
  const m = /^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?\s*$/.exec(q);
  if (!m) throw new Error(`invalid quantity "${q}"`);
  return Number(m[1]) * SUFFIX[m[2] ?? '']!;
}

type Mode =
  | { version: 1; memory?: string; cpu?: string }
  | { version: 2; base: string; cpu: boolean };

/** The file that records where a sandbox's cgroups are, so a later stop can remove them. */
const RECORD = 'cgroups.json';

const CFS_PERIOD_US = 100_000;

/**
 * The container cgroups of one sandbox. cgroup v1 (a `memory` hierarchy is mounted, as on this
 * machine): `<memory mount><the daemon's own cgroup>/knr-sandbox-<slot>/pod<uid>/<container>-<n>`,
 * likewise for `cpu`, so pods stay inside whatever cgroup the sandbox was started in. cgroup v2
 * (unified, memory controller available): `<cgroup2 mount>/knr-sandbox-<slot>/...`, the root's
 * child, since a cgroup that holds processes (the daemon's own) cannot delegate controllers.
 * Without root or with a read-only hierarchy containers run unlimited (logged once).
 */
export class Cgroups {
  private seq = 0;

  private constructor(
    private readonly mode: Mode | undefined,
    /** One line for logs and docs: which hierarchy, or why none. */
    readonly summary: string,
  ) {}

  static detect(layout: SandboxLayout, log: Logger): Cgroups {
    const name = `knr-sandbox-${layout.slot}`;
    let mode: Mode;
    try {
      const found = findHierarchies();
      if (typeof process.getuid === 'function' && process.getuid() !== 0) throw new Error('not running as root');
      if (found.v1Memory) {
        mode = { version: 1, memory: join(found.v1Memory, name), cpu: found.v1Cpu ? join(found.v1Cpu, name) : undefined };
        for (const dir of [mode.memory, mode.cpu]) if (dir) mkdirSync(dir, { recursive: true });
      } else if (found.v2Root) {
        const controllers = readFileSync(join(found.v2Root, 'cgroup.controllers'), 'utf8').split(/\s+/);
        const cpu = controllers.includes('cpu');
        enableControllers(found.v2Root, cpu);
        mode = { version: 2, base: join(found.v2Root, name), cpu };
        mkdirSync(mode.base, { recursive: true });
        enableControllers(mode.base, cpu);
      } else {
        throw new Error('no cgroup hierarchy with the memory controller is mounted');
      }
    } catch (err) {
      const summary = `cgroups unavailable (${(err as Error).message}): containers run without memory or CPU limits`;
      log.warn(summary);
      return new Cgroups(undefined, summary);
    }
    const roots = mode.version === 1 ? [mode.memory, mode.cpu].filter((d): d is string => !!d) : [mode.base];
    writeFileSync(join(layout.dir, RECORD), JSON.stringify({ roots }));
    const summary = `cgroup v${mode.version}: ${roots.join(', ')}`;
    log.info(summary);
    return new Cgroups(mode, summary);
  }

  get enabled(): boolean {
    return this.mode !== undefined;
  }

  /**
   * Creates the cgroup(s) of one container run with its limits. Undefined when cgroups are
   * unavailable or the container has no limit (it then runs in the daemon's cgroup, unlimited).
   */
  create(podUid: string, container: string, limits: ContainerLimits): ContainerCgroup | undefined {
    const mode = this.mode;
    if (!mode || (limits.memoryBytes === undefined && limits.cpuMillis === undefined)) return undefined;
    const leaf = join(`pod${podUid}`, `${container}-${++this.seq}`);
    const quota = limits.cpuMillis !== undefined ? Math.max(1000, Math.round((limits.cpuMillis * CFS_PERIOD_US) / 1000)) : undefined;
    if (mode.version === 1) {
      const dirs: string[] = [];
      let oomFile: string | undefined;
      if (limits.memoryBytes !== undefined && mode.memory) {
        const dir = join(mode.memory, leaf);
        mkdirSync(dir, { recursive: true });
        dirs.push(dir);
        writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limits.memoryBytes));
        // With swap, memory+swap gets the same limit, so the container cannot swap its way past it.
        tryWrite(join(dir, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
        oomFile = join(dir, 'memory.oom_control');
      }
      if (quota !== undefined && mode.cpu) {
        const dir = join(mode.cpu, leaf);
        mkdirSync(dir, { recursive: true });
        dirs.push(dir);
        writeFileSync(join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
        writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(quota));
      }
      return dirs.length ? new ContainerCgroup(dirs, oomFile) : undefined;
    }
    const podDir = join(mode.base, `pod${podUid}`);
    if (!existsSync(podDir)) {
      mkdirSync(podDir, { recursive: true });
      enableControllers(podDir, mode.cpu);
    }
    const dir = join(mode.base, leaf);
    mkdirSync(dir);
    if (limits.memoryBytes !== undefined) {
      writeFileSync(join(dir, 'memory.max'), String(limits.memoryBytes));
      tryWrite(join(dir, 'memory.swap.max'), '0');
      // As the kubelet on cgroup v2: an OOM kill takes every process of the container.
      tryWrite(join(dir, 'memory.oom.group'), '1');
    }
    if (quota !== undefined && mode.cpu) writeFileSync(join(dir, 'cpu.max'), `${quota} ${CFS_PERIOD_US}`);
    return new ContainerCgroup([dir], join(dir, 'memory.events'));
  }

  /** Removes the pod's cgroups (killing what is still in them). */
  async removePod(podUid: string): Promise<void> {
    await Promise.all(this.roots().map((root) => removeTree(join(root, `pod${podUid}`))));
  }

  /** Removes every cgroup of the sandbox. */
  async removeAll(): Promise<void> {
    await Promise.all(this.roots().map((root) => removeTree(root)));
  }

  private roots(): string[] {
    const mode = this.mode;
    if (!mode) return [];
    return mode.version === 1 ? [mode.memory, mode.cpu].filter((d): d is string => !!d) : [mode.base];
  }
}

/** The cgroup(s) one run of a container is placed in. */
export class ContainerCgroup {
  constructor(
    readonly dirs: string[],
    /** memory.oom_control (v1) or memory.events (v2); undefined without a memory limit. */
    private readonly oomFile: string | undefined,
  ) {}

  /** The files a process writes its pid to, to join the cgroup(s). */
  get procsFiles(): string[] {
    return this.dirs.map((d) => join(d, 'cgroup.procs'));
  }

  /** How many processes of the container the kernel's OOM killer has killed. */
  oomKills(): number {
    if (!this.oomFile) return 0;
    try {
      const m = /^oom_kill (\d+)$/m.exec(readFileSync(this.oomFile, 'utf8'));
      return m ? Number(m[1]) : 0;
    } catch {
      return 0;
    }
  }

  /** Kills what is left in the cgroup(s) and removes them. */
  async remove(): Promise<void> {
    await Promise.all(this.dirs.map((d) => removeTree(d)));
  }
}

/** Removes the cgroups a sandbox recorded (after a crash of its daemon, or before a new start). */
export async function removeRecordedCgroups(dir: string): Promise<void> {
  const file = join(dir, RECORD);
  let roots: string[];
  try {
    roots = (JSON.parse(readFileSync(file, 'utf8')) as { roots: string[] }).roots;
  } catch {
    return;
  }
  await Promise.all(roots.map((root) => removeTree(root)));
  rmSync(file, { force: true });
}

interface Hierarchies {
  v1Memory?: string;
  v1Cpu?: string;
  v2Root?: string;
}

/**
 * Where this process's own memory/cpu cgroups are (v1), or the cgroup2 mount when the memory
 * controller is on the unified hierarchy. From /proc/self/mountinfo and /proc/self/cgroup.
 */
function findHierarchies(): Hierarchies {
  const own = new Map<string, string>();
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (m) for (const c of m[1]!.split(',')) own.set(c, m[2]!);
  }
  const out: Hierarchies = {};
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    const sep = fields.indexOf('-');
    if (sep < 0) continue;
    const [root, mountPoint] = [unescapeMount(fields[3]!), unescapeMount(fields[4]!)];
    const fstype = fields[sep + 1];
    const superOptions = (fields[sep + 3] ?? '').split(',');
    const ownDir = (controller: string) => {
      const path = own.get(controller) ?? '/';
      return join(mountPoint, relative(root, path).startsWith('..') ? '' : relative(root, path));
    };
    if (fstype === 'cgroup' && superOptions.includes('memory')) out.v1Memory = ownDir('memory');
    if (fstype === 'cgroup' && superOptions.includes('cpu')) out.v1Cpu = ownDir('cpu');
    if (fstype === 'cgroup2' && !out.v2Root) {
      try {
        if (readFileSync(join(mountPoint, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('memory')) out.v2Root = mountPoint;
      } catch {
        /* not readable: not usable */
      }
    }
  }
  return out;
}

function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
}

function enableControllers(dir: string, cpu: boolean): void {
  const enabled = readFileSync(join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
  const want = ['memory', ...(cpu ? ['cpu'] : [])].filter((c) => !enabled.includes(c));
  if (want.length) writeFileSync(join(dir, 'cgroup.subtree_control'), want.map((c) => `+${c}`).join(' '));
}

function tryWrite(file: string, value: string): void {
  try {
    writeFileSync(file, value);
  } catch {
    /* the kernel lacks this knob (no swap accounting, older kernel): the main limit still holds */
  }
}

/** Every cgroup hierarchy's root: the unified one on cgroup v2, each mounted v1 hierarchy otherwise. */
export function cgroupHierarchyRoots(): string[] {
  const root = '/sys/fs/cgroup';
  if (existsSync(join(root, 'cgroup.controllers'))) return [root];
  return readdirSync(root)
    .map((h) => join(root, h))
    .filter((h) => existsSync(join(h, 'cgroup.procs')));
}

/** Removes a cgroup and its children, depth first; SIGKILLs processes still in them. */
export async function removeTree(dir: string): Promise<void> {
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return; // already gone
  }
  await Promise.all(entries.filter((e) => e.isDirectory()).map((e) => removeTree(join(dir, e.name))));
  for (let attempt = 0; ; attempt++) {
    killTasks(dir);
    try {
      await rmdir(dir);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      // EBUSY while a killed process has not finished exiting.
      if (attempt >= 50) throw new Error(`cannot remove cgroup ${dir}: ${code}`, { cause: err });
      await sleep(20 + attempt * 10);
    }
  }
}

function killTasks(dir: string): void {
  let pids: string[];
  try {
    pids = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
  } catch {
    return;
  }
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

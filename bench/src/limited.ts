// The controller as the Helm chart runs it, as far as memory goes: the chart's NODE_OPTIONS
// (BenchEnv.controller: its NODE_OPTIONS and environment) and its `controller.resources.limits.memory`
// (BenchEnv.controllerMemoryLimit), enforced by a memory
// cgroup of its own, made as the simulated kubelet makes a container's; restarted when it exits, as
// restartPolicy: Always would (without the back-off), every restart and OOM kill counted.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { silentLogger } from '@kube-node-ready/core';
import { Cgroups, parseQuantity, sandboxLayout, type ContainerCgroup } from '@kube-node-ready/sandbox';
import type { BenchEnv } from './burst.js';
import type { ControllerProcess } from './controller.js';
import { sampleProcess } from './proc.js';

export interface MemoryLimit {
  /** As the chart's values.yaml has it ("256Mi"). */
  memory: string;
  MiB: number;
  /** False where no memory cgroup could be made (not root, no hierarchy): the figures then say what the limit would have met. */
  enforced: boolean;
  /** Which cgroup hierarchy, or why none. */
  cgroups: string;
}

/** `controller.resources.limits.memory` of the chart's values.yaml. */
export function chartMemoryLimit(root: string): string {
  const file = join(root, 'deploy', 'helm', 'kube-node-ready', 'values.yaml');
  const values = parse(readFileSync(file, 'utf8')) as { controller?: { resources?: { limits?: { memory?: string } } } };
  const memory = values.controller?.resources?.limits?.memory;
  if (!memory) throw new Error(`no controller.resources.limits.memory in ${file}`);
  return memory;
}

const MAX_RESTARTS = 10;

export class LimitedController {
  readonly limit: MemoryLimit;
  private readonly cgroup: ContainerCgroup | undefined;
  private proc: ControllerProcess;
  private stopped = false;
  /** Exits the bench did not ask for, each followed by a restart. */
  restarts = 0;
  /** Every process the scenario ran, in order (the current one last). */
  readonly processes: ControllerProcess[] = [];

  constructor(
    env: BenchEnv,
    /** Starts one controller process that joins the cgroup.procs files given. */
    private readonly start: (procsFiles: readonly string[], run: number) => ControllerProcess,
  ) {
    const memory = env.controllerMemoryLimit;
    const cgroups = Cgroups.detect(sandboxLayout(env.sandboxDir, env.slot), silentLogger());
    this.cgroup = cgroups.create('bench-controller', 'controller', { memoryBytes: parseQuantity(memory) });
    this.limit = { memory, MiB: parseQuantity(memory) / 2 ** 20, enforced: this.cgroup !== undefined, cgroups: cgroups.summary };
    this.proc = this.spawn();
  }

  get current(): ControllerProcess {
    return this.proc;
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** Memory charged to the cgroup now (MiB): what the kernel holds against the limit (RSS plus the page cache it charged). */
  chargedMiB(): number | undefined {
    const dir = this.cgroup?.dirs[0];
    if (!dir) return undefined;
    for (const file of ['memory.current', 'memory.usage_in_bytes']) {
      try {
        return Number(readFileSync(join(dir, file), 'utf8')) / 2 ** 20;
      } catch {
        // the other cgroup version's file
      }
    }
    return undefined;
  }

  /** Processes the kernel killed for going over the limit. */
  oomKills(): number {
    return this.cgroup?.oomKills() ?? 0;
  }

  /** Resolves once the current process (or the one that replaces it after an exit) logs `text`. */
  async waitForLog(text: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const proc = this.proc;
      if (proc.exited) {
        if (Date.now() >= deadline) {
          throw new Error(
            `the controller exited ${this.restarts} times (${this.oomKills()} OOM kills under its ${this.limit.memory} limit) and did not log "${text}" within ${timeoutMs / 1000}s; the last one's output:\n${proc.recentOutput.slice(-3000) || '(none)'}`,
          );
        }
        await new Promise((r) => setTimeout(r, 200)); // its successor starts a second after the exit
        continue;
      }
      try {
        return await proc.waitForLog(text, Math.max(1, deadline - Date.now()));
      } catch (err) {
        if (!proc.exited || Date.now() >= deadline) throw err;
        // It exited before logging it: wait for its successor to.
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.proc.stop();
    await this.cgroup?.remove();
  }

  private spawn(): ControllerProcess {
    const proc = this.start(this.cgroup?.procsFiles ?? [], this.processes.length);
    this.processes.push(proc);
    proc.child.once('exit', () => {
      if (this.stopped) return;
      this.restarts++;
      // A second later, as a kubelet's first restart; a crash loop stops at MAX_RESTARTS (the
      // scenario then times out waiting, with this process's output in its error).
      if (this.restarts <= MAX_RESTARTS) setTimeout(() => this.stopped || (this.proc = this.spawn()), 1000);
    });
    return proc;
  }
}

/**
 * The highest RSS of the controller's process (it changes pid when it restarts) and the highest
 * memory charged to its cgroup, sampled every `everyMs` between reset() and peak(). /proc's VmHWM of
 * a process the OOM killer took cannot be read any more, so sampling is the one measure that spans
 * restarts.
 */
export class PeakSampler {
  private max = { rssMiB: 0, anonMiB: 0, chargedMiB: 0 };
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly controller: LimitedController,
    everyMs = 100,
  ) {
    this.timer = setInterval(() => this.take(), everyMs);
  }

  reset(): void {
    this.max = { rssMiB: 0, anonMiB: 0, chargedMiB: 0 };
    this.take();
  }

  /** MiB; chargedMiB 0 without a cgroup. */
  peak(): { rssMiB: number; anonMiB: number; chargedMiB: number } {
    this.take();
    return { ...this.max };
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private take(): void {
    const s = sampleProcess(this.controller.pid);
    if (s) {
      this.max.rssMiB = Math.max(this.max.rssMiB, s.rssMiB);
      this.max.anonMiB = Math.max(this.max.anonMiB, s.anonMiB);
    }
    this.max.chargedMiB = Math.max(this.max.chargedMiB, this.controller.chargedMiB() ?? 0);
  }
}

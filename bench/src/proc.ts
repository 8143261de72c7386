// Resource figures of one process from /proc: CPU seconds (utime + stime) and resident memory
// (VmRSS and its anonymous part RssAnon now, VmHWM = peak RSS since the process started).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticks: number | undefined;
function clockTicks(): number {
  if (ticks === undefined) {
    try {
      ticks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    } catch {
      ticks = 100;
    }
  }
  return ticks;
}

export interface ProcSample {
  t: number;
  cpuSeconds: number;
  rssMiB: number;
  /**
   * The anonymous part of RSS (RssAnon): the heap, malloc's arenas, stacks. The rest is mostly the
   * node binary's code, clean file pages the kernel drops before it kills anybody.
   */
  anonMiB: number;
  hwmMiB: number;
}

export function sampleProcess(pid: number): ProcSample | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / clockTicks();
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    return { t: Date.now(), cpuSeconds, rssMiB: kib('VmRSS') / 1024, anonMiB: kib('RssAnon') / 1024, hwmMiB: kib('VmHWM') / 1024 };
  } catch {
    return undefined;
  }
}

/** Samples a process every `everyMs` until stopped; keeps every sample. */
export class ProcessSampler {
  readonly samples: ProcSample[] = [];
  private timer: NodeJS.Timeout;

  constructor(
    readonly pid: number,
    everyMs = 250,
  ) {
    this.take();
    this.timer = setInterval(() => this.take(), everyMs);
  }

  take(): ProcSample | undefined {
    const s = sampleProcess(this.pid);
    if (s) this.samples.push(s);
    return s;
  }

  stop(): ProcSample | undefined {
    clearInterval(this.timer);
    return this.take();
  }
}

/** Machine-wide CPU: busy and total jiffies from /proc/stat, to report how loaded the machine was. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

export function busyFraction(a: { busy: number; total: number }, b: { busy: number; total: number }): number {
  return b.total > a.total ? (b.busy - a.busy) / (b.total - a.total) : 0;
}

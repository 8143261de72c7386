import { run } from '../proc.js';

interface Job {
  lines: string[];
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Runs `ip` commands in batches (`ip -force -b -`), one process per batch, by group commit: the
 * first request starts a process at once; requests that arrive while it runs are queued and go
 * together in the next one. A pod burst thus costs a few processes instead of one per pod, and a
 * lone request waits for nothing. Each request gets back only the errors of its own lines.
 */
export class IpBatcher {
  private queue: Job[] = [];
  private running = false;

  /** `globalArgs` go before `-b` (e.g. `['-n', 'ns']`). */
  constructor(
    private readonly globalArgs: string[] = [],
    private readonly maxLinesPerBatch = 2000,
  ) {}

  run(lines: string[]): Promise<void> {
    if (!lines.length) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.queue.push({ lines, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length) {
        const jobs: Job[] = [];
        let n = 0;
        while (this.queue.length && (jobs.length === 0 || n + this.queue[0]!.lines.length <= this.maxLinesPerBatch)) {
          const job = this.queue.shift()!;
          jobs.push(job);
          n += job.lines.length;
        }
        await this.runBatch(jobs);
      }
    } finally {
      this.running = false;
    }
  }

  private async runBatch(jobs: Job[]): Promise<void> {
    const input = jobs.flatMap((j) => j.lines).join('\n') + '\n';
    let result;
    try {
      result = await run('ip', [...this.globalArgs, '-force', '-b', '-'], { input });
    } catch (err) {
      for (const j of jobs) j.reject(err as Error);
      return;
    }
    const failures = parseBatchFailures(result.stderr);
    if (result.code !== 0 && failures.size === 0) {
      const err = new Error(`ip ${this.globalArgs.join(' ')} -b failed (exit ${result.code}): ${result.stderr.trim()}`);
      for (const j of jobs) j.reject(err);
      return;
    }
    let lineNo = 1;
    for (const j of jobs) {
      const errors: string[] = [];
      for (const line of j.lines) {
        const failure = failures.get(lineNo++);
        if (failure !== undefined) errors.push(`ip ${line}: ${failure}`);
      }
      if (errors.length) j.reject(new Error(errors.join('; ')));
      else j.resolve();
    }
  }
}

/**
 * Maps the line numbers of failed commands in `ip -force -b -` output to their error messages:
 * ip prints the error, then `Command failed -:<line>`.
 */
export function parseBatchFailures(stderr: string): Map<number, string> {
  const failures = new Map<number, string>();
  let message: string[] = [];
  for (const line of stderr.split('\n')) {
    const m = /^Command failed -:(\d+)\s*$/.exec(line);
    if (m) {
      failures.set(Number(m[1]), message.join(' ').trim() || 'failed');
      message = [];
    } else if (line.trim()) message.push(line.trim());
  }
  return failures;
}

import { run } from '../proc.js';

interface Job {
  lines: string[];
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Runs `ip` commands in batches (`ip -force -b -`), one process per batch, by group commit: a
 * request starts a process at once while fewer than `parallel` run; requests that arrive
 * meanwhile are queued and go together in the next one. A pod burst thus costs a few processes
 * instead of one per pod, and a lone request waits for nothing. Each request gets back only the
 * errors of its own lines. A request's lines stay together in one process, in order.
 */
export class IpBatcher {
  private queue: Job[] = [];
  private running = 0;

  constructor(
    /** `ip` options that go before `-b` (e.g. `['-n', 'ns']`). */
    private readonly globalArgs: string[] = [],
    private readonly maxLinesPerBatch = 2000,
    /**
     * Batches that run at once. More than one when a batch's lines start processes of their own
     * (`netns exec`): a chain of processes run one after another gets a small share of a busy
     * machine, and a batch waiting for one of them holds up every request in it.
     */
    private readonly parallel = 1,
  ) {}

  run(lines: string[]): Promise<void> {
    if (!lines.length) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.queue.push({ lines, resolve, reject });
      this.drain();
    });
  }

  private drain(): void {
    while (this.running < this.parallel && this.queue.length) {
      const jobs = this.nextBatch();
      this.running++;
      void this.runBatch(jobs).finally(() => {
        this.running--;
        this.drain();
      });
    }
  }

  /** The queued requests that fit in one batch, oldest first (at least one, however long). */
  private nextBatch(): Job[] {
    const jobs: Job[] = [];
    let n = 0;
    while (this.queue.length && (jobs.length === 0 || n + this.queue[0]!.lines.length <= this.maxLinesPerBatch)) {
      const job = this.queue.shift()!;
      jobs.push(job);
      n += job.lines.length;
    }
    return jobs;
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

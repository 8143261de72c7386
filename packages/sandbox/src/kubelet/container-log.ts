import { createWriteStream, type WriteStream } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';

/**
 * One run of a container's output in the CRI log format a container runtime writes
 * (`<RFC3339Nano time> <stdout|stderr> <F|P> <line>`, F a full line, P a partial one), so the
 * kubelet API can serve it with timestamps, sinceSeconds and tailLines as a kubelet does.
 */
export class ContainerLogFile {
  private readonly out: WriteStream;
  private readonly partial: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
  private readonly partialBytes = { stdout: 0, stderr: 0 };
  private open = 2;
  /** Resolves once both streams ended and everything is on disk (`ended` is true from then on). */
  readonly closed: Promise<void>;
  private markClosed!: () => void;
  ended = false;

  constructor(readonly path: string) {
    this.out = createWriteStream(path, { flags: 'a' });
    this.out.on('error', () => undefined); // a pod directory removed under a live container
    this.closed = new Promise((r) => (this.markClosed = r));
  }

  /** Copies a process's stdout or stderr into the log; the log closes when both have ended. */
  attach(stream: 'stdout' | 'stderr', from: Readable | null | undefined): void {
    if (!from) return this.streamEnded(stream);
    from.on('data', (d: Buffer) => this.write(stream, d));
    from.once('close', () => this.streamEnded(stream));
  }

  write(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      const line = this.partialBytes[stream] ? Buffer.concat([...this.partial[stream], piece]) : piece;
      this.partial[stream] = [];
      this.partialBytes[stream] = 0;
      this.line(stream, 'F', line);
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.partial[stream].push(Buffer.from(rest));
      this.partialBytes[stream] += rest.length;
      // A runtime cuts very long lines into partial lines (containerd: 16 KiB).
      if (this.partialBytes[stream] >= 16 * 1024) this.flushPartial(stream);
    }
  }

  private streamEnded(stream: 'stdout' | 'stderr'): void {
    this.flushPartial(stream);
    if (--this.open === 0) {
      this.out.end(() => {
        this.ended = true;
        this.markClosed();
      });
    }
  }

  private flushPartial(stream: 'stdout' | 'stderr'): void {
    if (!this.partialBytes[stream]) return;
    const line = Buffer.concat(this.partial[stream]);
    this.partial[stream] = [];
    this.partialBytes[stream] = 0;
    this.line(stream, 'P', line);
  }

  private line(stream: 'stdout' | 'stderr', tag: 'F' | 'P', content: Buffer): void {
    this.out.write(Buffer.concat([Buffer.from(`${criTimestamp(new Date())} ${stream} ${tag} `), content, NEWLINE]));
  }
}

const NEWLINE = Buffer.from('\n');

/** RFC 3339 with nanoseconds, as a CRI log line carries it. */
export function criTimestamp(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
}

export interface LogOptions {
  timestamps?: boolean;
  tailLines?: number;
  limitBytes?: number;
  /** Only lines written at or after this time, epoch ms. */
  sinceMs?: number;
}

interface CriLine {
  time: string;
  ms: number;
  tag: string;
  content: Buffer;
}

/** Parses CRI log lines; a line that does not parse is passed through as it is. */
export function parseCriLines(data: Buffer): CriLine[] {
  const lines: CriLine[] = [];
  let start = 0;
  while (start < data.length) {
    let nl = data.indexOf(10, start);
    if (nl < 0) nl = data.length; // a line still being written: taken as it is
    const raw = data.subarray(start, nl);
    start = nl + 1;
    const s1 = raw.indexOf(32);
    const s2 = s1 < 0 ? -1 : raw.indexOf(32, s1 + 1);
    const s3 = s2 < 0 ? -1 : raw.indexOf(32, s2 + 1);
    if (s3 < 0) {
      lines.push({ time: '', ms: 0, tag: 'F', content: raw });
      continue;
    }
    const time = raw.subarray(0, s1).toString();
    lines.push({ time, ms: Date.parse(time), tag: raw.subarray(s2 + 1, s3).toString(), content: raw.subarray(s3 + 1) });
  }
  return lines;
}

/** Renders CRI lines as `kubectl logs` shows them: the content (and the time with `timestamps`), full lines ending in a newline. */
export function renderLines(lines: CriLine[], opts: LogOptions): Buffer {
  const parts: Buffer[] = [];
  for (const l of lines) {
    if (opts.timestamps) parts.push(Buffer.from(`${l.time} `));
    parts.push(l.content);
    if (l.tag !== 'P') parts.push(NEWLINE);
  }
  return Buffer.concat(parts);
}

/** Selects lines by sinceMs and tailLines (counting full lines, as a kubelet does). */
export function selectLines(lines: CriLine[], opts: LogOptions): CriLine[] {
  let out = opts.sinceMs !== undefined ? lines.filter((l) => !(l.ms < opts.sinceMs!)) : lines;
  if (opts.tailLines !== undefined) {
    if (opts.tailLines <= 0) return [];
    let full = 0;
    let i = out.length;
    while (i > 0) {
      if (out[i - 1]!.tag !== 'P') {
        if (full === opts.tailLines) break;
        full++;
      }
      i--;
    }
    out = out.slice(i);
  }
  return out;
}

/** The whole log of a finished (or live) run, as the kubelet API returns it without `follow`. */
export async function readLog(path: string, opts: LogOptions): Promise<Buffer> {
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch {
    data = Buffer.alloc(0);
  }
  const out = renderLines(selectLines(parseCriLines(data), opts), opts);
  return opts.limitBytes !== undefined ? out.subarray(0, opts.limitBytes) : out;
}

/**
 * Streams a log as it grows (`follow`): first what `readLog` returns, then each line as it is
 * written, until the run ends (`log.closed`) or `signal` aborts. Writes through `send`, which
 * returns false when the receiver is gone.
 */
export async function followLog(log: ContainerLogFile, opts: LogOptions, send: (b: Buffer) => boolean, signal: AbortSignal, pollMs = 200): Promise<void> {
  let budget = opts.limitBytes ?? Infinity;
  const emit = (b: Buffer): boolean => {
    if (!b.length) return true;
    const part = b.length > budget ? b.subarray(0, budget) : b;
    budget -= part.length;
    return send(part) && budget > 0;
  };
  const fh = await open(log.path, 'r').catch(() => undefined);
  if (!fh) return;
  try {
    let offset = 0;
    let first = true;
    let carry = Buffer.alloc(0);
    let ended = log.ended;
    for (;;) {
      const { size } = await fh.stat();
      if (size > offset) {
        const buf = Buffer.alloc(size - offset);
        const { bytesRead } = await fh.read(buf, 0, buf.length, offset);
        offset += bytesRead;
        const data = Buffer.concat([carry, buf.subarray(0, bytesRead)]);
        const lastNl = data.lastIndexOf(10);
        carry = data.subarray(lastNl + 1);
        const complete = data.subarray(0, lastNl + 1);
        let lines = parseCriLines(complete);
        lines = first ? selectLines(lines, opts) : opts.sinceMs !== undefined ? lines.filter((l) => !(l.ms < opts.sinceMs!)) : lines;
        first = false;
        if (!emit(renderLines(lines, opts))) return;
      } else if (first) {
        first = false; // an empty log so far: tailLines has nothing to cut
      }
      if (ended || signal.aborted) return;
      // Read once more after the run ended, so its last lines are not lost.
      ended = log.ended;
      await Promise.race([new Promise((r) => setTimeout(r, pollMs)), log.closed]);
    }
  } finally {
    await fh.close();
  }
}

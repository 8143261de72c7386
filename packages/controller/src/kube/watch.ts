import { STATUS_CODES } from 'node:http';
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { PooledKubeConfig } from './config.js';
import { LeanRequests } from './lean.js';

/**
 * A quiet watch's only data is the bookmark the apiserver sends 2 s before the watch's timeout (its
 * other bookmarks come a minute apart), and a watch the server has not ended WATCH_END_GRACE_MS after
 * its timeout is given up on: with 25 s a dead connection is noticed within 30 s. 20-25 s watches cost
 * the apiserver next to nothing (a resume is served from its watch cache: no list, no etcd read).
 */
export const DEFAULT_WATCH_TIMEOUT_SECONDS = 25;
/** How long after its timeoutSeconds the client waits for the server to end a watch. */
const WATCH_END_GRACE_MS = 5_000;

interface ResumingWatchOptions {
  /** Applied to the object of each ADDED, MODIFIED and DELETED event (ERROR and BOOKMARK pass through). */
  transform: (obj: unknown) => unknown;
  /** At most DEFAULT_WATCH_TIMEOUT_SECONDS; each watch asks for 80-100 % of it. */
  maxTimeoutSeconds: number;
  onWatch?: (resourceVersion: string) => void;
}

/**
 * A Watch that asks for bookmarks and a server-side timeout, and ends a watch the server has not
 * ended soon after that timeout (as a TimeoutError: ListWatch resumes at once from where it was).
 * Event objects go through `transform`.
 *
 * The stream is read without client-node's Watch, which reads it through fetch, a web stream, a Node
 * stream adapter and readline before it parses a line: every watch event of every cached object
 * crosses that path (bench/results/2026-11-27-lean-requests-and-runtime.md). Here the request goes out on the connection pool through
 * LeanRequests, and each line of the answer is cut from its buffers and parsed. What ListWatch sees
 * is client-node's contract: `callback(type, object, event)` for each event (a line that does not
 * parse, or a callback that throws, is skipped, as client-node skips it), then `done` exactly once:
 * `null` when the server ends the watch, an Error with `statusCode` when it refuses it (410 Gone
 * makes ListWatch list again), a TimeoutError DOMException when the client gives up on it, or the
 * stream's error.
 */
export class ResumingWatch extends Watch {
  private readonly requests: LeanRequests;

  constructor(
    config: KubeConfig,
    private readonly opts: ResumingWatchOptions,
  ) {
    super(config);
    this.requests = new LeanRequests(PooledKubeConfig.of(config));
    if (!(opts.maxTimeoutSeconds >= 1 && opts.maxTimeoutSeconds <= DEFAULT_WATCH_TIMEOUT_SECONDS)) {
      throw new RangeError(`watchTimeoutSeconds must be 1..${DEFAULT_WATCH_TIMEOUT_SECONDS} (a quiet watch's first bookmark comes 2 s before its timeout, and a watch is given up on 5 s after it), got ${opts.maxTimeoutSeconds}`);
    }
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    // Spread so that informers (and replicas) started together do not reconnect in step.
    const timeoutSeconds = Math.max(1, Math.round(this.opts.maxTimeoutSeconds * (0.8 + 0.2 * Math.random())));
    this.opts.onWatch?.(String(queryParams.resourceVersion ?? ''));
    const controller = new AbortController();
    // A connection gone silent (no bookmark, no end) is given up on soon after the watch's timeout.
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException(`the apiserver did not end a ${timeoutSeconds} s watch`, 'TimeoutError'));
    }, timeoutSeconds * 1000 + WATCH_END_GRACE_MS);
    deadline.unref();
    let ended = false;
    const end = (err: unknown): void => {
      if (ended) return;
      ended = true;
      clearTimeout(deadline);
      // Timed out, the request fails with whatever undici makes of the abort: ListWatch is told why.
      done(err && timedOut ? (controller.signal.reason as unknown) : err);
      controller.abort();
    };
    const emit = (line: string): void => {
      try {
        const event = JSON.parse(line) as { type: string; object: unknown };
        callback(event.type, event.type === 'ERROR' || event.type === 'BOOKMARK' ? event.object : this.opts.transform(event.object), event);
      } catch {
        // client-node's Watch skips such a line too
      }
    };
    try {
      const query = { watch: true, ...queryParams, allowWatchBookmarks: true, timeoutSeconds };
      const { answer } = await this.requests.open({ method: 'GET', path, query }, controller.signal);
      if (answer.statusCode !== 200) {
        answer.body.destroy();
        throw Object.assign(new Error(STATUS_CODES[answer.statusCode] ?? `HTTP ${answer.statusCode}`), { statusCode: answer.statusCode });
      }
      const lines = new LineSplitter(emit);
      answer.body.on('data', (chunk: Buffer) => lines.push(chunk));
      answer.body.on('end', () => {
        lines.flush();
        end(null);
      });
      answer.body.on('error', end);
      answer.body.on('close', () => end(null));
    } catch (err) {
      end(err);
    }
    return controller;
  }
}

/** Cuts a byte stream into lines (a watch answer: one JSON event per line) without copying a chunk more than once. */
export class LineSplitter {
  private pending: Buffer[] = [];

  constructor(private readonly line: (text: string) => void) {}

  push(chunk: Buffer): void {
    let from = 0;
    for (let at = chunk.indexOf(NEWLINE); at !== -1; at = chunk.indexOf(NEWLINE, from)) {
      const piece = chunk.subarray(from, at);
      if (this.pending.length > 0) {
        this.pending.push(piece);
        this.emit(Buffer.concat(this.pending).toString('utf8'));
        this.pending = [];
      } else this.emit(piece.toString('utf8'));
      from = at + 1;
    }
    if (from < chunk.length) this.pending.push(chunk.subarray(from));
  }

  /** The stream ended: a last line without its newline is a line too. */
  flush(): void {
    if (this.pending.length === 0) return;
    const rest = Buffer.concat(this.pending).toString('utf8');
    this.pending = [];
    this.emit(rest);
  }

  private emit(text: string): void {
    // Whitespace only is no line (a test for one non-space character: no trimmed copy of every event).
    if (/\S/.test(text)) this.line(text);
  }
}

const NEWLINE = 0x0a;

/**
 * Durations written the Kubernetes / Go way: "500ms", "2s", "1m30s", "1h". A bare "0" is allowed.
 * Units: ms, s, m, h (and us/ns for completeness, rounded to whole milliseconds).
 */
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const PART = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;

/**
 * The longest configurable duration: a Node.js timer takes at most 2^31 - 1 ms (24.8 days) and
 * fires at once when given more, so a longer resync, backoff or timeout would turn into a busy loop.
 */
export const MAX_DURATION_MS = 596 * 3_600_000;

export class DurationError extends Error {
  override name = 'DurationError';
}

/** Parses a Go-style duration into milliseconds. Throws DurationError naming the input. */
export function parseDuration(input: string): number {
  const text = input.trim();
  if (text === '0') return 0;
  if (text === '') throw new DurationError('empty duration; write it like "500ms", "10s", "2m" or "1h30m"');
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const start = PART.lastIndex;
    const m = PART.exec(text);
    if (!m) {
      throw new DurationError(
        `invalid duration "${input}" at "${text.slice(start)}"; write it like "500ms", "10s", "2m" or "1h30m"`,
      );
    }
    total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  }
  if (!Number.isFinite(total)) throw new DurationError(`duration "${input}" is too large`);
  return Math.round(total);
}

/** Formats milliseconds compactly: 1500 -> "1.5s", 90000 -> "1m30s", 250 -> "250ms". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(3)}s`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = +((ms % 60_000) / 1000).toFixed(3);
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s ? `${s}s` : ''}` || '0s';
}

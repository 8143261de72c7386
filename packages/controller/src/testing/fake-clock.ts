import { sleepOn, type Clock, type Timer } from '../clock.js';

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that only moves when a test says so. `advance(ms)` fires due timers in time order
 * (letting promise callbacks run between them), so code that sleeps in a loop can be stepped.
 */
export class FakeClock implements Clock {
  private current: number;
  private seq = 0;
  private pending: Pending[] = [];

  constructor(start: number | string = Date.UTC(2025, 0, 1)) {
    this.current = typeof start === 'string' ? Date.parse(start) : start;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const entry: Pending = { at: this.current + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.pending.push(entry);
    return { cancel: () => void (entry.cancelled = true) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Number of timers not yet fired or cancelled. */
  get timers(): number {
    return this.pending.filter((p) => !p.cancelled).length;
  }

  /** Moves time forward by ms, firing every timer that falls due, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      await flushPromises();
      const next = this.nextDue(target);
      if (!next) break;
      this.pending = this.pending.filter((p) => p !== next);
      this.current = Math.max(this.current, next.at);
      next.fn();
    }
    this.current = target;
    await flushPromises();
  }

  /** Sets the time without firing timers (for pure functions that only read now()). */
  set(time: number | string): void {
    this.current = typeof time === 'string' ? Date.parse(time) : time;
  }

  private nextDue(target: number): Pending | undefined {
    this.pending = this.pending.filter((p) => !p.cancelled);
    let best: Pending | undefined;
    for (const p of this.pending) {
      if (p.at > target) continue;
      if (!best || p.at < best.at || (p.at === best.at && p.seq < best.seq)) best = p;
    }
    return best;
  }
}

/** Lets every already-queued promise callback (and the ones they queue) run. */
export async function flushPromises(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

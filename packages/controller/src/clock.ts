/**
 * Time, injected. Everything that waits or compares timestamps takes a Clock so tests can step
 * a FakeClock (src/testing/fake-clock.ts) instead of sleeping.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls fn once after ms milliseconds (unless cancelled). Timers never keep the process alive. */
  setTimer(ms: number, fn: () => void): Timer;
  /** Resolves after ms milliseconds, or at once (without rejecting) when signal aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const handle = setTimeout(fn, Math.max(0, ms));
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
  sleep(ms, signal) {
    return sleepOn(realClock, ms, signal);
  },
};

/** sleep() for any Clock implementation, built on setTimer. */
export function sleepOn(clock: Pick<Clock, 'setTimer'>, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = (): void => {
      timer.cancel();
      resolve();
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Settles like `promise`, or rejects with `message` when it has not settled within ms on `clock`. */
export function withDeadline<T>(clock: Pick<Clock, 'setTimer'>, promise: Promise<T>, ms: number, message: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = clock.setTimer(Math.max(0, ms), () => reject(new Error(message)));
    promise.then(
      (value) => {
        timer.cancel();
        resolve(value);
      },
      (err: unknown) => {
        timer.cancel();
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

import { formatDuration } from '@kube-node-ready/core';

/**
 * The reason a deadline signal aborts with. Its message says which deadline fired, so an error
 * text can read "timeout: no answer within 5s (dns check timeout)".
 */
export class DeadlineExceeded extends Error {
  override name = 'DeadlineExceeded';
  constructor(
    readonly ms: number,
    readonly what: string,
  ) {
    super(`${formatDuration(ms)} (${what})`);
  }
}

export interface Deadline {
  signal: AbortSignal;
  /** Clears the timer; call it when the work is done so nothing keeps the process alive. */
  dispose(): void;
}

/** A signal that aborts after `ms`, or earlier with the parent's reason when the parent aborts. */
export function deadline(ms: number, what: string, parent?: AbortSignal): Deadline {
  const controller = new AbortController();
  const onParentAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) {
    controller.abort(parent.reason);
    return { signal: controller.signal, dispose: () => {} };
  }
  const timer = setTimeout(() => controller.abort(new DeadlineExceeded(ms, what)), ms);
  parent?.addEventListener('abort', onParentAbort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}

/** "5s (dns check timeout)" for a deadline signal, else the abort reason's text. */
export function describeAbort(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  if (reason instanceof DeadlineExceeded) return reason.message;
  if (reason instanceof Error) return reason.message;
  return String(reason ?? 'aborted');
}

/**
 * Waits for `promise`, or rejects with `onAbort()` as soon as `signal` aborts. The promise keeps
 * its own rejection handler, so abandoning it never produces an unhandled rejection.
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal, onAbort: () => Error): Promise<T> {
  promise.catch(() => {});
  if (signal.aborted) return Promise.reject(onAbort());
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(onAbort());
    signal.addEventListener('abort', abort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

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

export interface Settle<T> {
  resolve(value: T): void;
  reject(err: Error): void;
}

/**
 * A promise around a socket: `start` opens it and returns how to close it. The first of
 * resolve, reject or the signal aborting (which rejects with `onAbort()`) wins; the socket is then
 * closed and the signal listener removed, so nothing outlives the result.
 */
export function settleOnce<T>(signal: AbortSignal, onAbort: () => Error, start: (settle: Settle<T>) => () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(onAbort());
    let done = false;
    const opened: { close?: () => void } = {};
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      signal.removeEventListener('abort', abort);
      opened.close?.();
      settle();
    };
    const abort = () => finish(() => reject(onAbort()));
    signal.addEventListener('abort', abort, { once: true });
    const close = start({ resolve: (value) => finish(() => resolve(value)), reject: (err) => finish(() => reject(err)) });
    opened.close = close;
    if (done) close(); // settled while starting, before `close` was known
  });
}

import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createWriteStream } from 'node:fs';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion and captures its output. Never rejects on a non-zero exit. */
export function run(cmd: string, args: string[], opts: SpawnOptions & { input?: string } = {}): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
    if (opts.input !== undefined) {
      child.stdin?.on('error', () => {}); // the command may exit without reading its input
      child.stdin?.end(opts.input);
    }
  });
}

/** Runs a command and throws with its stderr when it fails. */
export async function runOk(cmd: string, args: string[], opts: SpawnOptions & { input?: string } = {}): Promise<string> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

/** A component started by startLogged; `logged` resolves once all its output is in its log file. */
export type LoggedProcess = ChildProcess & { logged: Promise<void> };

/**
 * Starts a long-running component with stdout+stderr appended to a log file. The log is closed once
 * both streams have ended (not when the first does), so the last lines of a process that exits,
 * its fatal error usually, are kept.
 */
export function startLogged(cmd: string, args: string[], logFile: string, opts: SpawnOptions = {}): LoggedProcess {
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const logged = new Promise<void>((resolvePromise) => {
    log.once('close', () => resolvePromise());
    log.once('error', () => resolvePromise());
  });
  // 'close': the process has exited and both of its streams have ended (or it never started).
  child.once('close', () => log.end());
  child.once('error', () => log.end());
  return Object.assign(child, { logged });
}

/** Sends SIGTERM, then SIGKILL after graceMs; resolves when the process has exited. */
export function stopProcess(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolvePromise) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolvePromise();
    });
    child.kill('SIGTERM');
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

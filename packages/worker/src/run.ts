import { existsSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import {
  ConfigError,
  createLogger,
  encodeSummary,
  errorMessage,
  ExitCode,
  versionString,
  type Logger,
  type WorkerSummary,
} from '@kube-node-ready/core';
import type { DestinationStream } from 'pino';
import { apiCheck } from './checks/api.js';
import { dnsCheck } from './checks/dns.js';
import { egressCheck } from './checks/egress.js';
import { httpCheck } from './checks/http.js';
import { mtuCheck } from './checks/mtu.js';
import { podnetCheck } from './checks/podnet.js';
import { serviceCheck } from './checks/service.js';
import { tcpCheck } from './checks/tcp.js';
import type { Check, CheckContext, CheckRegistry, CheckResult, Nameservers } from './checks/types.js';
import { DEFAULTS, fallbackTerminationLog, loadWorkerConfig, type CheckName, type CommandLine, type WorkerConfig } from './config.js';
import { HELP } from './help.js';
import { ClusterApi } from './kube/cluster.js';
import { deadline, describeAbort } from './net/deadline.js';
import { resolveNameservers } from './resolv-conf.js';

export interface WorkerIo {
  /** --help and --version text (default: process.stdout). */
  stdout?: (text: string) => void;
  /** Configuration errors (default: process.stderr). */
  stderr?: (text: string) => void;
  /** Where log lines go (default: stdout). */
  logDestination?: DestinationStream;
}

export const CHECKS: CheckRegistry = {
  dns: dnsCheck,
  api: apiCheck,
  tcp: tcpCheck,
  service: serviceCheck,
  podnet: podnetCheck,
  mtu: mtuCheck,
  egress: egressCheck,
  http: httpCheck,
};

/** After its deadline a check gets this long to report what it saw, before a bare "timeout" replaces its result. */
export const REPORT_GRACE_MS = 200;

/**
 * `kube-node-ready worker ARGS`: runs the enabled checks concurrently under the overall deadline,
 * logs one line per check and one summary line, writes the termination message and resolves with
 * the exit code (ExitCode: 0 passed, 1 a check failed, 2 configuration error, 3 internal error).
 * Every socket and timer is closed before it resolves: the caller may simply exit.
 */
export async function runWorker(argv: string[], env: NodeJS.ProcessEnv, io: WorkerIo = {}): Promise<number> {
  const stdout = io.stdout ?? ((text: string) => void process.stdout.write(text));
  const stderr = io.stderr ?? ((text: string) => void process.stderr.write(text));
  let command: CommandLine;
  try {
    command = loadWorkerConfig(argv, env);
  } catch (err) {
    const configError = err instanceof ConfigError;
    const message = configError ? err.message : `internal error: ${errorMessage(err)}`;
    stderr(`error: ${message}\n${configError ? 'Run "kube-node-ready worker --help" for the options.\n' : ''}`);
    writeTerminationLog(fallbackTerminationLog(argv, env), { v: 1, ok: false, durationMs: 0, checks: [], error: `${configError ? 'configuration error: ' : ''}${message}` });
    return configError ? ExitCode.CONFIG_ERROR : ExitCode.INTERNAL_ERROR;
  }
  if (command.kind === 'help') {
    stdout(HELP);
    return ExitCode.OK;
  }
  if (command.kind === 'version') {
    stdout(`${versionString()}\n`);
    return ExitCode.OK;
  }

  const { config } = command;
  const log = await createLogger({
    format: config.logging.format,
    level: config.logging.level,
    base: {
      component: 'worker',
      ...(config.pod.nodeName ? { node: config.pod.nodeName } : {}),
      ...(config.pod.podName ? { pod: config.pod.podName } : {}),
      ...(config.pod.podNamespace ? { namespace: config.pod.podNamespace } : {}),
    },
    ...(io.logDestination ? { destination: io.logDestination } : {}),
  });
  let summary: WorkerSummary;
  let code: ExitCode;
  try {
    ({ summary, exitCode: code } = await runChecks(config, log, CHECKS));
  } catch (err) {
    log.error({ err: errorMessage(err) }, 'internal error');
    summary = { v: 1, ok: false, ...nodeOf(config), durationMs: 0, checks: [], error: `internal error: ${errorMessage(err)}` };
    code = ExitCode.INTERNAL_ERROR;
  }
  writeTerminationLog(config.terminationLog, summary, log);
  return code;
}

export interface CheckOutcome extends CheckResult {
  name: CheckName;
  durationMs: number;
  /** The check threw: a bug in the worker, not a finding about the node. */
  internal?: boolean;
}

/** Runs the enabled checks of `registry` concurrently; logs each result and the summary. */
export async function runChecks(config: WorkerConfig, log: Logger, registry: CheckRegistry): Promise<{ summary: WorkerSummary; exitCode: ExitCode; outcomes: CheckOutcome[] }> {
  const started = performance.now();
  const run = deadline(config.timeout, 'overall --timeout');
  // dns, egress and http never read the API; mtu reads the DNS pods from it when it is in use anyway.
  const apiChecks = config.enabled.filter((name) => name !== 'dns' && name !== 'egress' && name !== 'http');
  const usesApi = apiChecks.length > 0;
  const apiTimeouts = apiChecks.map((name) => config.checkTimeouts[name]);
  const cluster = usesApi ? new ClusterApi(config.pod, run.signal, Math.max(...apiTimeouts), config.api.endpoints) : undefined;
  const needsNameservers = config.enabled.some((name) => name === 'dns' || name === 'service' || name === 'mtu' || name === 'egress');
  const nameservers: Nameservers = needsNameservers ? resolveNameservers(config.dns.servers, config.pod.resolvConf) : { error: 'no check needs a nameserver' };
  log.debug({ checks: config.enabled, timeoutMs: config.timeout, checkTimeoutsMs: config.checkTimeouts, configFile: config.configFile, usesApi }, 'starting checks');

  let outcomes: CheckOutcome[];
  try {
    const shared = { config, ...(cluster ? { cluster } : {}), nameservers };
    outcomes = await Promise.all(
      config.enabled.map(async (name) => {
        const outcome = await runOne(name, registry[name], shared, log, run.signal);
        logOutcome(log, outcome);
        return outcome;
      }),
    );
  } finally {
    run.dispose();
    cluster?.close();
  }

  const failed = outcomes.filter((o) => !o.ok);
  const warnings = outcomes.flatMap((o) => (o.warnings ?? []).map((w) => `${o.name}: ${w}`));
  const summary: WorkerSummary = {
    v: 1,
    ok: failed.length === 0,
    ...nodeOf(config),
    durationMs: Math.round(performance.now() - started),
    checks: outcomes.map((o) => ({
      name: o.name,
      ok: o.ok,
      durationMs: o.durationMs,
      ...(o.error !== undefined ? { error: o.error } : {}),
      ...(!o.ok && o.target !== undefined ? { target: o.target } : {}),
      ...(!o.ok && o.httpStatus !== undefined ? { httpStatus: o.httpStatus } : {}),
      ...(!o.ok && o.noReadyEndpoints !== undefined ? { noReadyEndpoints: o.noReadyEndpoints } : {}),
    })),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
  const exitCode = outcomes.some((o) => o.internal) ? ExitCode.INTERNAL_ERROR : failed.length > 0 ? ExitCode.CHECK_FAILED : ExitCode.OK;
  log[summary.ok ? 'info' : 'error'](
    { ok: summary.ok, durationMs: summary.durationMs, exitCode, failed: failed.map((o) => o.name), checks: summary.checks, ...(warnings.length > 0 ? { warnings } : {}) },
    summary.ok ? 'verification passed' : 'verification failed',
  );
  return { summary, exitCode, outcomes };
}

async function runOne(
  name: CheckName,
  check: Check,
  shared: Omit<CheckContext, 'signal' | 'log'>,
  log: Logger,
  runSignal: AbortSignal,
): Promise<CheckOutcome> {
  const own = deadline(shared.config.checkTimeouts[name], `${name} check timeout`, runSignal);
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  try {
    const result = await settleWithin(check({ ...shared, signal: own.signal, log: log.child({ check: name }) }), own.signal);
    return { name, durationMs: elapsed(), ...result };
  } catch (err) {
    return { name, durationMs: elapsed(), ok: false, internal: true, error: `internal error: ${errorMessage(err)}` };
  } finally {
    own.dispose();
  }
}

/** The check's own result; a bare timeout result if it has none REPORT_GRACE_MS after its deadline. */
function settleWithin(result: Promise<CheckResult>, signal: AbortSignal): Promise<CheckResult> {
  return new Promise((resolve, reject) => {
    let grace: NodeJS.Timeout | undefined;
    const onAbort = () => {
      grace = setTimeout(() => resolve({ ok: false, error: `timeout: the check did not finish within ${describeAbort(signal)}` }), REPORT_GRACE_MS);
    };
    const done = () => {
      clearTimeout(grace);
      signal.removeEventListener('abort', onAbort);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    result.then(
      (value) => {
        done();
        resolve(value);
      },
      (err: unknown) => {
        done();
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

function logOutcome(log: Logger, outcome: CheckOutcome): void {
  const { name, ok, durationMs, error, warnings, details } = outcome;
  const fields = { check: name, ok, durationMs, ...(error !== undefined ? { error } : {}), ...(warnings ? { warnings } : {}), ...(details ? { details } : {}) };
  if (!ok) log.error(fields, `check ${name} failed`);
  else if (warnings) log.warn(fields, `check ${name} passed with warnings`);
  else log.info(fields, `check ${name} passed`);
}

function nodeOf(config: WorkerConfig): { node?: string } {
  return config.pod.nodeName ? { node: config.pod.nodeName } : {};
}

/**
 * The kubelet creates the termination-message file before the container starts; outside a pod the
 * default /dev/termination-log does not exist and is not created. A path set explicitly is written.
 */
function writeTerminationLog(path: string, summary: WorkerSummary, log?: Logger): void {
  if (path === DEFAULTS.terminationLog && !existsSync(path)) {
    log?.debug({ path }, 'no termination-message file: not running in a pod');
    return;
  }
  try {
    writeFileSync(path, encodeSummary(summary));
  } catch (err) {
    log?.warn({ path, err: errorMessage(err) }, 'cannot write the termination message');
  }
}

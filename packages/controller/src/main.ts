import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { COMMIT, ConfigError, createLogger, errorMessage, ExitCode, VERSION, type Logger } from '@kube-node-ready/core';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { realClock, withDeadline } from './clock.js';
import { loadConfig, type ConfigOverrides } from './config/load.js';
import type { ControllerConfig } from './config/schema.js';
import { startController } from './controllers.js';
import { workerImage } from './controllers/node/verification/pod-spec.js';
import { KubeClient } from './kube/client.js';
import { loadKubeConfig } from './kube/config.js';
import { messageOf } from './kube/errors.js';

export const CONTROLLER_USAGE = `Usage: kube-node-ready controller [options]

Watches Nodes that carry a verification taint, verifies each with a worker pod on the node, and
opens the node (removes the taint, adds the verified label) when it passes.

Options:
  --config PATH                 Controller configuration (YAML; docs/configuration.md)
  --check-config                Validate the configuration (with the other flags applied), print
                                the effective settings and exit: 0 valid, 2 not; no API server needed
  --kubeconfig PATH             Kubeconfig (default: KUBECONFIG, ~/.kube/config, in-cluster)
  --dry-run                     Launch workers and report, but write nothing to Nodes
  --log-level LEVEL             trace | debug | info | warn | error | fatal | silent
  --log-format FORMAT           json | pretty
  --metrics-bind-address ADDR   HOST:PORT for /metrics (and the probes)
  --health-bind-address ADDR    HOST:PORT for /healthz and /readyz, if separate
  --leader-elect / --no-leader-elect
                                Elect a leader through a Lease (default: the config file's)
  -h, --help                    Show this help

Exit codes: 0 stopped by a signal; 1 leadership lost; 2 configuration or usage error;
3 runtime error (for example the API server is unreachable at start-up).`;

export interface RunIO {
  /** Aborting it stops the controller gracefully (defaults to SIGTERM / SIGINT). */
  signal?: AbortSignal;
  stderr?: (line: string) => void;
  stdout?: (line: string) => void;
}

/**
 * `kube-node-ready controller`: parses the command line, loads the configuration, connects to
 * the API server and runs until stopped. Returns the process exit code; never throws.
 */
export async function runController(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: RunIO = {}): Promise<number> {
  const stderr = io.stderr ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const stdout = io.stdout ?? ((line: string) => void process.stdout.write(`${line}\n`));

  // 1. Command line and configuration: bad input exits 2 with one clear line.
  let flags: Flags;
  let config: Readonly<ControllerConfig>;
  try {
    flags = parseFlags(argv);
    if (flags.help) {
      stdout(CONTROLLER_USAGE);
      return ExitCode.OK;
    }
    config = loadConfig(flags.config, flags.overrides);
  } catch (err) {
    stderr(`error: ${errorMessage(err)}`);
    return ExitCode.CONFIG_ERROR;
  }
  if (flags.checkConfig) {
    for (const line of describeConfig(config, flags.config)) stdout(line);
    return ExitCode.OK;
  }

  // 2. Logger and API client.
  const log = await createLogger({ format: config.logging.format, level: config.logging.level, base: { name: 'controller' } });
  let kube: KubeClient;
  try {
    kube = new KubeClient(loadKubeConfig(flags.kubeconfig, env), { qps: config.kubernetes.qps, burst: config.kubernetes.burst, clock: realClock, log });
  } catch (err) {
    stderr(`error: cannot load the kubeconfig: ${errorMessage(err)}`);
    return ExitCode.CONFIG_ERROR;
  }

  // 3. The API server must answer before anything starts.
  try {
    const version = await withDeadline(realClock, kube.serverVersion(), 15_000, 'no answer within 15s');
    log.info({ server: kube.server, serverVersion: version, version: VERSION, commit: COMMIT, dryRun: config.dryRun }, 'connected to the API server');
  } catch (err) {
    stderr(`error: cannot reach the Kubernetes API server at ${kube.server}: ${messageOf(err)}`);
    return ExitCode.INTERNAL_ERROR;
  }

  // 4. Run until a signal (exit 0), lost leadership (exit 1) or a failure (exit 3).
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const stopSignal = io.signal ?? processSignals(log);
  try {
    const controller = await startController({
      config,
      kube,
      clock: realClock,
      log,
      registry,
      identity: `${env.HOSTNAME || hostname()}_${randomUUID()}`,
      ...(env.POD_NAMESPACE ? { podNamespace: env.POD_NAMESPACE } : {}),
      version: VERSION,
      commit: COMMIT,
    });
    const stopped = new Promise<'stopped'>((resolve) => {
      if (stopSignal.aborted) resolve('stopped');
      stopSignal.addEventListener('abort', () => resolve('stopped'), { once: true });
    });
    const result = await Promise.race([controller.finished, stopped]);
    await controller.stop();
    if (result === 'lost') {
      log.error('leadership lost; exiting so a fresh process can compete again');
      return 1;
    }
    return ExitCode.OK;
  } catch (err) {
    log.error({ err: errorMessage(err) }, 'controller failed');
    stderr(`error: ${errorMessage(err)}`);
    return ExitCode.INTERNAL_ERROR;
  }
}

export interface Flags {
  config?: string;
  kubeconfig?: string;
  help: boolean;
  /** Validate the configuration and print it, without connecting to the API server. */
  checkConfig: boolean;
  overrides: ConfigOverrides;
}

/**
 * The command line of `kube-node-ready controller`, and of `kube-node-ready agent` (DaemonSet mode),
 * which takes the same flags except those of leader election and a separate health address.
 */
export function parseFlags(argv: readonly string[], command: 'controller' | 'agent' = 'controller'): Flags {
  const options = {
    config: { type: 'string' },
    kubeconfig: { type: 'string' },
    'dry-run': { type: 'boolean' },
    'log-level': { type: 'string' },
    'log-format': { type: 'string' },
    'metrics-bind-address': { type: 'string' },
    'health-bind-address': { type: 'string' },
    'leader-elect': { type: 'boolean' },
    'check-config': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  } as const;
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], allowPositionals: false, allowNegative: true, strict: true, options });
  } catch (err) {
    throw new ConfigError(`${errorMessage(err)} (see --help)`);
  }
  const v = parsed.values;
  if (command === 'agent') {
    const controllerOnly = {
      'health-bind-address': 'the agent serves /healthz on its metrics address',
      'leader-elect': 'the agent has no leader election',
      'check-config': 'run `kube-node-ready controller --check-config` on the same file',
    } as const;
    for (const [flag, why] of Object.entries(controllerOnly)) {
      if (v[flag as keyof typeof controllerOnly] !== undefined) throw new ConfigError(`--${flag} is a controller flag: ${why} (see --help)`);
    }
  }
  const overrides: ConfigOverrides = {};
  if (v['dry-run'] !== undefined) overrides.dryRun = v['dry-run'];
  if (v['log-level'] !== undefined || v['log-format'] !== undefined) {
    overrides.logging = {
      ...(v['log-level'] !== undefined ? { level: v['log-level'] as never } : {}),
      ...(v['log-format'] !== undefined ? { format: v['log-format'] as never } : {}),
    };
  }
  if (v['metrics-bind-address'] !== undefined) overrides.metrics = { bindAddress: v['metrics-bind-address'] };
  if (v['health-bind-address'] !== undefined) overrides.health = { bindAddress: v['health-bind-address'] };
  if (v['leader-elect'] !== undefined) overrides.leaderElection = { enabled: v['leader-elect'] };
  return {
    ...(v.config !== undefined ? { config: v.config } : {}),
    ...(v.kubeconfig !== undefined ? { kubeconfig: v.kubeconfig } : {}),
    help: v.help ?? false,
    checkConfig: v['check-config'] ?? false,
    overrides,
  };
}

/**
 * What `--check-config` prints: that the configuration (the file, or the defaults, with the flags
 * applied) is valid, and the settings an operator most often needs to confirm. worker.checks is
 * passed to the worker verbatim and validated by the worker when it starts, not here.
 */
export function describeConfig(config: Readonly<ControllerConfig>, path: string | undefined): string[] {
  const nm = config.nodeManagement;
  const remediation = nm.deleteFailedNodes
    ? `enabled, dryRun: ${config.dryRun || nm.remediation.dryRun}${config.dryRun && !nm.remediation.dryRun ? ' (implied by dryRun)' : ''}`
    : 'disabled (nodeManagement.deleteFailedNodes: false)';
  const rows: [string, string][] = [
    ['verification taints', nm.taints.map((t) => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`).join(', ')],
    ['verified label', `${nm.verifiedLabel.key}=${nm.verifiedLabel.value}`],
    ['node selector', nm.nodeSelector || '(all nodes)'],
    ['worker namespace', config.worker.namespace],
    ['worker image', workerImage(config.worker.image, VERSION)],
    ['max concurrent verifications', String(config.reconciliation.maxConcurrentVerifications)],
    ['dryRun', String(config.dryRun)],
    ['remediation', remediation],
    ...(config.profiles.length > 0 ? ([['profiles', `${config.profiles.map((p) => p.name).join(', ')} (the first that selects a node applies; else the top-level settings)`] as [string, string]]) : []),
  ];
  const width = Math.max(...rows.map(([name]) => name.length)) + 1;
  return [`configuration OK: ${path ?? 'defaults'}`, ...rows.map(([name, value]) => `  ${`${name}:`.padEnd(width)} ${value}`)];
}

/** An AbortSignal that fires on the first SIGTERM or SIGINT; a second one exits at once. */
export function processSignals(log: Logger): AbortSignal {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) {
      log.warn({ signal }, 'second signal; exiting now');
      process.exit(ExitCode.INTERNAL_ERROR);
    }
    log.info({ signal }, 'shutting down');
    controller.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return controller.signal;
}

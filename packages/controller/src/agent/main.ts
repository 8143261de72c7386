import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { COMMIT, ConfigError, createLogger, errorMessage, ExitCode, formatDuration, VERSION, type WorkerSummary } from '@kube-node-ready/core';
import { CHECKS, loadWorkerConfig, runChecks, type WorkerConfig } from '@kube-node-ready/worker';
import { realClock, withDeadline } from '../clock.js';
import { loadConfig } from '../config/load.js';
import { Profiles, type Profile } from '../config/profiles.js';
import { DEFAULT_PROFILE, type ControllerConfig } from '../config/schema.js';
import { workerConfigDocument } from '../controllers/node/verification/pod-spec.js';
import { inProcessVerdict } from '../controllers/node/verification/pod-result.js';
import { MemoryProgressStore, NodeVerificationStore } from '../controllers/node/verification/store.js';
import { KubeEventRecorder } from '../events/recorder.js';
import { buildServer, parseBindAddress } from '../http/server.js';
import { KubeClient } from '../kube/client.js';
import { loadKubeConfig } from '../kube/config.js';
import { messageOf } from '../kube/errors.js';
import { parseFlags, processSignals, type Flags, type RunIO } from '../main.js';
import { NodeAgent } from './agent.js';
import { AgentMetrics } from './metrics.js';

/** The worker settings of a profile's checks (worker.checks merged as the controller merges them), validated as the worker validates them. */
function profileChecks(profile: Profile, base: ControllerConfig, env: NodeJS.ProcessEnv): WorkerConfig {
  const dir = mkdtempSync(join(tmpdir(), 'kube-node-ready-agent-'));
  const file = join(dir, `worker.${profile.name}.yaml`);
  writeFileSync(file, workerConfigDocument(profile.config.worker));
  const checks = loadWorkerConfig(['--config', file, '--timeout', formatDuration(profile.config.worker.timeout), '--log-format', base.logging.format, '--log-level', base.logging.level], env);
  if (checks.kind !== 'run') throw new ConfigError('unexpected --help in the checks settings');
  return checks.config;
}

export const AGENT_USAGE = `Usage: kube-node-ready agent [options]

DaemonSet mode: verifies the node this pod runs on (NODE_NAME) with the worker's checks, in this
process, and opens it (removes the verification taints, adds the verified label) when it passes.
Retries with the configured backoff; progress is kept in the node's NodeVerification, so a restarted pod continues.

Options:
  --config PATH                 Configuration (the controller's YAML, docs/configuration.md; the
                                checks come from its worker.checks)
  --kubeconfig PATH             Kubeconfig (default: KUBECONFIG, ~/.kube/config, in-cluster)
  --dry-run                     Run the checks and report, but write nothing to the Node
  --log-level LEVEL             trace | debug | info | warn | error | fatal | silent
  --log-format FORMAT           json | pretty
  --metrics-bind-address ADDR   HOST:PORT for /metrics and /healthz (default: the config's metrics.bindAddress)
  -h, --help                    Show this help

Environment: NODE_NAME (required: spec.nodeName), POD_NAME, POD_NAMESPACE.
Exit codes: 0 stopped by a signal; 2 configuration or usage error; 3 runtime error.`;

/** `kube-node-ready agent`: runs until stopped. Returns the process exit code; never throws. */
export async function runAgent(argv: readonly string[], env: NodeJS.ProcessEnv, io: RunIO = {}): Promise<number> {
  const stderr = io.stderr ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const stdout = io.stdout ?? ((line: string) => void process.stdout.write(`${line}\n`));

  let flags: Flags;
  let config: Readonly<ControllerConfig>;
  let nodeName: string;
  let workerConfig: WorkerConfig;
  try {
    flags = parseFlags(argv, 'agent');
    if (flags.help) {
      stdout(AGENT_USAGE);
      return ExitCode.OK;
    }
    config = loadConfig(flags.config, flags.overrides);
    nodeName = env.NODE_NAME ?? '';
    if (!nodeName) throw new ConfigError('NODE_NAME is not set: the agent verifies the node its pod runs on (env NODE_NAME from fieldRef spec.nodeName)');
    // The checks' settings: worker.checks of the same file, validated before anything starts.
    const checks = loadWorkerConfig(
      [...(flags.config ? ['--config', flags.config] : []), '--timeout', formatDuration(config.worker.timeout), '--log-format', config.logging.format, '--log-level', config.logging.level],
      env,
    );
    if (checks.kind !== 'run') throw new ConfigError('unexpected --help in the checks settings');
    workerConfig = checks.config;
  } catch (err) {
    stderr(`error: ${errorMessage(err)}`);
    return ExitCode.CONFIG_ERROR;
  }

  const pod = `${env.POD_NAMESPACE ?? ''}/${env.POD_NAME ?? nodeName}`;
  const log = await createLogger({ format: config.logging.format, level: config.logging.level, base: { name: 'agent', node: nodeName } });
  let kube: KubeClient;
  try {
    kube = new KubeClient(loadKubeConfig(flags.kubeconfig, env), { qps: config.kubernetes.qps, burst: config.kubernetes.burst, clock: realClock, log });
    const version = await withDeadline(realClock, kube.serverVersion(), 15_000, 'no answer within 15s');
    log.info({ server: kube.server, serverVersion: version, version: VERSION, commit: COMMIT, dryRun: config.dryRun, checks: workerConfig.enabled }, 'connected to the API server');
  } catch (err) {
    stderr(`error: cannot reach the Kubernetes API server: ${messageOf(err)}`);
    return ExitCode.INTERNAL_ERROR;
  }

  // Profiles (docs/profiles.md): the node's profile, chosen from its labels when the agent starts,
  // gives the settings and checks it is verified with.
  if (config.profiles.length > 0) {
    let node: V1Node | undefined;
    try {
      node = await kube.getNode(nodeName);
    } catch (err) {
      stderr(`error: cannot read node ${nodeName} to choose its profile: ${messageOf(err)}`);
      return ExitCode.INTERNAL_ERROR;
    }
    const profile = new Profiles(config).of(node ?? { metadata: { name: nodeName } });
    if (profile.name !== DEFAULT_PROFILE) {
      try {
        workerConfig = profileChecks(profile, config, env);
      } catch (err) {
        stderr(`error: profile ${profile.name}: ${errorMessage(err)}`);
        return ExitCode.CONFIG_ERROR;
      }
      config = profile.config;
      log.info({ profile: profile.name, checks: workerConfig.enabled }, "verifying with the settings of the node's profile");
    }
  }

  const metrics = new AgentMetrics(nodeName, workerConfig.enabled);
  const server = buildServer({ registry: metrics.registry, liveness: () => ({ ok: true }), readiness: () => ({ ok: true }) });
  const stopSignal = io.signal ?? processSignals(log);
  try {
    const { host, port } = parseBindAddress(config.metrics.bindAddress);
    await server.listen({ host, port });
    const agent = new NodeAgent({
      nodeName,
      pod,
      config,
      kube,
      // Its own NodeVerification only, read live before each step (no cache: one object).
      store: config.dryRun ? new MemoryProgressStore() : new NodeVerificationStore({ kube, config, clock: realClock, log, cache: { get: () => undefined } }),
      events: new KubeEventRecorder({
        sink: { create: (ns, e) => kube.createEvent(ns, e), bump: (ns, name, count, at) => kube.bumpEvent(ns, name, count, at) },
        clock: realClock,
        log,
        component: 'kube-node-ready-agent',
        instance: env.POD_NAME ?? nodeName,
      }),
      metrics,
      clock: realClock,
      log,
      runChecks: async () => {
        const started = Date.now();
        try {
          const { summary, exitCode } = await runChecks(workerConfig, log.child({ component: 'checks' }), CHECKS);
          return inProcessVerdict(exitCode, summary, started, Date.now());
        } catch (err) {
          const summary: WorkerSummary = { v: 1, ok: false, node: nodeName, durationMs: Date.now() - started, checks: [], error: `internal error: ${errorMessage(err)}` };
          return inProcessVerdict(ExitCode.INTERNAL_ERROR, summary, started, Date.now());
        }
      },
    });
    await agent.run(stopSignal);
    return ExitCode.OK;
  } catch (err) {
    log.error({ err: errorMessage(err) }, 'agent failed');
    stderr(`error: ${errorMessage(err)}`);
    return ExitCode.INTERNAL_ERROR;
  } finally {
    await server.close();
  }
}

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@kube-node-ready/core';
import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfig } from './load.js';

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

function writeTemp(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'knr-config-'));
  const file = join(dir, 'config.yaml');
  writeFileSync(file, text);
  return file;
}

describe('defaults', () => {
  it('pins every default', () => {
    expect(parseConfig({})).toEqual({
      worker: {
        image: { repository: 'ghcr.io/kube-node-ready/kube-node-ready', tag: '', digest: '' },
        imagePullPolicy: 'IfNotPresent',
        imagePullSecrets: [],
        namespace: 'kube-system',
        serviceAccountName: 'kube-node-ready-worker',
        priorityClassName: 'kube-node-ready-worker',
        resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } },
        tolerations: [],
        configMapName: 'kube-node-ready-worker',
        timeout: 60_000,
        scheduleTimeout: 120_000,
        startTimeout: 180_000,
        containerChecks: [],
        keepFailedPods: 1,
        checks: {},
      },
      reconciliation: {
        maxRetries: 5,
        initialBackoff: 10_000,
        maxBackoff: 300_000,
        backoffFactor: 2,
        resyncInterval: 60_000,
        maxConcurrentVerifications: 100,
        workers: 20,
        controlRuns: true,
        clusterDnsService: 'kube-system/kube-dns',
      },
      nodeManagement: {
        taints: [{ key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' }],
        verifiedLabel: { key: 'node-ready/verified', value: 'true' },
        nodeSelector: '',
        failedTaint: { enabled: true, key: 'kube-node-ready.io/verification-failed' },
        bringUpTimeout: 600_000,
        startupTimeout: 0,
        onStartupTimeout: 'keep',
        verifyUntaintedNodes: false,
        condition: { enabled: true, type: 'kube-node-ready.io/NetworkVerified' },
        deleteFailedNodes: false,
        remediation: {
          dryRun: false,
          minNodeAge: 600_000,
          stuckNodeTimeout: 3_600_000,
          maxInFlight: 2,
          maxPerHour: 5,
          inFlightTimeout: 900_000,
          circuitBreaker: { enabled: true, window: 900_000, minSamples: 5, maxFailedPercent: 30, maxFailedPercentPerNodePool: 20 },
        },
      },
      leaderElection: {
        enabled: true,
        leaseName: 'kube-node-ready-controller',
        namespace: '',
        leaseDuration: 15_000,
        renewDeadline: 10_000,
        retryPeriod: 2_000,
      },
      metrics: { bindAddress: '0.0.0.0:8080' },
      health: { bindAddress: '' },
      logging: { format: 'json', level: 'info' },
      kubernetes: { qps: 50, burst: 100 },
      gates: { mode: 'before', requireDaemonSets: [], requireCSIDrivers: [], requireResources: {} },
      profiles: [],
      dryRun: false,
    });
  });

  it('treats an empty file, and no file at all, as all defaults', () => {
    expect(loadConfig(writeTemp(''))).toEqual(parseConfig({}));
    expect(loadConfig(undefined)).toEqual(parseConfig({}));
  });

  it('returns a deeply frozen object', () => {
    const config = parseConfig({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.nodeManagement.taints[0])).toBe(true);
  });
});

describe('parsing', () => {
  it('reads a file in the reference layout and parses durations to milliseconds', () => {
    const file = writeTemp(`
worker:
  namespace: node-ready
  timeout: 90s
  checks:
    dns: { names: [kubernetes.default.svc.cluster.local] }
reconciliation:
  maxRetries: 3
  initialBackoff: 1m30s
nodeManagement:
  deleteFailedNodes: true
  taints:
    - key: node-ready/unverified
      value: "true"
      effect: NoSchedule
    - key: startup-taint.cluster-autoscaler.kubernetes.io/node-ready
      effect: NoExecute
  verifiedLabel:
    key: example.com/verified
    value: "yes"
`);
    const config = loadConfig(file);
    expect(config.worker.namespace).toBe('node-ready');
    expect(config.worker.timeout).toBe(90_000);
    expect(config.worker.checks).toEqual({ dns: { names: ['kubernetes.default.svc.cluster.local'] } });
    expect(config.reconciliation.maxRetries).toBe(3);
    expect(config.reconciliation.initialBackoff).toBe(90_000);
    expect(config.nodeManagement.taints[1]).toEqual({
      key: 'startup-taint.cluster-autoscaler.kubernetes.io/node-ready',
      value: '',
      effect: 'NoExecute',
    });
    expect(config.nodeManagement.verifiedLabel).toEqual({ key: 'example.com/verified', value: 'yes' });
    // Untouched siblings keep their defaults.
    expect(config.worker.imagePullPolicy).toBe('IfNotPresent');
  });

  it('applies overrides over the file, deeply', () => {
    const file = writeTemp('logging: { level: debug }\nmetrics: { bindAddress: ":9000" }\n');
    const config = loadConfig(file, { dryRun: true, logging: { format: 'pretty' } });
    expect(config.dryRun).toBe(true);
    expect(config.logging).toEqual({ format: 'pretty', level: 'debug' });
    expect(config.metrics.bindAddress).toBe(':9000');
  });
});

describe('errors name the field and what it allows', () => {
  it.each<[string, unknown, string]>([
    ['integer given a string', { reconciliation: { maxRetries: 'abc' } }, 'reconciliation.maxRetries: expected an integer between 0 and 1000, got "abc"'],
    ['negative integer', { reconciliation: { maxRetries: -1 } }, 'reconciliation.maxRetries: expected an integer between 0 and 1000, got -1'],
    ['fractional integer', { worker: { keepFailedPods: 1.5 } }, 'worker.keepFailedPods: expected an integer between 0 and 100, got 1.5'],
    ['bad duration', { worker: { timeout: '10' } }, 'worker.timeout: expected a duration like "500ms", "10s", "2m" or "1h30m", got "10"'],
    ['duration as a number', { worker: { timeout: 10 } }, 'worker.timeout: expected a duration like "500ms", "10s", "2m" or "1h30m", got 10'],
    ['duration below its minimum', { worker: { timeout: '10ms' } }, 'worker.timeout: expected a duration of at least 1000ms, got "10ms"'],
    // Node.js fires a longer timer at once: a resync of 99999h would be a busy loop.
    ['duration beyond the longest timer', { reconciliation: { resyncInterval: '99999h' } }, 'reconciliation.resyncInterval: expected a duration of at most 596h (the longest timer Node.js can set), got "99999h"'],
    ['enum', { logging: { format: 'xml' } }, 'logging.format: expected one of "json", "pretty", got "xml"'],
    ['enum in a list', { nodeManagement: { taints: [{ key: 'a', effect: 'Never' }] } }, 'nodeManagement.taints[0].effect: expected one of "NoSchedule", "PreferNoSchedule", "NoExecute", got "Never"'],
    ['missing required field in a list item', { nodeManagement: { taints: [{ key: 'a' }] } }, 'nodeManagement.taints[0].effect: required; expected one of "NoSchedule", "PreferNoSchedule", "NoExecute"'],
    ['empty taint list', { nodeManagement: { taints: [] } }, 'nodeManagement.taints: expected a list of at least 1, got a list'],
    ['bad label key', { nodeManagement: { verifiedLabel: { key: 'a b' } } }, 'nodeManagement.verifiedLabel.key: expected a qualified name such as "example.com/my-key" or "my-key", got "a b"'],
    ['bad label value', { nodeManagement: { verifiedLabel: { value: '-x' } } }, 'nodeManagement.verifiedLabel.value: expected a label value: up to 63 of [A-Za-z0-9-_.], starting and ending alphanumeric, got "-x"'],
    ['bad namespace', { worker: { namespace: 'Kube_System' } }, 'worker.namespace: expected a lowercase DNS label such as "kube-system", got "Kube_System"'],
    ['bad quantity', { worker: { resources: { requests: { cpu: 'lots' } } } }, 'worker.resources.requests.cpu: expected a Kubernetes quantity such as "50m", "64Mi" or "1", got "lots"'],
    ['bad bind address', { metrics: { bindAddress: 'localhost' } }, 'metrics.bindAddress: expected HOST:PORT such as "0.0.0.0:8080" or ":8080", got "localhost"'],
    ['bad label selector', { nodeManagement: { nodeSelector: 'a b c' } }, 'nodeManagement.nodeSelector: expected a label selector such as "karpenter.sh/nodepool in (general,gpu)" (cannot read requirement "a b c"), got "a b c"'],
    ['bad label selector value', { nodeManagement: { nodeSelector: 'pool in (a,-b)' } }, 'nodeManagement.nodeSelector: expected a label selector such as "karpenter.sh/nodepool in (general,gpu)" ("-b" is not a valid label value), got "pool in (a,-b)"'],
    ['boolean given a string', { dryRun: 'yes' }, 'dryRun: expected true or false, got "yes"'],
    ['section given a scalar', { worker: 5 }, 'worker: expected a mapping, got 5'],
    ['unknown key', { worker: { imagePolicy: 'x' } }, 'worker.imagePolicy: unknown key; allowed keys here: image, imagePullPolicy'],
    ['unknown top-level key', { controller: {} }, 'controller: unknown key; allowed keys here: worker, reconciliation'],
    ['remediation limit', { nodeManagement: { remediation: { maxInFlight: 0 } } }, 'nodeManagement.remediation.maxInFlight: expected an integer between 1 and 1000, got 0'],
    ['remediation unknown key', { nodeManagement: { remediation: { circuitBreaker: { threshold: 10 } } } }, 'nodeManagement.remediation.circuitBreaker.threshold: unknown key'],
    ['renamed key from the earlier implementation', { worker: { timeoutSeconds: 300 } }, 'worker.timeoutSeconds: unknown key; use worker.timeout, a duration such as "300s"'],
    ['renamed key at the top level', { taintKey: 'x' }, 'taintKey: unknown key; use nodeManagement.taints'],
    ['leader election ordering', { leaderElection: { leaseDuration: '10s', renewDeadline: '10s' } }, 'leaderElection.renewDeadline: must be less than leaderElection.leaseDuration'],
    ['leader election retry period', { leaderElection: { retryPeriod: '9s' } }, 'leaderElection.retryPeriod: must be less than leaderElection.renewDeadline / 1.2'],
  ])('%s', (_name, document, expected) => {
    const err = configError(() => parseConfig(document));
    expect(err.message).toContain(expected);
    expect(err.message).not.toMatch(/\n\s+at /); // no stack in the message
  });

  it('lists every problem at once, each on its own line', () => {
    const err = configError(() => parseConfig({ dryRun: 1, logging: { level: 'loud' }, extra: true }));
    const lines = err.message.split('\n');
    expect(lines[0]).toBe('invalid configuration:');
    expect(lines).toHaveLength(4);
    expect(err.message).toContain('  - dryRun: expected true or false, got 1');
    expect(err.message).toContain('  - logging.level: expected one of "trace", "debug"');
    expect(err.message).toContain('  - extra: unknown key');
  });

  it('names the file, and reports unreadable files and broken YAML', () => {
    const file = writeTemp('reconciliation:\n  maxRetries: abc\n');
    expect(configError(() => loadConfig(file)).message).toBe(
      `invalid ${file}: reconciliation.maxRetries: expected an integer between 0 and 1000, got "abc"`,
    );
    expect(configError(() => loadConfig('/nonexistent/config.yaml')).message).toMatch(
      /^cannot read config file \/nonexistent\/config.yaml: ENOENT/,
    );
    expect(configError(() => loadConfig(writeTemp('worker: [1, 2'))).message).toMatch(/is not valid YAML/);
    expect(configError(() => loadConfig(writeTemp('- a\n- b\n'))).message).toMatch(/must contain a mapping at the top level/);
  });

  it('validates overrides like file values', () => {
    expect(configError(() => loadConfig(undefined, { logging: { level: 'loud' as never } })).message).toContain(
      'logging.level: expected one of',
    );
  });
});

describe('nodeManagement.nodeSelector', () => {
  it.each(['', 'knr-test=abc', 'karpenter.sh/nodepool in (general, gpu)', '!node-role.kubernetes.io/control-plane', 'a=1,b!=2,c notin (x),d', 'tier==web'])(
    'accepts %j',
    (selector) => {
      expect(parseConfig({ nodeManagement: { nodeSelector: selector } }).nodeManagement.nodeSelector).toBe(selector);
    },
  );
});

import { z } from 'zod';
import { GROUP } from '../api/well-known.js';
import { remediationSchema } from '../controllers/node/remediation/config.js';
import { containerChecksSchema } from '../controllers/node/verification/container-checks.js';
import { gatesSchema } from '../controllers/node/verification/gates/config.js';
import { duration, int } from './fields.js';
import { dnsLabel, dnsSubdomain, isQualifiedName, LABEL_VALUE, labelSelectorSchema, labelValue, qualifiedName, QUANTITY } from './kube-names.js';

export { isQualifiedName, type LabelSelectorConfig } from './kube-names.js';

/**
 * The one schema of the controller configuration (the YAML file given with --config).
 * Every field has a safe default; unknown keys are errors. Durations are written like Kubernetes
 * ones ("10s", "2m") and come out as milliseconds. docs/configuration.md is generated from this
 * file (src/config/docs.ts): the `description` of each field is its documentation.
 */

// ---------------------------------------------------------------------------------------------
// Building blocks

export type { FieldMeta } from './fields.js';

const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;

/**
 * A label selector in the API's string form: comma-separated `key`, `!key`, `key=value`,
 * `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`. Returns a problem, or undefined.
 */
export function labelSelectorProblem(selector: string): string | undefined {
  if (selector.trim() === '') return undefined;
  // Split on commas outside parentheses.
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else current += ch;
  }
  parts.push(current);
  for (const raw of parts) {
    const part = raw.trim();
    const set = /^(\S+)\s+(in|notin)\s+\(([^()]*)\)$/.exec(part);
    const eq = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
    const exists = /^!?\s*([^=!\s(),]+)$/.exec(part);
    const [key, values] = set ? [set[1], (set[3] ?? '').split(',').map((v) => v.trim())] : eq ? [eq[1], [eq[3] ?? '']] : exists ? [exists[1], []] : [];
    if (key === undefined) return `cannot read requirement ${JSON.stringify(part)}`;
    if (!isQualifiedName(key)) return `${JSON.stringify(key)} is not a valid label key`;
    const bad = values?.find((v) => v.length > 63 || !LABEL_VALUE.test(v));
    if (bad !== undefined) return `${JSON.stringify(bad)} is not a valid label value`;
  }
  return undefined;
}

const taint = z
  .object({
    key: qualifiedName('Taint key.'),
    value: labelValue('Taint value (matching ignores it: any value of this key and effect is ours).').default(''),
    effect: z.enum(TAINT_EFFECTS).meta({ description: 'Taint effect.' }),
  })
  .strict();

const toleration = z
  .object({
    key: z.string().optional().meta({ description: 'Taint key to tolerate; empty with operator Exists tolerates everything.' }),
    operator: z.enum(['Exists', 'Equal']).optional().meta({ description: 'Exists or Equal (Kubernetes default Equal).' }),
    value: z.string().optional().meta({ description: 'Taint value for operator Equal.' }),
    effect: z.enum(TAINT_EFFECTS).optional().meta({ description: 'Effect to tolerate; empty means all effects.' }),
    tolerationSeconds: z.number().int().min(0).optional().meta({ description: 'For NoExecute: how long the pod stays bound.' }),
  })
  .strict();

// partialRecord: any subset of the keys (z.record with an enum key requires every key in zod 4).
const quantityMap = (description: string, defaults: Record<string, string>) =>
  z
    .partialRecord(
      z.enum(['cpu', 'memory', 'ephemeral-storage']),
      z.string().regex(QUANTITY, 'expected a Kubernetes quantity such as "50m", "64Mi" or "1"'),
    )
    .default(defaults)
    .meta({ description, 'x-allowed': 'a map of cpu / memory / ephemeral-storage to quantities ("50m", "64Mi")' });

const port = /^(.*):(\d{1,5})$/;
const bindAddress = (defaultValue: string, description: string) =>
  z
    .string()
    .refine((text) => {
      const m = port.exec(text);
      return m !== null && Number(m[2]) <= 65535;
    }, 'expected HOST:PORT such as "0.0.0.0:8080" or ":8080"')
    .default(defaultValue)
    .meta({ description, 'x-allowed': 'HOST:PORT ("0.0.0.0:8080", ":8080", "127.0.0.1:0")' });


// ---------------------------------------------------------------------------------------------
// Sections

const workerSchema = z
  .object({
    image: z
      .object({
        repository: z
          .string()
          .min(1)
          .default('ghcr.io/kube-node-ready/kube-node-ready')
          .meta({ description: 'Worker image repository (the same image as the controller; it runs `kube-node-ready worker`).' }),
        tag: z
          .string()
          .default('')
          .meta({ description: 'Image tag. Empty: the controller\'s own version, so controller and worker always match.' }),
        digest: z
          .string()
          .regex(/^(sha256:[a-f0-9]{64})?$/, 'expected "sha256:" followed by 64 hex digits')
          .default('')
          .meta({ description: 'Image digest (sha256:...). When set it pins the image and the tag is only informative.' }),
      })
      .strict()
      .prefault({})
      .meta({ description: 'Worker container image.' }),
    imagePullPolicy: z
      .enum(['Always', 'IfNotPresent', 'Never'])
      .default('IfNotPresent')
      .meta({ description: 'Image pull policy of the worker container.' }),
    imagePullSecrets: z
      .array(dnsSubdomain('Secret name.'))
      .default([])
      .meta({ description: 'Names of image pull Secrets in the worker namespace.' }),
    namespace: dnsLabel('Namespace the worker pods are created in.').default('kube-system'),
    serviceAccountName: dnsSubdomain('ServiceAccount of the worker pods (needs read access for the api and service checks).').default(
      'kube-node-ready-worker',
    ),
    priorityClassName: z
      .string()
      .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$/, 'expected a PriorityClass name or ""')
      .default('kube-node-ready-worker')
      .meta({
        description:
          'PriorityClass of the worker pods. The chart creates it (workerPriorityClass): a high value, so a worker is not preempted before ordinary pods, and preemptionPolicy Never, so it never evicts a workload from a full node (a class that may preempt, such as system-node-critical, lets it). Empty: no class (priority 0, which preempts only pods of negative priority).',
      }),
    resources: z
      .object({
        requests: quantityMap('Resource requests of the worker container.', { cpu: '50m', memory: '64Mi' }),
        limits: quantityMap('Resource limits of the worker container.', { memory: '128Mi' }),
      })
      .strict()
      .prefault({})
      .meta({ description: 'Worker container resources.' }),
    tolerations: z
      .array(toleration)
      .default([])
      .meta({
        description:
          'Extra tolerations. The worker always tolerates the verification taints and node.kubernetes.io/not-ready and /unreachable (NoSchedule).',
      }),
    configMapName: dnsSubdomain(
      'ConfigMap (in the worker namespace) the controller writes `worker.checks` into and mounts in every worker pod.',
    ).default('kube-node-ready-worker'),
    timeout: duration('60s', 'Overall deadline of one worker run (passed to the worker as --timeout). A worker still running this long after its container started counts as "deadline exceeded".', {
      min: 1000,
    }),
    scheduleTimeout: duration('2m', 'A worker pod not scheduled this long after it was created counts as a failed attempt ("not scheduled").', {
      min: 1000,
    }),
    startTimeout: duration(
      '3m',
      'A worker pod whose container has not started this long after its pod sandbox was created counts as a failed attempt ("not started"); covers image pulls. Counted from scheduling where the kubelet does not report the PodReadyToStartContainers condition. Before the sandbox exists (the CNI is still coming up) the pod waits up to nodeManagement.bringUpTimeout after the node\'s creation, if that is later.',
      { min: 1000 },
    ),
    containerChecks: containerChecksSchema,
    keepFailedPods: int(1, 'Failed worker pods kept per node for `kubectl logs` (older ones are deleted). 0 deletes every pod once its result is recorded.', 0, 100),
    checks: z
      .record(z.string(), z.unknown())
      .default({})
      .meta({
        description: 'The worker\'s own configuration (checks, per-check timeouts, DNS names...), written verbatim to the worker ConfigMap; the worker validates it (docs/worker.md).',
        'x-allowed': 'a mapping (see docs/worker.md)',
      }),
  })
  .strict();

const reconciliationSchema = z
  .object({
    maxRetries: int(5, 'Failed attempts retried before the node is marked failed (a node gets at most 1 + maxRetries attempts). The taint stays on a failed node.', 0, 1000),
    initialBackoff: duration('10s', 'Delay before the first retry.'),
    maxBackoff: duration('5m', 'Upper bound of the delay between retries.'),
    backoffFactor: z
      .number()
      .min(1)
      .max(10)
      .default(2)
      .meta({ description: 'Each retry waits backoffFactor times longer than the previous one (capped at maxBackoff).' }),
    resyncInterval: duration('1m', 'Safety-net resync: every node is re-examined this often even without a watch event. Normal operation is event-driven.', {
      min: 1000,
    }),
    maxConcurrentVerifications: int(
      100,
      'Worker pods running at the same time, cluster-wide. Nodes beyond it wait for a free slot. With kubernetes.qps it sets the pace of a burst: slots ÷ how long a worker pod lives (docs/benchmarks.md, Sizing; the default kept by the race at 1000 nodes, bench/results/2026-11-29-race.json).',
      1,
      100_000,
    ),
    workers: int(20, 'Reconcile loops working the queue in parallel (one node is never reconciled by two at once). Reconciles mostly wait on the API, so this can exceed the CPU count.', 1, 1000),
    controlRuns: z
      .boolean()
      .default(true)
      .meta({
        description:
          'When most new nodes fail a check against the same target and nothing else says why, run that check once on a node this controller verified before (a short worker pod, the worker\'s image and ServiceAccount, on an open node): passed there, the failures are the new nodes\' own and count; failed there too, or no verified node can run it, they stay inconclusive (docs/troubleshooting.md, Cluster-wide failures). false: such failures stay inconclusive while most recent nodes share them.',
      }),
    clusterDnsService: z
      .string()
      .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$/, 'expected NAMESPACE/NAME of a Service, or ""')
      .default('kube-system/kube-dns')
      .meta({
        description:
          'The cluster DNS Service, as NAMESPACE/NAME. A failed dns check while this Service has no ready endpoint (CoreDNS runs nowhere: a cold start, a broken rollout) is the cluster\'s fault: the attempt is inconclusive, not counted against the node (docs/remediation.md). The controller lists its EndpointSlices (the chart grants that in its namespace). "": no such evidence; failures shared by most nodes still count as cluster-wide.',
      }),
  })
  .strict();

const nodeManagementSchema = z
  .object({
    taints: z
      .array(taint)
      .min(1)
      .default([{ key: 'node-ready/unverified', value: 'true', effect: 'NoSchedule' }])
      .meta({
        description:
          'Verification taints. A node carrying any of them (matched by key and effect) and not verified is verified; on success exactly these taints are removed.',
      }),
    verifiedLabel: z
      .object({
        key: qualifiedName('Label key.').default('node-ready/verified'),
        value: labelValue('Label value.').default('true'),
      })
      .strict()
      .prefault({})
      .meta({ description: 'Label added to a node that passed. Removing it starts a new verification.' }),
    nodeSelector: z
      .string()
      .superRefine((selector, ctx) => {
        const problem = labelSelectorProblem(selector);
        if (problem) ctx.addIssue({ code: 'custom', message: `expected a label selector such as "karpenter.sh/nodepool in (general,gpu)" (${problem})`, input: selector });
      })
      .default('')
      .meta({
        description:
          'Only nodes matching this label selector are watched and verified (the API server filters, so other nodes are not even cached). Empty: all nodes.',
        'x-allowed': 'a label selector ("key", "!key", "key=value", "key!=value", "key in (a,b)", "key notin (a,b)", comma-separated) or ""',
      }),
    failedTaint: z
      .object({
        enabled: z.boolean().default(true).meta({ description: 'Add the taint to a node whose verification failed (retries exhausted).' }),
        key: qualifiedName('Taint key (effect NoSchedule, value "true"). Not under readiness.k8s.io/: Karpenter ignores those on a node that has not initialized (docs/taints.md), so it would keep counting a failed node as capacity.')
          .refine((key) => !key.startsWith('readiness.k8s.io/'), {
            message: 'the failed taint must not be under readiness.k8s.io/: Karpenter treats those as ephemeral and would keep counting the failed node as capacity (docs/taints.md)',
          })
          .default(`${GROUP}/verification-failed`),
      })
      .strict()
      .prefault({})
      .meta({
        description:
          'A taint on failed nodes that is not among a Karpenter NodePool\'s startupTaints: Karpenter then stops counting the node as capacity for pending pods (it ignores startup taints on a node that has not initialized) and launches another node, while the failed one is kept for inspection or remediation. Removed when the node is verified again.',
      }),
    bringUpTimeout: duration(
      '10m',
      'How long after its creation a node may take to become able to run the worker: Ready, no NoSchedule/NoExecute taint the worker does not tolerate (a CNI agent\'s, karpenter.sh/unregistered, the cloud provider\'s), its pod network up. Until then the node waits without using an attempt (condition reason WaitingForNode); after it, it is reported as NodeNotLaunchable (condition, Warning Event). Only remediation.stuckNodeTimeout ever deletes such a node.',
      { min: 1000 },
    ),
    startupTimeout: duration(
      '0',
      'A node still without a verdict (not passed, not failed) this long after its creation ends its verification with onStartupTimeout: it waited too long to become able to run the worker, or for its attempts. Not while the wait is the cluster\'s doing (every verification slot taken, its latest attempt inconclusive). 0: never (the default).',
      { min: 1000, zeroAllowed: true },
    ),
    onStartupTimeout: z
      .enum(['keep', 'open', 'replace'])
      .default('keep')
      .meta({
        description:
          'What a startup timeout does. keep: the node fails (outcome StartupTimeout): it keeps its taint, gets the failed taint, a Warning Event, and the failed-node alert fires; remediation leaves it alone. open: fail open: our verification taints are removed (no verified label, no failed taint), the condition says the node was opened unverified. replace: the node fails as with keep, and remediation deletes it through all its guards (needs deleteFailedNodes).',
      }),
    verifyUntaintedNodes: z
      .boolean()
      .default(false)
      .meta({ description: 'Also verify nodes that never had a verification taint (once; they stay schedulable meanwhile).' }),
    condition: z
      .object({
        enabled: z.boolean().default(true).meta({ description: 'Write the node condition (status.conditions) with the verdict.' }),
        type: qualifiedName('Condition type.').default(`${GROUP}/NetworkVerified`),
      })
      .strict()
      .prefault({})
      .meta({ description: 'Node condition reporting the verification verdict (True / False / Unknown while verifying).' }),
    deleteFailedNodes: z
      .boolean()
      .default(false)
      .meta({ description: 'Delete nodes that exhausted their retries (through their Karpenter NodeClaim when there is one). See nodeManagement.remediation.' }),
    remediation: remediationSchema
      .prefault({})
      .meta({ description: 'Guards for deleteFailedNodes: limits, circuit breaker, minimum age, stuck nodes, dry run (docs/remediation.md).' }),
  })
  .strict();

const leaderElectionSchema = z
  .object({
    enabled: z.boolean().default(true).meta({ description: 'Elect one active replica through a coordination.k8s.io/v1 Lease. Turn off only for a single replica.' }),
    leaseName: dnsSubdomain('Name of the Lease.').default('kube-node-ready-controller'),
    namespace: z
      .string()
      .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$/, 'expected a namespace name or ""')
      .default('')
      .meta({ description: 'Namespace of the Lease. Empty: the controller\'s own namespace (POD_NAMESPACE), else kube-system.' }),
    leaseDuration: duration('15s', 'How long followers wait after the last renewal before taking over.', { min: 1000 }),
    renewDeadline: duration('10s', 'The leader gives up (and exits) when it could not renew for this long. Must be less than leaseDuration.', {
      min: 1000,
    }),
    retryPeriod: duration('2s', 'Interval between acquire / renew tries. renewDeadline must exceed 1.2 x retryPeriod.', { min: 100 }),
  })
  .strict()
  .superRefine((value, ctx) => {
    if (value.renewDeadline >= value.leaseDuration) {
      ctx.addIssue({ code: 'custom', path: ['renewDeadline'], message: 'must be less than leaderElection.leaseDuration', input: value.renewDeadline });
    }
    if (value.renewDeadline <= 1.2 * value.retryPeriod) {
      ctx.addIssue({ code: 'custom', path: ['retryPeriod'], message: 'must be less than leaderElection.renewDeadline / 1.2', input: value.retryPeriod });
    }
  });

// ---------------------------------------------------------------------------------------------
// Profiles

/** The nodes a profile selects. */
export const nodeSelectorSchema = labelSelectorSchema('the node');

/**
 * The same section with every default removed and every field optional: what a profile sets
 * replaces the top-level value, what it leaves out is inherited (config/profiles.ts merges them).
 */
function inheriting(schema: z.ZodType): z.ZodOptional<z.ZodType> {
  let inner: z.ZodType = schema;
  const meta = z.globalRegistry.get(schema);
  while (inner instanceof z.ZodDefault || inner instanceof z.ZodPrefault || inner instanceof z.ZodOptional) inner = inner.unwrap() as z.ZodType;
  if (inner instanceof z.ZodObject) {
    const shape = Object.fromEntries(Object.entries(inner.shape as Record<string, z.ZodType>).map(([key, field]) => [key, inheriting(field)]));
    inner = z.object(shape).strict();
  }
  const { default: _default, ...rest } = (meta ?? {}) as Record<string, unknown>;
  return meta ? inner.optional().meta({ ...rest, description: String(rest['description'] ?? '') }) : inner.optional();
}

/** The settings a profile may set: what can differ between node pools. The rest is the installation's. */
const profileSchema = z
  .object({
    name: dnsLabel('The profile\'s name: in the NodeVerification (`kubectl get nv`), the `profile` label of the metrics, Events and logs. Not "default" (the name of the top-level settings).'),
    nodeSelector: nodeSelectorSchema.meta({
      description: 'The nodes this profile applies to (matchLabels, matchExpressions). The first profile whose selector matches a node applies; an empty selector matches every node.',
    }),
    worker: inheriting(workerSchema.pick({ checks: true, containerChecks: true, timeout: true, scheduleTimeout: true, startTimeout: true, resources: true, tolerations: true })).meta({
      description:
        'worker settings of this profile\'s nodes: checks (its own worker configuration; mappings merge with the top-level one key by key), container checks (the list replaces the top-level one), timeouts, resources, tolerations.',
    }),
    reconciliation: inheriting(reconciliationSchema.pick({ maxRetries: true, initialBackoff: true, maxBackoff: true, backoffFactor: true })).meta({
      description: 'Retries and backoff of this profile\'s nodes.',
    }),
    nodeManagement: inheriting(nodeManagementSchema.pick({ bringUpTimeout: true, startupTimeout: true, onStartupTimeout: true, deleteFailedNodes: true })).meta({
      description:
        'How long this profile\'s nodes may take to become able to run the worker, their startup timeout and its outcome, and whether its failed nodes are deleted (the remediation guards and budget stay the installation\'s).',
    }),
    gates: inheriting(gatesSchema).meta({
      description: 'Readiness gates of this profile\'s nodes: lists replace the top-level ones, requireResources merges with it key by key.',
    }),
  })
  .strict();
export type ProfileConfig = z.output<typeof profileSchema>;

/** The profile of nodes no profile selects: the top-level settings. */
export const DEFAULT_PROFILE = 'default';

/** At most this many profiles: the `profile` label of the metrics stays bounded. */
export const MAX_PROFILES = 20;

const loggingSchema = z
  .object({
    format: z.enum(['json', 'pretty']).default('json').meta({ description: 'json (one object per line) or pretty (for humans).' }),
    level: z
      .enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
      .default('info')
      .meta({ description: 'Minimum level logged.' }),
  })
  .strict();

export const configSchema = z
  .object({
    worker: workerSchema.prefault({}).meta({ description: 'The worker pods that verify a node.' }),
    reconciliation: reconciliationSchema.prefault({}).meta({ description: 'Retries, resync and concurrency.' }),
    nodeManagement: nodeManagementSchema.prefault({}).meta({ description: 'What marks a node for verification and what is written when it passes or fails.' }),
    gates: gatesSchema.prefault({}).meta({
      description:
        'Readiness gates the controller checks itself, with no pod and no attempt used while they wait (docs/gates.md): DaemonSets with a Ready pod on the node, CSI drivers registered in its CSINode, extended resources it advertises. None by default.',
    }),
    leaderElection: leaderElectionSchema.prefault({}).meta({ description: 'Leader election (client-go semantics).' }),
    metrics: z
      .object({
        bindAddress: bindAddress('0.0.0.0:8080', 'Address of the HTTP server: /metrics, and /healthz and /readyz unless health.bindAddress is set.'),
      })
      .strict()
      .prefault({})
      .meta({ description: 'Prometheus metrics (docs/metrics.md).' }),
    health: z
      .object({
        bindAddress: z
          .string()
          .refine((text) => text === '' || port.test(text), 'expected HOST:PORT or ""')
          .default('')
          .meta({ description: 'Separate address for /healthz and /readyz. Empty: served with /metrics.', 'x-allowed': 'HOST:PORT or ""' }),
      })
      .strict()
      .prefault({})
      .meta({ description: 'Health probes.' }),
    logging: loggingSchema.prefault({}).meta({ description: 'Logs (pino).' }),
    kubernetes: z
      .object({
        qps: z
          .number()
          .positive()
          .max(10_000)
          .default(50)
          .meta({
            description:
              'Client-side limit of API requests per second, Events included (they wait behind every other request). A verification that passes at its first attempt takes about 7 requests and no Event; the API server\'s priority and fairness protects it beyond this. The default was kept by the race at 1000 nodes (docs/benchmarks.md; bench/results/2026-11-29-race.json).',
          }),
        burst: z.number().int().min(1).max(10_000).default(100).meta({ description: 'Requests allowed above qps in a burst.' }),
      })
      .strict()
      .prefault({})
      .meta({ description: 'API client.' }),
    profiles: z
      .array(profileSchema)
      .max(MAX_PROFILES)
      .superRefine((profiles, ctx) => {
        const seen = new Set<string>();
        for (const [i, profile] of profiles.entries()) {
          if (profile.name === DEFAULT_PROFILE) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `"${DEFAULT_PROFILE}" names the top-level settings; choose another name`, input: profile.name });
          if (seen.has(profile.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `profile "${profile.name}" is defined twice; names must be unique`, input: profile.name });
          seen.add(profile.name);
        }
      })
      .default([])
      .meta({
        description:
          'Per-pool settings (docs/profiles.md). The first profile whose nodeSelector matches a node applies to it: its settings replace the top-level ones it names, mappings merge key by key, lists replace. Nodes no profile selects use the top-level settings (profile "default").',
      }),
    dryRun: z
      .boolean()
      .default(false)
      .meta({ description: 'Launch workers and report outcomes (logs, Events, metrics) but write nothing to Nodes. Progress is then kept in memory only.' }),
  })
  .strict();

/** What users write (durations as strings, everything optional). */
export type ControllerConfigInput = z.input<typeof configSchema>;
/** What the controller uses: every field present, durations in milliseconds. */
export type ControllerConfig = z.output<typeof configSchema>;
export type WorkerConfig = ControllerConfig['worker'];
export type TaintConfig = ControllerConfig['nodeManagement']['taints'][number];
export type TolerationConfig = WorkerConfig['tolerations'][number];

/**
 * Keys of the earlier Go implementation's configuration and what replaced them, so an old
 * ConfigMap fails with a pointer instead of a bare "unknown key".
 */
export const RENAMED_KEYS: Readonly<Record<string, string>> = {
  'worker.timeoutSeconds': 'use worker.timeout, a duration such as "300s"',
  'worker.checkTimeoutSeconds': 'per-check timeouts live in worker.checks (docs/worker.md)',
  'worker.dnsTestDomains': 'DNS names live in worker.checks (docs/worker.md)',
  'reconciliation.intervalSeconds': 'use reconciliation.resyncInterval, a duration such as "30s"',
  'reconciliation.retryBackoff': 'backoff is always exponential: use reconciliation.initialBackoff, maxBackoff and backoffFactor',
  taintKey: 'use nodeManagement.taints: [{key, value, effect}]',
  taintValue: 'use nodeManagement.taints: [{key, value, effect}]',
  taintEffect: 'use nodeManagement.taints: [{key, value, effect}]',
};

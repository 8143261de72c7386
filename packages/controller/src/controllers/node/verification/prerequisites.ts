import type { Logger } from '@kube-node-ready/core';
import { NodeVerificationApi } from '../../../api/nodeverification.js';
import type { ControllerConfig } from '../../../config/schema.js';
import { messageOf, statusCode } from '../../../kube/errors.js';
import { apiPath } from '../../../kube/lean.js';

/**
 * The start-up check of what the worker pods need and the controller does not create: the worker
 * namespace, the worker ServiceAccount, the PriorityClass and (unless in dry run) the
 * NodeVerification CRD. The Helm chart creates them all. Started another way without them, the
 * controller would say so only later and piecemeal: a missing ServiceAccount or PriorityClass gets
 * every worker pod refused (per-node Events), a missing namespace or CRD stops it with an API error.
 * Everything missing is logged first, in one line, with the command that creates each. The check
 * itself stops nothing: the objects may be created a moment later, in any order.
 */

/** What the check needs from the API client (KubeClient.exists). */
export interface PrerequisiteReads {
  /** GET `path`: true when the API server answers, false on 404; any other failure is thrown. */
  exists(operation: string, path: string, query?: Readonly<Record<string, string | number>>): Promise<boolean>;
}

export interface Prerequisite {
  /** What it is, as the message names it: `namespace "kube-system"`. */
  what: string;
  /** The API call (its metric label). */
  operation: string;
  path: string;
  query?: Readonly<Record<string, string | number>>;
  /** The command that creates it. */
  create: string;
}

export type Finding =
  | { prerequisite: Prerequisite; state: 'present' | 'missing' }
  /** The controller may not read it (403): neither present nor missing. */
  | { prerequisite: Prerequisite; state: 'forbidden' }
  /** The read failed otherwise (after the client's retries). */
  | { prerequisite: Prerequisite; state: 'unknown'; error: string };

/**
 * The chart's worker PriorityClass (templates/priorityclass.yaml, values workerPriorityClass.value),
 * so a class created by hand behaves as the chart's: not preempted before ordinary pods, never
 * preempting a workload itself. prerequisites.test.ts holds the two in step.
 */
export const WORKER_PRIORITY_CLASS = {
  value: 1_000_000_000,
  preemptionPolicy: 'Never',
  description: 'kube-node-ready worker pods: verified before any workload runs on a new node; never preempt workloads.',
} as const;

/** The CRD's manifest in a checkout of the repository (and in the chart: `helm show crds`). */
export const CRD_DIRECTORY = 'deploy/helm/kube-node-ready/crds/';

/** The anchor of the troubleshooting entry the message points to. */
export const TROUBLESHOOTING = 'docs/troubleshooting.md#the-controller-warns-worker-prerequisites-missing';

/** The prerequisites of this configuration, in the order the message lists them. */
export function workerPrerequisites(config: Readonly<ControllerConfig>): Prerequisite[] {
  const { namespace, serviceAccountName: sa, priorityClassName: pc } = config.worker;
  const list: Prerequisite[] = [
    { what: `namespace "${namespace}"`, operation: 'get namespace', path: apiPath('api/v1/namespaces', namespace), create: `kubectl create namespace ${namespace}` },
    {
      what: `ServiceAccount "${namespace}/${sa}"`,
      operation: 'get serviceaccount',
      path: apiPath('api/v1/namespaces', namespace, 'serviceaccounts', sa),
      create: `kubectl -n ${namespace} create serviceaccount ${sa}`,
    },
  ];
  // An empty name: the worker pods name no class, so there is none to need.
  if (pc) {
    const { value, preemptionPolicy, description } = WORKER_PRIORITY_CLASS;
    list.push({
      what: `PriorityClass "${pc}"`,
      operation: 'get priorityclass',
      path: apiPath('apis/scheduling.k8s.io/v1/priorityclasses', pc),
      create: `kubectl create priorityclass ${pc} --value=${value} --preemption-policy=${preemptionPolicy} --description="${description}"`,
    });
  }
  // A dry run keeps progress in memory and never reads or writes a NodeVerification.
  if (!config.dryRun) {
    const { plural, group } = NodeVerificationApi;
    list.push({
      what: `the NodeVerification CRD (${plural}.${group})`,
      operation: 'list nodeverifications',
      // The collection answers 404 while the CRD is not served; limit=1 keeps the answer small.
      path: NodeVerificationApi.path,
      query: { limit: 1 },
      create: `kubectl apply --server-side -f ${CRD_DIRECTORY}`,
    });
  }
  return list;
}

/** Reads each prerequisite once, all at once; never throws. */
export async function findPrerequisites(kube: PrerequisiteReads, prerequisites: readonly Prerequisite[]): Promise<Finding[]> {
  return Promise.all(
    prerequisites.map(async (prerequisite): Promise<Finding> => {
      try {
        return { prerequisite, state: (await kube.exists(prerequisite.operation, prerequisite.path, prerequisite.query)) ? 'present' : 'missing' };
      } catch (err) {
        if (statusCode(err) === 403) return { prerequisite, state: 'forbidden' };
        return { prerequisite, state: 'unknown', error: messageOf(err) };
      }
    }),
  );
}

export interface Report {
  level: 'warn' | 'info';
  message: string;
}

/**
 * The one line that reports the findings, or undefined when everything is there. A warning when
 * something is missing or could not be read; only forbidden reads are information: the chart's
 * RBAC grants no read of namespaces, ServiceAccounts or PriorityClasses (the chart creates them),
 * so a controller installed by the chart cannot check them and is not wrong to start.
 */
export function describeFindings(findings: readonly Finding[]): Report | undefined {
  const missing = findings.filter((f) => f.state === 'missing');
  const unchecked = findings.filter((f) => f.state === 'forbidden' || f.state === 'unknown');
  if (missing.length === 0 && unchecked.length === 0) return undefined;
  const cannot = unchecked.map((f) => `${f.prerequisite.what} (${f.state === 'unknown' ? f.error : 'forbidden'})`).join(', ');
  if (missing.length === 0) {
    const level = unchecked.some((f) => f.state === 'unknown') ? 'warn' : 'info';
    return { level, message: `worker prerequisites: cannot check ${cannot}` };
  }
  const parts = [
    `worker prerequisites missing: ${missing.map((f) => `${f.prerequisite.what}: create it with \`${f.prerequisite.create}\``).join('; ')}`,
    ...(cannot ? [`Cannot check ${cannot}`] : []),
    `No node is verified until they exist; the Helm chart creates them all (${TROUBLESHOOTING})`,
  ];
  return { level: 'warn', message: parts.join('. ') };
}

/** Reads the prerequisites of `config` and logs what is missing in one line. Never throws. */
export async function checkWorkerPrerequisites(kube: PrerequisiteReads, config: Readonly<ControllerConfig>, log: Logger): Promise<Finding[]> {
  const findings = await findPrerequisites(kube, workerPrerequisites(config));
  const report = describeFindings(findings);
  if (report) log[report.level](report.message);
  else log.debug('worker prerequisites present');
  return findings;
}

/**
 * Reasons of the Kubernetes Events this controller emits, on the Node (`kubectl describe node`).
 * One constant each; docs/architecture.md lists them with their meaning.
 */
export const EventType = { Normal: 'Normal', Warning: 'Warning' } as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

export const Reason = {
  /** A worker attempt started (message: attempt n of m, pod name). */
  VerificationStarted: 'VerificationStarted',
  /** Every check passed; the taint was removed and the verified label added. */
  VerificationPassed: 'VerificationPassed',
  /** The worker ran and named failed checks. */
  VerificationChecksFailed: 'VerificationChecksFailed',
  /** The worker could not run its checks (config / internal error, crash, unreadable summary). */
  VerificationWorkerError: 'VerificationWorkerError',
  /** The worker pod was not scheduled within worker.scheduleTimeout. */
  VerificationWorkerNotScheduled: 'VerificationWorkerNotScheduled',
  /** The worker container did not start within worker.startTimeout. */
  VerificationWorkerNotStarted: 'VerificationWorkerNotStarted',
  /** The worker ran past its deadline. */
  VerificationDeadlineExceeded: 'VerificationDeadlineExceeded',
  /** The worker pod was deleted or evicted before reporting. */
  VerificationWorkerPodDeleted: 'VerificationWorkerPodDeleted',
  /** The worker reported warnings (findings that do not fail the node, e.g. a slow nameserver): one per attempt, naming each check and finding. */
  VerificationWarning: 'VerificationWarning',
  /** An attempt failed the way most recent nodes fail (cluster-wide fault): not counted against the node, tried again later. */
  VerificationInconclusive: 'VerificationInconclusive',
  /** Retries exhausted: the node stays tainted and is marked failed. */
  VerificationFailed: 'VerificationFailed',
  /** No verdict within nodeManagement.startupTimeout: the node keeps its taint, is opened unverified, or goes to remediation (onStartupTimeout). */
  VerificationStartupTimeout: 'VerificationStartupTimeout',
  /** The node cannot run the worker yet (NotReady, another startup taint): once per node, naming what it waits for. */
  VerificationWaitingForNode: 'VerificationWaitingForNode',
  /** Still not able to run the worker nodeManagement.bringUpTimeout after its creation: once per node. */
  NodeNotLaunchable: 'NodeNotLaunchable',
  /** The node's readiness gates (config gates) do not hold: once per node and wait, naming what they wait for. */
  VerificationWaitingForGates: 'VerificationWaitingForGates',
  /** The readiness gates still do not hold nodeManagement.bringUpTimeout after the node's creation (no attempt started): once per node. */
  GatesNotReady: 'GatesNotReady',
  /** The API server refused the worker pod (admission, quota, Pod Security): once per node and message; not an attempt. */
  WorkerPodRefused: 'WorkerPodRefused',
  /** The node's operating system is not Linux (a Windows node): no worker is ever launched; once per node. */
  NodeOSUnsupported: 'NodeOSUnsupported',
  /** Passed, but waiting for karpenter.sh/registered=true before removing the taint. */
  AwaitingKarpenterRegistration: 'AwaitingKarpenterRegistration',
  /** Dry run: the node passed and would have been opened. */
  DryRunWouldOpenNode: 'DryRunWouldOpenNode',

  // Remediation (docs/remediation.md).
  /** The failed node's NodeClaim was deleted: Karpenter drains the node and terminates the instance. */
  RemediationNodeClaimDeleted: 'RemediationNodeClaimDeleted',
  /** The failed node's Node object was deleted (no NodeClaim): the machine may keep running. */
  RemediationNodeDeleted: 'RemediationNodeDeleted',
  /** A guard keeps this node (control plane, opt-out, do-not-disrupt, too young...). */
  RemediationSkipped: 'RemediationSkipped',
  /** Deletions held back: circuit breaker, in-flight or hourly limit (retried automatically). */
  RemediationBlocked: 'RemediationBlocked',
  /** Remediation dry run: the node would have been deleted. */
  RemediationDryRun: 'RemediationDryRun',
  /** The lookup or the delete failed; retried. */
  RemediationFailed: 'RemediationFailed',
  /** A deletion was issued remediation.inFlightTimeout ago and the node still exists. */
  RemediationStalled: 'RemediationStalled',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

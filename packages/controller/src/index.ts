/**
 * @kube-node-ready/controller: the controller half of kube-node-ready.
 * The CLI calls runController(); the `verify` and `status` commands use the names and helpers below.
 */
export { runController, CONTROLLER_USAGE, type RunIO } from './main.js';
export { startController, type ControllerOptions, type RunningController } from './controllers.js';
export { loadConfig, parseConfig, type ConfigOverrides } from './config/load.js';
export { configSchema, type ControllerConfig, type ControllerConfigInput } from './config/schema.js';
export { renderConfigDocs } from './config/docs.js';
export { PodAnnotation, PodLabel, PodLabelValue, GROUP, FIELD_MANAGER } from './api/well-known.js';
export {
  NodeVerificationApi,
  INSTALLATION_LABEL,
  installationOf,
  VERIFIED_CONDITION,
  newNodeVerification,
  parseStatus,
  stateOf,
  statusOf,
  type NodeVerification,
  type NodeVerificationStatus,
  type StateRead,
} from './api/nodeverification.js';
export { Outcome, Phase, type VerificationState, type AttemptResult } from './controllers/node/verification/types.js';
export { workerPodName, nodeLabelValue } from './controllers/node/verification/naming.js';
export { WORKER_POD_SELECTOR, workerNodeName } from './controllers/node/verification/pod-spec.js';
export { podAttempt } from './controllers/node/verification/decide.js';
export { Reason as EventReason } from './events/reasons.js';
export { MetricName } from './metrics/names.js';
export { runAgent, AGENT_USAGE } from './agent/main.js';
export { PooledKubeConfig } from './kube/config.js';

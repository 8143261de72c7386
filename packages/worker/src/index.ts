export { runWorker, runChecks, CHECKS, type WorkerIo } from './run.js';
export {
  CHECK_NAMES,
  loadWorkerConfig,
  workerConfigSchema,
  type CheckName,
  type CommandLine,
  type WorkerConfig,
  type WorkerSettings,
  type WorkerSettingsInput,
} from './config.js';
export type { CheckResult } from './checks/types.js';

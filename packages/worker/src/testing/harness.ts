import { silentLogger } from '@kube-node-ready/core';
import { loadWorkerConfig, type WorkerConfig } from '../config.js';
import { CHECKS, runChecks, type CheckOutcome } from '../run.js';
import { startFakeApi, type FakeApi } from './fake-api.js';
import { makePki, writeServiceAccount, type TestPki } from './pki.js';

export const TOKEN = 'test-token-0123456789';

/** A fake API server with its PKI and a service-account directory, and the env a pod would get. */
export interface TestCluster {
  pki: TestPki;
  api: FakeApi;
  saDir: string;
  env: NodeJS.ProcessEnv;
  close(): Promise<void>;
}

export async function startTestCluster(opts: { saCa?: 'right' | 'wrong'; token?: string } = {}): Promise<TestCluster> {
  const pki = makePki();
  const api = await startFakeApi(pki, TOKEN);
  const sa = writeServiceAccount(opts.saCa === 'wrong' ? pki.otherCa : pki.ca, opts.token ?? TOKEN);
  return {
    pki,
    api,
    saDir: sa.dir,
    env: {
      KUBERNETES_SERVICE_HOST: api.host,
      KUBERNETES_SERVICE_PORT: String(api.port),
      KNR_SERVICEACCOUNT_DIR: sa.dir,
      KNR_RESOLV_CONF: '/nonexistent/resolv.conf',
      NODE_NAME: 'node-a',
    },
    close: async () => {
      sa.cleanup();
      await api.close();
    },
  };
}

export function configOf(argv: string[], env: NodeJS.ProcessEnv = {}): WorkerConfig {
  const command = loadWorkerConfig(argv, env);
  if (command.kind !== 'run') throw new Error(`expected a run, got ${command.kind}`);
  return command.config;
}

/** Runs the real checks for `argv` and returns the outcome of `check`. */
export async function runCheck(check: string, argv: string[], env: NodeJS.ProcessEnv = {}): Promise<CheckOutcome> {
  const { outcomes } = await runChecks(configOf(['--checks', check, ...argv], env), silentLogger(), CHECKS);
  const outcome = outcomes.find((o) => o.name === check);
  if (!outcome) throw new Error(`no outcome for ${check}`);
  return outcome;
}

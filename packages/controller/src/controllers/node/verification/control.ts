import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '@kube-node-ready/core';
import { errorMessage } from '@kube-node-ready/core';
import { GROUP } from '../../../api/well-known.js';
import type { Clock } from '../../../clock.js';
import { Profiles } from '../../../config/profiles.js';
import { DEFAULT_PROFILE, type ControllerConfig, type WorkerConfig } from '../../../config/schema.js';
import type { KubeClient } from '../../../kube/client.js';
import { isRefusal, messageOf } from '../../../kube/errors.js';
import { stripObject } from '../../../kube/informer.js';
import { label, nodeName } from '../../../kube/objects.js';
import { isVerified, launchBlockers, unsupportedOS } from './decide.js';
import { shortHash } from './naming.js';
import { evaluateWorkerPod } from './pod-result.js';
import { buildWorkerPod } from './pod-spec.js';
import type { WorkerConfigMap } from './worker-config.js';
import type { StateRead } from './store.js';
import { Outcome } from './types.js';

/**
 * Control runs: the checks a few new nodes fail alike, run again on a node this controller has
 * verified (it passed them before, and has workloads on it now). When most recent nodes fail a
 * check against the same target, the cause may be outside the nodes (the dependency is down for
 * everyone) or in them (a bad batch: an AMI, a subnet). Counting cannot tell the two apart at the
 * tail of a burst (the nodes still failing are most of those failing *now*), and the safe answer
 * (inconclusive) then holds a broken node for good. A control run can: passed on an open node, the
 * target works and the failure is the new nodes' own; failed there too, it is the cluster's.
 *
 * One run at a time per set of checks, on the most recently verified eligible node (the same zone
 * as the failing node first). Its answer holds for CONTROL_VALID_MS after it finished; nodes whose
 * attempt waits for it are judged when it ends. The pod is a worker pod (the same image,
 * ServiceAccount and admission policy) with only those checks, owned by the node it runs on,
 * labelled `kube-node-ready.io/control`, and without the node-name annotation, so the
 * verification of that node never takes it for its own worker. Deleted once read.
 */

/** Label on control pods (value: the check set, `dns` or `dns.tcp`). */
export const CONTROL_LABEL = `${GROUP}/control`;
/** Annotation on control pods: the node whose failure started it. */
export const CONTROL_FOR_ANNOTATION = `${GROUP}/control-for`;
/** How long a finished control run answers for later failures of the same checks. */
export const CONTROL_VALID_MS = 60_000;
/** How long a created control pod may be missing from the pod cache before it is read live. */
const CACHE_GRACE_MS = 5_000;
const ZONE_LABEL = 'topology.kubernetes.io/zone';

export type ControlVerdict =
  /** The control node passed every one of the checks: the failure is the failing node's own. */
  | { kind: 'passed'; node: string; checks: readonly string[] }
  /** The control node failed one of them too: the cause is outside the failing node. */
  | { kind: 'failed'; node: string; checks: readonly string[]; message: string }
  /** A run is under way; ask again later. */
  | { kind: 'pending'; node: string }
  /** No answer (no eligible node, the pod was refused, did not run or report): nothing is learnt. */
  | { kind: 'unavailable'; why: string };

export interface ControlRunsDeps {
  config: ControllerConfig;
  clock: Pick<Clock, 'now'>;
  log: Logger;
  kube: Pick<KubeClient, 'createPod' | 'getPod' | 'deletePod'>;
  /** The node informer's cache. */
  nodes: { list(): readonly V1Node[]; get(name: string): V1Node | undefined };
  /** The nodes' verification progress (when each passed). */
  progress: { read(node: V1Node): StateRead };
  /** The worker pod informer's cache (control pods carry the worker labels, so they are in it). */
  pods: { list(): readonly V1Pod[]; get(name: string, namespace?: string): V1Pod | undefined };
  worker: { image: string; configs: Pick<WorkerConfigMap, 'of'>; apiEndpoints?: () => readonly string[] };
  /** A control run ended (passed | failed | unavailable), for the metric. */
  observed?: (result: 'passed' | 'failed' | 'unavailable') => void;
}

interface Run {
  key: string;
  checks: readonly string[];
  node: string;
  pod: string;
  startedAt: number;
  /** The worker settings it runs with: the failing node's profile's. */
  worker: WorkerConfig;
  /** Set once the run ended; then the verdict it gave. */
  verdict?: Exclude<ControlVerdict, { kind: 'pending' }>;
  endedAt?: number;
}

export class ControlRuns {
  private readonly runs = new Map<string, Run>();

  private readonly profiles: Profiles;

  constructor(private readonly deps: ControlRunsDeps) {
    this.profiles = new Profiles(deps.config);
  }

  /**
   * What a control run says about `checks` failing on `failing` now: a fresh answer, or a run
   * started (pending). Safe to call from parallel reconciles: the run is registered before any await.
   */
  async verdict(checks: readonly string[], failing: V1Node): Promise<ControlVerdict> {
    const sorted = [...new Set(checks)].sort();
    // The checks run with the failing node's profile's settings (their targets): one run per profile.
    const profile = this.profiles.of(failing);
    const key = profile.name === DEFAULT_PROFILE ? sorted.join('.') : `${profile.name}.${sorted.join('.')}`.slice(0, 63).replace(/[^a-z0-9]+$/, '');
    const now = this.deps.clock.now();
    const run = this.runs.get(key);
    if (run?.verdict && run.endedAt !== undefined && now - run.endedAt <= CONTROL_VALID_MS) return run.verdict;
    if (run && !run.verdict) return this.poll(run);
    return this.start(key, sorted, failing);
  }

  /** Control pods nobody waits for (a previous leader's, or this one's after a failed delete). */
  async sweep(): Promise<void> {
    const current = new Set([...this.runs.values()].filter((r) => !r.verdict).map((r) => r.pod));
    for (const pod of this.deps.pods.list()) {
      const name = pod.metadata?.name ?? '';
      if (!isControlPod(pod) || current.has(name) || pod.metadata?.deletionTimestamp) continue;
      await this.delete(name);
    }
  }

  private async start(key: string, checks: readonly string[], failing: V1Node): Promise<ControlVerdict> {
    const { clock, kube, log, worker } = this.deps;
    const profile = this.profiles.of(failing);
    const node = this.pick(failing);
    if (!node) return this.end({ key, checks, node: '', pod: '', startedAt: clock.now(), worker: profile.config.worker }, { kind: 'unavailable', why: 'no verified node can run one now: none is Ready, schedulable and free of taints the worker does not tolerate' }, false);
    const now = clock.now();
    const name = nodeName(node);
    const pod = controlPodName(key, name, now);
    const run: Run = { key, checks, node: name, pod, startedAt: now, worker: profile.config.worker };
    this.runs.set(key, run);
    const checksConfig = worker.configs.of(profile.name);
    const spec = buildWorkerPod({
      node,
      attempt: 1,
      podName: pod,
      config: profile.config,
      image: worker.image,
      configKey: checksConfig.key,
      configHash: checksConfig.hash,
      apiEndpoints: worker.apiEndpoints?.() ?? [],
    });
    const container = spec.spec!.containers[0]!;
    container.args = [...(container.args ?? []), '--checks', checks.join(',')];
    spec.metadata!.labels = { ...spec.metadata!.labels, [CONTROL_LABEL]: key };
    // Not the node's worker: without the node-name annotation the verification of `name` ignores it.
    spec.metadata!.annotations = { [CONTROL_FOR_ANNOTATION]: nodeName(failing) };
    try {
      await this.sweep();
      await kube.createPod(spec);
    } catch (err) {
      const refused = isRefusal(err);
      const why = refused ? `the API server refused the control pod: ${messageOf(err)}` : `the control pod could not be created: ${errorMessage(err)}`;
      return this.end(run, { kind: 'unavailable', why }, !refused);
    }
    log.info({ pod, node: name, checks, for: nodeName(failing) }, 'control run: the checks most new nodes fail, run on a verified node');
    return { kind: 'pending', node: name };
  }

  private async poll(run: Run): Promise<ControlVerdict> {
    const { clock, config, kube } = this.deps;
    const now = clock.now();
    let pod: V1Pod | undefined = this.deps.pods.get(run.pod, config.worker.namespace);
    if (!pod && now - run.startedAt >= CACHE_GRACE_MS) {
      const live = await kube.getPod(config.worker.namespace, run.pod);
      if (!live) return this.end(run, { kind: 'unavailable', why: `the control pod ${run.pod} is gone` });
      pod = stripObject(live);
    }
    if (!pod) return { kind: 'pending', node: run.node };
    const progress = evaluateWorkerPod(pod, now, run.worker, this.deps.nodes.get(run.node)?.spec?.taints ?? []);
    if (!progress.done) return { kind: 'pending', node: run.node };
    const { result } = progress;
    if (result.outcome !== Outcome.Passed && result.outcome !== Outcome.ChecksFailed) {
      return this.end(run, { kind: 'unavailable', why: `the control run on ${run.node} gave no answer (${result.outcome}: ${result.message})` });
    }
    const failed = run.checks.filter((c) => !result.checks.some((s) => s.name === c && s.ok));
    if (failed.length === 0) return this.end(run, { kind: 'passed', node: run.node, checks: run.checks });
    return this.end(run, { kind: 'failed', node: run.node, checks: failed, message: result.message });
  }

  private async end(run: Run, verdict: Exclude<ControlVerdict, { kind: 'pending' }>, created = true): Promise<ControlVerdict> {
    // Two reconciles polling the same run (both waited on a live read) end it once.
    if (run.verdict) return run.verdict;
    run.verdict = verdict;
    run.endedAt = this.deps.clock.now();
    this.runs.set(run.key, run);
    this.deps.observed?.(verdict.kind);
    const fields = { pod: run.pod || undefined, node: run.node || undefined, checks: run.checks };
    if (verdict.kind === 'unavailable') this.deps.log.warn({ ...fields, why: verdict.why }, 'control run: no answer; failures most new nodes share stay inconclusive');
    else this.deps.log.info({ ...fields, result: verdict.kind, ...(verdict.kind === 'failed' ? { message: verdict.message } : {}) }, verdict.kind === 'passed' ? 'control run passed: the failing nodes\' failures are their own' : 'control run failed too: the cause is outside the failing nodes');
    if (created && run.pod) await this.delete(run.pod);
    return verdict;
  }

  private async delete(pod: string): Promise<void> {
    try {
      await this.deps.kube.deletePod(this.deps.config.worker.namespace, pod);
    } catch (err) {
      this.deps.log.warn({ pod, err: errorMessage(err) }, 'could not delete a control pod; tried again at the next control run');
    }
  }

  /** The most recently verified node the worker can run on now, in the failing node's zone if there is one. */
  private pick(failing: V1Node): V1Node | undefined {
    const { config } = this.deps;
    const eligible = this.deps.nodes
      .list()
      // A cordoned node carries node.kubernetes.io/unschedulable, which launchBlockers names.
      .filter((n) => isVerified(n, config) && !n.metadata?.deletionTimestamp && unsupportedOS(n) === undefined && launchBlockers(n, config).length === 0);
    const zone = label(failing, ZONE_LABEL);
    const verifiedAt = (n: V1Node): number => {
      const read = this.deps.progress.read(n);
      return read.kind === 'ok' ? (read.state.verifiedAt ?? 0) : 0;
    };
    const order = (a: V1Node, b: V1Node) => Number(label(b, ZONE_LABEL) === zone && zone !== undefined) - Number(label(a, ZONE_LABEL) === zone && zone !== undefined) || verifiedAt(b) - verifiedAt(a) || nodeName(a).localeCompare(nodeName(b));
    return eligible.sort(order)[0];
  }
}

/** `knr-control-<checks>-<hash>`: one name per run (the checks, the node and the start). */
function controlPodName(key: string, node: string, at: number): string {
  return `knr-control-${key.replace(/[^a-z0-9]/g, '-').slice(0, 30)}-${shortHash(`${key}/${node}/${at}`, 10)}`;
}

/** True for the pods ControlRuns creates (not a node's own worker). */
export function isControlPod(pod: V1Pod): boolean {
  return label(pod, CONTROL_LABEL) !== undefined;
}

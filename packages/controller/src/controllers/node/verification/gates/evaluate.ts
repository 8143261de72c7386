import type { V1DaemonSet, V1Node, V1Pod, V1Taint } from '@kubernetes/client-node';
import { selectorMatcher } from '../../../../config/profiles.js';
import { formatTaint } from '../taints.js';
import type { DaemonSetRef, GatesConfig } from './config.js';
import { daemonSetPlacement } from './placement.js';
import { compareQuantities, parseQuantity } from './quantity.js';

/**
 * The readiness gates of a node (config gates.*), judged from the caches, without I/O: whether they
 * all hold, and if not, what the node waits for, one short line each (for the condition message,
 * a log line, an Event).
 */

/** What the gates read, from the caches sources.ts keeps. */
export interface GateInputs {
  /** The DaemonSets of a namespace; undefined while they have not been listed (or the namespace is not watched). */
  daemonSets(namespace: string): readonly V1DaemonSet[] | undefined;
  /** The pods on `node` that `ds` controls; undefined while its pods have not been listed. */
  daemonSetPods(ds: V1DaemonSet, node: string): readonly V1Pod[] | undefined;
  /** The CSI drivers registered in the node's CSINode; undefined when it has none (yet). */
  csiDrivers(node: string): readonly string[] | undefined;
}

export interface GateVerdict {
  /** Every gate holds: nothing to wait for. */
  held: boolean;
  /** What the node waits for, one line each: `DaemonSet kube-system/aws-node: no pod on the node yet`. */
  waitingFor: string[];
  /**
   * Required DaemonSets that are not waited for on this node, and why: one that does not tolerate
   * the verification taint can only run once the node is open, so waiting for it would keep the node
   * closed for ever; one that does not tolerate another of its taints does not run there now (it is
   * waited for once that taint goes, if the node is still closed); a DaemonSet named in the
   * configuration that does not select the node. For a debug log line, or an Event.
   */
  notAwaited: string[];
}

/** The gates of `gates` on `node`. `verificationTaints`: our taints (matched by key and effect), which a required DaemonSet must tolerate to be waited for. */
export function evaluateGates(
  node: V1Node,
  gates: Pick<GatesConfig, 'requireDaemonSets' | 'requireCSIDrivers' | 'requireResources'>,
  inputs: GateInputs,
  verificationTaints: ReadonlyArray<Pick<V1Taint, 'key' | 'effect'>>,
): GateVerdict {
  const waitingFor: string[] = [];
  const notAwaited: string[] = [];
  const name = node.metadata?.name ?? '';

  // DaemonSets: each that would run on the node has a Ready pod there.
  const required = requiredDaemonSets(gates.requireDaemonSets, inputs);
  for (const namespace of required.unlisted) waitingFor.push(`DaemonSets in ${namespace}: not listed yet`);
  for (const ref of required.missing) waitingFor.push(`DaemonSet ${ref}: not found`);
  for (const { ds, named } of required.found) {
    const ref = dsRef(ds);
    const placement = daemonSetPlacement(node, ds);
    if (!placement.runs) {
      if (placement.why === 'untolerated') {
        const ours = placement.taints.filter((t) => verificationTaints.some((v) => v.key === t.key && v.effect === t.effect));
        notAwaited.push(
          ours.length > 0
            ? `DaemonSet ${ref}: not awaited: it does not tolerate the verification taint ${ours.map(formatTaint).join(', ')}, so it can only run once the node is open`
            : `DaemonSet ${ref}: not awaited: it does not tolerate the node's taint ${placement.taints.map(formatTaint).join(', ')}`,
        );
      } else if (named) notAwaited.push(`DaemonSet ${ref}: not awaited: it does not select this node (nodeName, nodeSelector or node affinity)`);
      continue;
    }
    const pods = inputs.daemonSetPods(ds, name);
    if (pods === undefined) {
      waitingFor.push(`DaemonSet ${ref}: its pods not listed yet`);
      continue;
    }
    const current = pods.filter((p) => !p.metadata?.deletionTimestamp);
    if (current.some(isPodReady)) continue;
    const pod = current[0];
    waitingFor.push(pod ? `DaemonSet ${ref}: pod ${pod.metadata?.name ?? ''} not Ready (${podState(pod)})` : `DaemonSet ${ref}: no pod on the node yet`);
  }

  // CSI drivers registered in the node's CSINode.
  const drivers = inputs.csiDrivers(name);
  for (const driver of gates.requireCSIDrivers) {
    if (drivers === undefined) waitingFor.push(`CSI driver ${driver} not registered (the node has no CSINode yet)`);
    else if (!drivers.includes(driver)) waitingFor.push(`CSI driver ${driver} not registered in CSINode`);
  }

  // Allocatable resources, at least the quantities asked for.
  const allocatable = node.status?.allocatable ?? {};
  for (const [resource, minimum] of Object.entries(gates.requireResources)) {
    const have = allocatable[resource];
    const need = parseQuantity(minimum);
    const got = have === undefined ? undefined : parseQuantity(have);
    if (need === undefined || got === undefined || compareQuantities(got, need) < 0) waitingFor.push(`allocatable ${resource}: ${have ?? 'none'}, need ${minimum}`);
  }

  return { held: waitingFor.length === 0, waitingFor, notAwaited };
}

export interface RequiredDaemonSets {
  /** Each DaemonSet once; `named`: a {namespace, name} entry asks for it (else only a selector). */
  found: Array<{ ds: V1DaemonSet; named: boolean }>;
  /** namespace/name of named DaemonSets that do not exist. */
  missing: string[];
  /** Namespaces whose DaemonSets have not been listed. */
  unlisted: string[];
}

/** The DaemonSets `refs` name or select, as the caches have them now. */
export function requiredDaemonSets(refs: readonly DaemonSetRef[], inputs: Pick<GateInputs, 'daemonSets'>): RequiredDaemonSets {
  const found = new Map<string, { ds: V1DaemonSet; named: boolean }>();
  const missing: string[] = [];
  const unlisted = new Set<string>();
  for (const ref of refs) {
    const all = inputs.daemonSets(ref.namespace);
    if (all === undefined) {
      unlisted.add(ref.namespace);
      continue;
    }
    if (ref.name !== undefined) {
      const ds = all.find((d) => d.metadata?.name === ref.name);
      if (ds) found.set(dsRef(ds), { ds, named: true });
      else missing.push(`${ref.namespace}/${ref.name}`);
      continue;
    }
    const matches = selectorMatcher(ref.selector ?? {});
    for (const ds of all) {
      if (!matches(ds.metadata?.labels ?? {})) continue;
      const key = dsRef(ds);
      found.set(key, { ds, named: found.get(key)?.named ?? false });
    }
  }
  return { found: [...found.values()], missing: [...new Set(missing)], unlisted: [...unlisted] };
}

/** The node's allocatable quantities of `resources` (what the node cache and its fingerprint must keep for the resource gate). */
export function gatedAllocatable(node: V1Node, resources: Iterable<string>): Record<string, string> {
  const allocatable = node.status?.allocatable ?? {};
  const out: Record<string, string> = {};
  for (const resource of resources) {
    const value = allocatable[resource];
    if (value !== undefined) out[resource] = value;
  }
  return out;
}

/** podutil.IsPodReady: the Ready condition is True. */
export function isPodReady(pod: V1Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

function podState(pod: V1Pod): string {
  const ready = (pod.status?.conditions ?? []).find((c) => c.type === 'Ready');
  return [pod.status?.phase ?? 'Pending', ready?.reason].filter(Boolean).join(', ');
}

function dsRef(ds: V1DaemonSet): string {
  return `${ds.metadata?.namespace ?? ''}/${ds.metadata?.name ?? ''}`;
}

import type { V1DaemonSet, V1Node, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1PodSpec, V1Taint, V1Toleration } from '@kubernetes/client-node';
import { tolerates } from '../taints.js';

/**
 * Whether a DaemonSet would run a pod on a node, as the DaemonSet controller decides it
 * (k8s.io/kubernetes pkg/controller/daemon NodeShouldRunDaemonPod, v1.36): the pod template's
 * nodeName, its required node affinity (nodeSelector and requiredDuringScheduling node selector
 * terms, component-helpers scheduling/corev1/nodeaffinity), and its tolerations, with the ones the
 * controller adds to every DaemonSet pod (daemon/util AddOrUpdateDaemonPodTolerations), against the
 * node's NoSchedule and NoExecute taints. Pure.
 */
export type Placement =
  | { runs: true }
  /** The template names another node, or its node selector or required affinity does not select this one. */
  | { runs: false; why: 'not-selected' }
  /** The node has NoSchedule/NoExecute taints the pod does not tolerate (listed). */
  | { runs: false; why: 'untolerated'; taints: V1Taint[] };

export function daemonSetPlacement(node: V1Node, ds: V1DaemonSet): Placement {
  const spec = ds.spec?.template?.spec;
  const name = node.metadata?.name ?? '';
  if (spec?.nodeName && spec.nodeName !== name) return { runs: false, why: 'not-selected' };
  if (!matchesRequiredNodeAffinity(node, spec)) return { runs: false, why: 'not-selected' };
  const tolerations = daemonPodTolerations(spec);
  const taints = (node.spec?.taints ?? []).filter((t) => (t.effect === 'NoSchedule' || t.effect === 'NoExecute') && !tolerations.some((tol) => tolerates(tol, t)));
  return taints.length > 0 ? { runs: false, why: 'untolerated', taints } : { runs: true };
}

/**
 * The tolerations of a DaemonSet's pods: the template's, plus those the DaemonSet controller adds
 * to each (AddOrUpdateDaemonPodTolerations): not-ready and unreachable (NoExecute); disk-pressure,
 * memory-pressure, pid-pressure and unschedulable (NoSchedule); network-unavailable (NoSchedule)
 * for a pod on the host network.
 */
export function daemonPodTolerations(spec: V1PodSpec | undefined): V1Toleration[] {
  const added: V1Toleration[] = [
    { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute' },
    { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute' },
    { key: 'node.kubernetes.io/disk-pressure', operator: 'Exists', effect: 'NoSchedule' },
    { key: 'node.kubernetes.io/memory-pressure', operator: 'Exists', effect: 'NoSchedule' },
    { key: 'node.kubernetes.io/pid-pressure', operator: 'Exists', effect: 'NoSchedule' },
    { key: 'node.kubernetes.io/unschedulable', operator: 'Exists', effect: 'NoSchedule' },
  ];
  if (spec?.hostNetwork) added.push({ key: 'node.kubernetes.io/network-unavailable', operator: 'Exists', effect: 'NoSchedule' });
  return [...(spec?.tolerations ?? []), ...added];
}

/**
 * The pod's required node affinity (nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)): every
 * label of spec.nodeSelector, and, when requiredDuringSchedulingIgnoredDuringExecution is set, at
 * least one of its terms. A term holds when all its matchExpressions (on labels) and matchFields
 * (metadata.name is the node's only field) hold; an empty term, or one that does not parse (an
 * unknown operator, a wrong number of values), selects nothing, so no terms at all select nothing.
 */
export function matchesRequiredNodeAffinity(node: V1Node, spec: V1PodSpec | undefined): boolean {
  const labels = node.metadata?.labels ?? {};
  for (const [key, value] of Object.entries(spec?.nodeSelector ?? {})) if (labels[key] !== value) return false;
  const required = spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (!required) return true;
  const fields: Record<string, string> = node.metadata?.name ? { 'metadata.name': node.metadata.name } : {};
  return (required.nodeSelectorTerms ?? []).some((term) => termMatches(term, labels, fields));
}

function termMatches(term: V1NodeSelectorTerm, labels: Readonly<Record<string, string>>, fields: Readonly<Record<string, string>>): boolean {
  const expressions = term.matchExpressions ?? [];
  const matchFields = term.matchFields ?? [];
  if (expressions.length === 0 && matchFields.length === 0) return false;
  const exprs = expressions.map((e) => labelRequirement(e));
  const fieldReqs = matchFields.map((e) => fieldRequirement(e));
  // A term with a requirement that does not parse is an error, which the caller reads as no match.
  if (exprs.includes(undefined) || fieldReqs.includes(undefined)) return false;
  if (!exprs.every((holds) => (holds as Requirement)(labels))) return false;
  // nodeSelectorTerm.match skips matchFields for an object without fields (a node without a name).
  if (Object.keys(fields).length > 0 && !fieldReqs.every((holds) => (holds as Requirement)(fields))) return false;
  return true;
}

type Requirement = (set: Readonly<Record<string, string>>) => boolean;

/** A label requirement as labels.NewRequirement reads it, or undefined when it does not parse. */
function labelRequirement({ key, operator, values = [] }: V1NodeSelectorRequirement): Requirement | undefined {
  switch (operator) {
    case 'In':
    case 'NotIn': {
      if (values.length === 0) return undefined;
      const set = new Set(values);
      return operator === 'In' ? (l) => l[key] !== undefined && set.has(l[key]) : (l) => l[key] === undefined || !set.has(l[key]);
    }
    case 'Exists':
    case 'DoesNotExist':
      if (values.length > 0) return undefined;
      return operator === 'Exists' ? (l) => l[key] !== undefined : (l) => l[key] === undefined;
    case 'Gt':
    case 'Lt': {
      const bound = values.length === 1 ? int64(values[0] as string) : undefined;
      if (bound === undefined) return undefined;
      return (l) => {
        const value = l[key] === undefined ? undefined : int64(l[key]);
        return value !== undefined && (operator === 'Gt' ? value > bound : value < bound);
      };
    }
    default:
      return undefined;
  }
}

/** A field requirement (In or NotIn, exactly one value: a field selector term), or undefined. */
function fieldRequirement({ key, operator, values = [] }: V1NodeSelectorRequirement): Requirement | undefined {
  if (values.length !== 1) return undefined;
  const value = values[0] as string;
  // fields.Set.Get of a field the object does not have is "".
  if (operator === 'In') return (f) => (f[key] ?? '') === value;
  if (operator === 'NotIn') return (f) => (f[key] ?? '') !== value;
  return undefined;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** strconv.ParseInt(text, 10, 64). */
function int64(text: string): bigint | undefined {
  if (!/^[+-]?\d+$/.test(text)) return undefined;
  const value = BigInt(text);
  return value < INT64_MIN || value > INT64_MAX ? undefined : value;
}

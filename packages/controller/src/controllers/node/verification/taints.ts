import type { V1Taint, V1Toleration } from '@kubernetes/client-node';

/**
 * Which of a node's taints keep a pod off it, by the scheduler's rules (TaintToleration filter):
 * only NoSchedule and NoExecute taints count, and one is tolerated when some toleration matches its
 * effect (empty: any), its key (empty with Exists: any) and, with operator Equal (the default),
 * its value. Pure, so the NotScheduled message can name the taints itself: the scheduler's own
 * message says only "node(s) had untolerated taint(s)".
 */
export function untoleratedTaints(taints: readonly V1Taint[], tolerations: readonly V1Toleration[]): V1Taint[] {
  return taints.filter((t) => (t.effect === 'NoSchedule' || t.effect === 'NoExecute') && !tolerations.some((tol) => tolerates(tol, t)));
}

export function tolerates(toleration: V1Toleration, taint: V1Taint): boolean {
  if (toleration.effect && toleration.effect !== taint.effect) return false;
  if (toleration.key && toleration.key !== taint.key) return false;
  switch (toleration.operator ?? 'Equal') {
    case 'Exists':
      return true;
    case 'Equal':
      // An empty key only goes with Exists (API validation); a stray one matches nothing.
      return Boolean(toleration.key) && (toleration.value ?? '') === (taint.value ?? '');
    default:
      return false;
  }
}

/** `key=value:Effect`, or `key:Effect` without a value (kubectl's notation). */
export function formatTaint(t: Pick<V1Taint, 'key' | 'value' | 'effect'>): string {
  return `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`;
}

import type { V1Node, V1Pod, V1Taint } from '@kubernetes/client-node';

/**
 * Small readers over Kubernetes objects. Objects reach us either from typed list calls (timestamps
 * as Date) or from raw watch events (timestamps as RFC 3339 strings): read times through toMillis.
 */
export function toMillis(value: Date | string | undefined | null): number | undefined {
  if (value === undefined || value === null) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

export function nodeName(node: V1Node): string {
  return node.metadata?.name ?? '';
}

export function nodeUid(node: V1Node): string {
  return node.metadata?.uid ?? '';
}

export function nodeTaints(node: V1Node): readonly V1Taint[] {
  return node.spec?.taints ?? [];
}

export function label(obj: { metadata?: { labels?: Record<string, string> } }, key: string): string | undefined {
  return obj.metadata?.labels?.[key];
}

export function annotation(obj: { metadata?: { annotations?: Record<string, string> } }, key: string): string | undefined {
  return obj.metadata?.annotations?.[key];
}

export function podKey(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

/** Succeeded or Failed: the pod will not run again. */
export function isPodTerminal(pod: V1Pod): boolean {
  return pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
}

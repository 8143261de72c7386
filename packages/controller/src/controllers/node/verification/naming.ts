import { createHash } from 'node:crypto';

/**
 * Deterministic worker pod names and node labels. A pod name is a pure function of
 * (node name, node UID, attempt): a restarted controller or a new leader computes the same name,
 * so it finds the pod of an attempt instead of starting a second one, and a node recreated with
 * the same name (new UID) never adopts the old node's pods.
 */
const PREFIX = 'knr-';
/** Pod names become hostnames and label values in places: keep them to 63 characters. */
export const MAX_POD_NAME = 63;
const MAX_LABEL_VALUE = 63;
const HASH_LENGTH = 8;

export function shortHash(text: string, length = HASH_LENGTH): string {
  return createHash('sha256').update(text).digest('hex').slice(0, length);
}

/** `knr-<node name, truncated>-<hash of name+uid>-a<attempt>`, at most 63 characters. */
export function workerPodName(nodeName: string, nodeUid: string, attempt: number): string {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be a positive integer, got ${attempt}`);
  const suffix = `-${shortHash(`${nodeName}/${nodeUid}`)}-a${attempt}`;
  const room = MAX_POD_NAME - PREFIX.length - suffix.length;
  const readable = trimDashes(nodeName.toLowerCase().replace(/[^a-z0-9-]/g, '-').slice(0, room));
  return `${PREFIX}${readable || 'node'}${suffix}`;
}

/**
 * The value of the worker pod's node label: the node name itself when it is a valid label value
 * (so `kubectl get pods -l kube-node-ready.io/node=NAME` works), else a truncated name and a hash.
 */
export function nodeLabelValue(nodeName: string): string {
  if (nodeName.length <= MAX_LABEL_VALUE && /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/.test(nodeName)) return nodeName;
  const hash = shortHash(nodeName, 10);
  const readable = trimDashes(nodeName.replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, MAX_LABEL_VALUE - hash.length - 1));
  return readable ? `${readable}-${hash}` : hash;
}

function trimDashes(text: string): string {
  return text.replace(/^[-_.]+|[-_.]+$/g, '');
}

import type { V1Node, V1ObjectMeta } from '@kubernetes/client-node';
import { NodeAnnotation } from '../../../api/well-known.js';

const NONE: ReadonlySet<string> = new Set();
const READ_ANNOTATIONS: ReadonlySet<string> = new Set(Object.values(NodeAnnotation));

/**
 * A node cut to what the controller reads, for the node cache and the copies its own writes and
 * live reads return: name, uid, resourceVersion, creation and deletion times, labels, the
 * annotations it reads (NodeAnnotation), ownerReferences (a Karpenter NodeClaim), taints, providerID, the condition of type
 * `conditionType` (ours), and Ready without its heartbeat. The rest (other conditions, addresses, capacity, nodeInfo, images, volumes,
 * managedFields) is most of a real Node and none of our business: the cache's memory grows with
 * the nodes, so each cached node keeps only what a decision reads (docs/benchmarks.md, Memory).
 * Of status.allocatable, only the `gatedResources` (the readiness gates' requireResources): none
 * unless a resource gate is configured.
 */
export function slimNode(node: V1Node, conditionType: string, gatedResources: ReadonlySet<string> = NONE): V1Node {
  const m = node.metadata ?? {};
  const metadata: V1ObjectMeta = {};
  if (m.name !== undefined) metadata.name = m.name;
  if (m.uid !== undefined) metadata.uid = m.uid;
  if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
  if (m.creationTimestamp !== undefined) metadata.creationTimestamp = m.creationTimestamp;
  if (m.deletionTimestamp !== undefined) metadata.deletionTimestamp = m.deletionTimestamp;
  if (m.labels !== undefined) metadata.labels = m.labels;
  // Only the annotations the controller reads: a CNI's, a CSI driver's and Karpenter's own are
  // hundreds of bytes per node.
  const annotations = Object.entries(m.annotations ?? {}).filter(([key]) => READ_ANNOTATIONS.has(key));
  if (annotations.length) metadata.annotations = Object.fromEntries(annotations);
  if (m.ownerReferences !== undefined) metadata.ownerReferences = m.ownerReferences;
  const slim: V1Node = { metadata };
  if (node.spec?.taints !== undefined || node.spec?.providerID !== undefined) {
    slim.spec = {};
    if (node.spec.taints !== undefined) slim.spec.taints = node.spec.taints;
    if (node.spec.providerID !== undefined) slim.spec.providerID = node.spec.providerID;
  }
  // Our condition, and Ready without its heartbeat (whether a worker can be launched: decide()).
  const kept = (node.status?.conditions ?? []).flatMap((c) => {
    if (c.type === conditionType) return [c];
    if (c.type !== 'Ready') return [];
    const { lastHeartbeatTime: _heartbeat, ...ready } = c;
    return [ready];
  });
  if (kept.length) slim.status = { conditions: kept };
  if (gatedResources.size > 0) {
    const allocatable = Object.entries(node.status?.allocatable ?? {}).filter(([resource]) => gatedResources.has(resource));
    if (allocatable.length) (slim.status ??= {}).allocatable = Object.fromEntries(allocatable);
  }
  return slim;
}

// The observer: ONE process that watches the burst's Nodes and the worker Pods and prints a JSON
// line, stamped with its own clock (Date.now(), ms), the first time each milestone is seen:
//   nodeAdded    the Node appears (watch ADDED): "node created"
//   launchable   the Node is Ready and has no NoSchedule/NoExecute taint the worker does not
//                tolerate (the controller's own test, decide.ts): from here the worker pod is the
//                controller's to create
//   podCreated   a worker pod of the node appears (one per attempt; lines carry the pod name)
//   podScheduled the pod has spec.nodeName
//   podRunning   the pod reports a started container
//   podFinished  the pod reaches Succeeded or Failed (with the worker's own checks duration from
//                its termination-message summary)
//   conditionTrue the node's condition --condition-type is True (only with that option)
//   opened       the node has no verification taint and carries the verified label (any, with an
//                empty --verified-label): "taint removed"
// It runs in a process of its own so that the bench process creating hundreds of Nodes does not
// delay the timestamps. `{"e":"ready"}` is printed once both watches are established.
import { k8s, loadKubeConfig } from '@kube-node-ready/sandbox';

export interface ObserverOptions {
  kubeconfig: string;
  /** Label selector of the nodes to observe. */
  nodeSelector: string;
  namespace: string;
  taintKey: string;
  verifiedLabel: string;
  /** A node condition whose first True is a milestone (conditionTrue). */
  conditionType?: string;
}

export type Milestone = 'nodeAdded' | 'launchable' | 'podCreated' | 'podScheduled' | 'podRunning' | 'podFinished' | 'conditionTrue' | 'opened';

export interface ObservedLine {
  t: number;
  e: Milestone | 'ready' | 'error';
  node?: string;
  /** Pod milestones: the worker pod's name (one pod per attempt). */
  pod?: string;
  phase?: string;
  checksMs?: number;
  message?: string;
}

/** Worker pods (their labels) and the annotation naming the node each verifies; the fault suite's monitor uses them too. */
export const WORKER_SELECTOR = 'app.kubernetes.io/component=worker,app.kubernetes.io/managed-by=kube-node-ready-controller';
export const NODE_NAME_ANNOTATION = 'kube-node-ready.io/node-name';

export async function runObserver(o: ObserverOptions): Promise<void> {
  const kc = loadKubeConfig(o.kubeconfig);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const seen = new Map<string, Set<string>>();
  const emit = (line: Omit<ObservedLine, 't'>) => process.stdout.write(`${JSON.stringify({ t: Date.now(), ...line })}\n`);
  const first = (node: string, m: Milestone, extra: Partial<ObservedLine> = {}) => {
    const key = extra.pod ? `pod/${extra.pod}` : `node/${node}`;
    let s = seen.get(key);
    if (!s) seen.set(key, (s = new Set()));
    if (s.has(m)) return;
    s.add(m);
    emit({ e: m, node, ...extra });
  };

  const onNode = (type: string, n: k8s.V1Node) => {
    const name = n.metadata?.name;
    if (!name || type === 'DELETED') return;
    first(name, 'nodeAdded');
    if (launchable(n, o.taintKey)) first(name, 'launchable');
    if (o.conditionType && n.status?.conditions?.some((c) => c.type === o.conditionType && c.status === 'True')) first(name, 'conditionTrue');
    const tainted = (n.spec?.taints ?? []).some((t) => t.key === o.taintKey);
    if (!tainted && (o.verifiedLabel === '' || n.metadata?.labels?.[o.verifiedLabel] !== undefined)) first(name, 'opened');
  };
  const onPod = (type: string, p: k8s.V1Pod) => {
    const node = p.metadata?.annotations?.[NODE_NAME_ANNOTATION];
    const pod = p.metadata?.name ?? '';
    if (!node || type === 'DELETED') return;
    first(node, 'podCreated', { pod });
    if (p.spec?.nodeName) first(node, 'podScheduled', { pod });
    if ((p.status?.containerStatuses ?? []).some((c) => c.state?.running || c.state?.terminated)) first(node, 'podRunning', { pod });
    const phase = p.status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') {
      let checksMs: number | undefined;
      const message = p.status?.containerStatuses?.[0]?.state?.terminated?.message;
      try {
        checksMs = (JSON.parse(message ?? '') as { durationMs?: number }).durationMs;
      } catch {
        /* no summary */
      }
      first(node, 'podRunning', { pod });
      first(node, 'podFinished', { pod, phase, ...(checksMs !== undefined ? { checksMs } : {}) });
    }
  };

  let ready = 0;
  const started = () => {
    if (++ready === 2) emit({ e: 'ready' });
  };
  watchLoop(kc, '/api/v1/nodes', { labelSelector: o.nodeSelector }, () => core.listNode({ labelSelector: o.nodeSelector }), onNode, started, emit);
  watchLoop(
    kc,
    `/api/v1/namespaces/${o.namespace}/pods`,
    { labelSelector: WORKER_SELECTOR },
    () => core.listNamespacedPod({ namespace: o.namespace, labelSelector: WORKER_SELECTOR }),
    onPod,
    started,
    emit,
  );
  await new Promise<void>((resolve) => process.once('SIGTERM', resolve));
  process.exit(0);
}

/** The node lifecycle controller's taints: the controller goes by the Ready condition, which says it first (decide.ts launchBlockers). */
const READY_SHADOW_TAINTS = new Set(['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']);

/** As the controller's launchBlockers() with one verification taint: Ready, and no other taint that keeps pods off. */
export function launchable(n: k8s.V1Node, taintKey: string): boolean {
  if (!n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return false;
  return (n.spec?.taints ?? []).every((t) => (t.effect !== 'NoSchedule' && t.effect !== 'NoExecute') || t.key === taintKey || READY_SHADOW_TAINTS.has(t.key));
}

/** List, then watch from the list's resourceVersion; list again whenever the watch ends. */
function watchLoop<T extends k8s.KubernetesObject>(
  kc: k8s.KubeConfig,
  path: string,
  params: Record<string, string>,
  list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>,
  onEvent: (type: string, obj: T) => void,
  onStarted: () => void,
  emit: (line: Omit<ObservedLine, 't'>) => void,
): void {
  const watch = new k8s.Watch(kc);
  let announced = false;
  const loop = async (): Promise<void> => {
    for (;;) {
      try {
        const res = await list();
        for (const item of res.items) onEvent('ADDED', item);
        await new Promise<void>((resolve) => {
          watch
            .watch(path, { ...params, resourceVersion: res.metadata?.resourceVersion, allowWatchBookmarks: true }, (type, obj) => onEvent(type, obj as T), () => resolve())
            .then(() => {
              if (!announced) {
                announced = true;
                onStarted();
              }
            })
            .catch((err: unknown) => {
              emit({ e: 'error', message: `watch ${path}: ${String(err)}` });
              resolve();
            });
        });
      } catch (err) {
        emit({ e: 'error', message: `list ${path}: ${String(err)}` });
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  void loop();
}

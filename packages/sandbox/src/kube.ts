import * as k8s from '@kubernetes/client-node';
import { PooledKubeConfig } from '@kube-node-ready/controller';

export { k8s };

/** The kubeconfig at `path`, its clients sharing one connection pool (PooledKubeConfig, as the controller's). */
export function loadKubeConfig(path: string): k8s.KubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromFile(path);
  return kc.inlineCredentialFiles();
}

/** The HTTP status of a client-node error, or undefined. */
export function statusCode(err: unknown): number | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof (err as { code: unknown }).code === 'number') {
    return (err as { code: number }).code;
  }
  return undefined;
}

/** Creates the object, ignoring 409 AlreadyExists. */
export async function createIgnoreExists<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    if (statusCode(err) === 409) return undefined;
    throw err;
  }
}

type WatchHandler<T> = (type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: T) => void;

/**
 * List, then watch from the list's resourceVersion; on any error or close, list again after a
 * short pause. Enough for the sandbox's own bookkeeping (the product has its own, tested, informer).
 * `onSync` is called after each list with the complete set of objects.
 */
export function listWatch<T extends k8s.KubernetesObject>(
  kc: k8s.KubeConfig,
  path: string,
  list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>,
  onEvent: WatchHandler<T>,
  onSync: (items: T[]) => void,
  onError: (err: unknown) => void = () => {},
  /** Query parameters of the watch besides its resourceVersion (a labelSelector, as the list's). */
  query: Record<string, string> = {},
): { stop: () => void } {
  const watch = new k8s.Watch(kc);
  let stopped = false;
  let abort: AbortController | undefined;
  const loop = async () => {
    while (!stopped) {
      try {
        const res = await list();
        onSync(res.items);
        await new Promise<void>((resolve) => {
          void watch
            .watch(
              path,
              { ...query, resourceVersion: res.metadata?.resourceVersion, allowWatchBookmarks: true },
              (type, obj) => {
                if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') onEvent(type, obj as T);
              },
              (err) => {
                if (err) onError(err);
                resolve();
              },
            )
            .then((a) => {
              abort = a;
              if (stopped) a.abort();
            })
            .catch((err) => {
              onError(err);
              resolve();
            });
        });
      } catch (err) {
        onError(err);
      }
      if (!stopped) await new Promise((r) => setTimeout(r, 500));
    }
  };
  void loop();
  return {
    stop: () => {
      stopped = true;
      abort?.abort();
    },
  };
}

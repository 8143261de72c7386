import { createHash } from 'node:crypto';

export type PullPolicy = 'Always' | 'IfNotPresent' | 'Never';

/** What happened when a container's image was made available, for the kubelet's Events. */
export type PullOutcome =
  | { kind: 'present' }
  | { kind: 'pulled'; pullMs: number; waitedMs: number; sizeBytes: number }
  | { kind: 'never-pull' };

export interface PullHooks {
  /** Called when this container's pull starts (after waiting for pulls ahead of it on the node). */
  onPulling: () => void;
}

/**
 * The images on each node, in memory. A node pulls one image at a time (a kubelet's
 * serializeImagePulls default): a pull waits for the pulls queued before it on the same node. The
 * first pull of an image on a node takes the node's image-pull delay; after that the image is
 * cached: IfNotPresent finds it present and Always pulls again, fast (only the manifest changes
 * hands). A node whose pulls take no time has every image from the start.
 * Nodes are keyed by uid, so a node deleted and created again under the same name starts empty.
 */
export class ImageCache {
  private readonly nodes = new Map<string, { images: Set<string>; queue: Promise<unknown> }>();

  /** Makes `image` available on the node for a container with `policy`; resolves when it is. */
  async ensure(nodeUid: string, image: string, policy: PullPolicy | undefined, firstPullMs: number, hooks: PullHooks, sleep = defaultSleep): Promise<PullOutcome> {
    const node = this.node(nodeUid);
    const effective = policy ?? defaultPullPolicy(image);
    const present = firstPullMs <= 0 || node.images.has(image);
    if (present) node.images.add(image);
    if (effective === 'Never') return present ? { kind: 'present' } : { kind: 'never-pull' };
    if (effective === 'IfNotPresent' && present) return { kind: 'present' };
    const queued = Date.now();
    const pull = node.queue.then(async () => {
      hooks.onPulling();
      const started = Date.now();
      // Pulled meanwhile by a container queued ahead: the layers are here, only the manifest is fetched.
      if (firstPullMs > 0 && !node.images.has(image)) await sleep(firstPullMs);
      node.images.add(image);
      const now = Date.now();
      return { kind: 'pulled', pullMs: now - started, waitedMs: now - queued, sizeBytes: imageSize(image) } as const;
    });
    node.queue = pull.catch(() => undefined);
    return pull;
  }

  forgetNode(nodeUid: string): void {
    this.nodes.delete(nodeUid);
  }

  private node(uid: string) {
    let n = this.nodes.get(uid);
    if (!n) this.nodes.set(uid, (n = { images: new Set(), queue: Promise.resolve() }));
    return n;
  }
}

/** The API server's default: Always for an image without a tag or with `:latest`, IfNotPresent otherwise. */
export function defaultPullPolicy(image: string): PullPolicy {
  if (image.includes('@')) return 'IfNotPresent';
  const tag = /:([^/:]+)$/.exec(image)?.[1];
  return !tag || tag === 'latest' ? 'Always' : 'IfNotPresent';
}

/** A stable, plausible image size (50-250 MB) for the Pulled Event's message. */
function imageSize(image: string): number {
  return 50_000_000 + (createHash('sha256').update(image).digest().readUInt32BE(0) % 200_000_000);
}

/**
 * Resolves once `ms` have passed by the wall clock, which the Pulled Event reports: a timer counts
 * from the event loop's cached time and can end a millisecond early (a 5 s pull reported as 4.999s).
 */
async function defaultSleep(ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) await new Promise((r) => setTimeout(r, until - Date.now()));
}

/** A Go-style rendering of a duration, as in a kubelet's "Successfully pulled image" message (1.5s, 230ms). */
export function goDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = ms / 1000;
  if (s < 60) return `${Number(s.toFixed(3))}s`;
  const m = Math.floor(s / 60);
  return `${m}m${Number((s - m * 60).toFixed(3))}s`;
}

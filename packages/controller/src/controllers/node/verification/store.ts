import type { V1Node } from '@kubernetes/client-node';
import { TerminalError, type Logger } from '@kube-node-ready/core';
import { installationOf, INSTALLATION_LABEL, newNodeVerification, stateOf, statusOf, VERIFIED_CONDITION, type NodeVerification, type StateRead } from '../../../api/nodeverification.js';
import type { Clock } from '../../../clock.js';
import { Profiles } from '../../../config/profiles.js';
import type { ControllerConfig } from '../../../config/schema.js';
import type { KubeClient } from '../../../kube/client.js';
import { isAlreadyExists, isConflict, isNotFound } from '../../../kube/errors.js';
import { MutationCache } from '../../../kube/mutation-cache.js';
import { nodeName, nodeUid } from '../../../kube/objects.js';
import { Priority } from '../../../kube/throttle.js';
import { desiredCondition } from './condition.js';
import { nodePatch, type ConditionInput } from './node-patch.js';
import { Phase, type VerificationState } from './types.js';

export type { StateRead } from '../../../api/nodeverification.js';

/**
 * Where verification progress is kept: the node's NodeVerification (api/nodeverification.ts,
 * ADR 0005). In dry run nothing may be written, so progress lives in memory and does not survive
 * a restart.
 */
export interface ProgressStore {
  /**
   * The node's progress: the stored one, or the attempt in flight (follow()) while the stored one is
   * older. Every reader sees the attempt in flight: remediation does not call a node whose worker
   * runs stuck.
   */
  read(node: V1Node): StateRead;
  /**
   * The attempt in flight, launched or adopted: not written (its worker pod is its record, ADR 0006),
   * held in memory until an outcome newer than it is stored, or the node is forgotten.
   */
  follow(state: VerificationState, name: string): void;
  /** The attempt in flight the store holds for this node name, if any. */
  inFlight(name: string): VerificationState | undefined;
  /**
   * Stores `state`; a failed node's taint is added or removed first (one guarded Node write).
   * `condition`: what the status condition says instead of the state's own verdict (a node waiting
   * to become launchable). Returns the node as written, or 'conflict' when the node or its
   * NodeVerification changed since they were read (decide again on fresh copies).
   */
  save(node: V1Node, state: VerificationState, opts?: { condition?: ConditionInput }): Promise<V1Node | 'conflict'>;
  /** Throws when another installation of kube-node-ready verifies this node (checked before any write of it: opening it included). */
  assertOurs(node: V1Node): void;
  /**
   * Makes sure the node has its NodeVerification, without status (the DaemonSet agent, claiming its
   * node before its attempt; the controller creates one with the first progress it stores).
   */
  ensure(node: V1Node): Promise<void>;
  /** The node is gone. */
  forget(name: string): void;
  /**
   * Reads every NodeVerification live (a new leader, before its first reconcile): the previous
   * leader's last writes may not have reached this replica's informer yet, and an attempt in flight
   * is not written (ADR 0006), so a stale record would start a worker for an attempt the previous
   * leader already ran. The number read.
   */
  catchUp(): Promise<number>;
}

export interface NodeVerificationStoreDeps {
  kube: Pick<KubeClient, 'patchNode' | 'createNodeVerification' | 'updateNodeVerification' | 'getNodeVerification' | 'deleteNodeVerification' | 'listNodeVerificationPages'>;
  config: ControllerConfig;
  clock: Clock;
  log: Logger;
  /** The informer's NodeVerifications by name (the DaemonSet agent, which has none, passes an empty cache and calls refresh()). */
  cache: { get(name: string): NodeVerification | undefined };
}

/**
 * Progress in NodeVerification status. The first progress stored creates the NodeVerification with
 * it, in one request (the CRD has no status subresource: ADR 0006); later ones replace it, guarded
 * by resourceVersion (a 409 means another writer moved it on: the caller decides again). On the
 * way to a pass at the first attempt that is the only write of it: nothing is stored while a node
 * waits briefly or its attempt runs (the worker pod records that). Reads come from the informer's
 * cache, or from the copy our own last write returned while the watch has not delivered it yet
 * (kube/mutation-cache.ts): deciding on the older copy would redo that write.
 *
 * The Node is written here only for a failed node's taint (guarded by JSON patch tests on the node
 * UID and the taints: node-patch.ts), before the status that records it. Opening a node that passed
 * is a step of its own (open.ts), also before the status: a status that says Passed always has an
 * open node behind it, and an open node whose status write was lost is completed level-based
 * (actions/ignore.ts).
 */
export class NodeVerificationStore implements ProgressStore {
  /** The informer's NodeVerifications, or the newer copies our own writes and live reads returned. */
  private readonly copies: MutationCache<NodeVerification>;
  /** This installation's INSTALLATION_LABEL value. */
  private readonly installation: string;
  /** Which profile's settings apply to a node: its retries, in the condition's message; its name, in the status. */
  private readonly profiles: Profiles;
  /** The attempts in flight, by node name (follow()). */
  private readonly following = new Map<string, VerificationState>();

  constructor(private readonly deps: NodeVerificationStoreDeps) {
    this.installation = installationOf(deps.config.nodeManagement.condition.type);
    this.profiles = new Profiles(deps.config);
    this.copies = new MutationCache(deps.cache, 'own');
  }

  /** The newest NodeVerification of that name this store knows. */
  current(name: string): NodeVerification | undefined {
    return this.copies.get(name);
  }

  read(node: V1Node): StateRead {
    return withInFlight(stateOf(this.current(nodeName(node)), node, this.installation), node, this.following);
  }

  follow(state: VerificationState, name: string): void {
    this.following.set(name, state);
  }

  inFlight(name: string): VerificationState | undefined {
    return this.following.get(name);
  }

  async save(node: V1Node, state: VerificationState, opts: { condition?: ConditionInput } = {}): Promise<V1Node | 'conflict'> {
    const { kube } = this.deps;
    const profile = this.profiles.of(node);
    const config = profile.config;
    // Before any write, the Node's included: another installation's node is not ours.
    this.assertOurs(node);
    // Recording a finished attempt goes before launching more workers.
    const priority = state.phase === Phase.Verifying || state.phase === Phase.Waiting ? Priority.Normal : Priority.High;
    let written = node;
    const ops = nodePatch({ node, config, state, open: false });
    if (ops.some((op) => op.op !== 'test')) {
      try {
        written = await kube.patchNode(nodeName(node), ops, priority);
      } catch (err) {
        if (isConflict(err)) return 'conflict';
        throw err;
      }
    }
    const condition = opts.condition ?? desiredCondition(state, config);
    const saved = await this.writeStatus(written, state, condition, priority, profile.name);
    return saved === 'conflict' ? 'conflict' : written;
  }

  async ensure(node: V1Node): Promise<void> {
    const nv = this.current(nodeName(node));
    if (nv?.spec?.nodeUID === nodeUid(node)) return;
    await this.create(node, nv, Priority.Normal);
  }

  /** Reads it live (after a refused write, or for a reader without a cache). */
  async refresh(name: string): Promise<NodeVerification | undefined> {
    const live = await this.deps.kube.getNodeVerification(name);
    if (live) this.copies.observe(live);
    else this.copies.forget(name);
    return live;
  }

  forget(name: string): void {
    this.copies.forget(name);
    this.following.delete(name);
  }

  async catchUp(): Promise<number> {
    let read = 0;
    for await (const page of this.deps.kube.listNodeVerificationPages()) {
      for (const nv of page.items) this.copies.observe(nv);
      read += page.items.length;
    }
    return read;
  }

  private async writeStatus(node: V1Node, state: VerificationState, condition: ConditionInput, priority: Priority, profile: string): Promise<'ok' | 'conflict'> {
    const name = nodeName(node);
    const nv = this.current(name);
    const verdict = { type: VERIFIED_CONDITION, status: condition.status, reason: condition.reason, message: condition.message };
    if (nv?.spec?.nodeUID !== nodeUid(node)) {
      // The first progress of this node: created with it.
      const fresh = newNodeVerification(node, this.installation);
      fresh.status = statusOf(state, node, verdict, fresh, this.deps.clock.now(), profile);
      return (await this.create(node, nv, priority, fresh)) ? 'ok' : 'conflict';
    }
    const status = statusOf(state, node, verdict, nv, this.deps.clock.now(), profile);
    if (canonical(status) === canonical(nv.status ?? {})) return 'ok';
    try {
      this.copies.observe(await this.deps.kube.updateNodeVerification({ ...nv, status }, priority));
      return 'ok';
    } catch (err) {
      if (!isConflict(err) && !isNotFound(err)) throw err;
      await this.refresh(name);
      return 'conflict';
    }
  }

  /**
   * Creates the node's NodeVerification (`nv`: with its first status; without, none). One left by an
   * earlier Node of the same name (another UID, garbage collection has not come to it yet) is deleted
   * first. Undefined when someone else created it meanwhile (the caller decides again on that one).
   */
  private async create(node: V1Node, stale: NodeVerification | undefined, priority: Priority, nv: NodeVerification = newNodeVerification(node, this.installation)): Promise<NodeVerification | undefined> {
    const name = nodeName(node);
    if (stale) {
      this.deps.log.info({ node: name, staleNodeUID: stale.spec?.nodeUID }, 'replacing the NodeVerification of an earlier node of this name');
      await this.deps.kube.deleteNodeVerification(name, stale.metadata?.uid ?? '');
    }
    try {
      const created = await this.deps.kube.createNodeVerification(nv, priority);
      this.copies.observe(created);
      return created;
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      await this.refresh(name);
      return undefined;
    }
  }

  /** Throws when the node's NodeVerification (of this node UID) was written by another installation. */
  assertOurs(node: V1Node): void {
    const nv = this.current(nodeName(node));
    if (nv?.spec?.nodeUID !== nodeUid(node)) return;
    const writer = nv.metadata?.labels?.[INSTALLATION_LABEL];
    if (writer === this.installation) return;
    throw new TerminalError(
      `node ${nodeName(node)}'s NodeVerification is written by another installation of kube-node-ready (${INSTALLATION_LABEL}=${writer ?? '(none)'}): ` +
        'two installations cannot verify the same node; give the node only one of their verification taints',
    );
  }
}

/**
 * `read`, or the node's attempt in flight when it is newer (same node UID, a higher attempt). One
 * that is not (the outcome stored since, another node of that name) is dropped from `following`.
 * Another installation's progress stays what it is.
 */
function withInFlight(read: StateRead, node: V1Node, following: Map<string, VerificationState>): StateRead {
  const name = nodeName(node);
  const state = following.get(name);
  if (!state || read.kind === 'invalid') return read;
  const stored = read.kind === 'ok' && read.state.uid === state.uid ? read.state.attempt : 0;
  if (state.uid === nodeUid(node) && state.attempt > stored) return { kind: 'ok', state };
  following.delete(name);
  return read;
}

/** JSON with sorted keys: a status equal to the stored one, whatever the key order, is not written again. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

/** Dry run: progress in memory only (nothing written to the cluster; lost on restart). */
export class MemoryProgressStore implements ProgressStore {
  private readonly states = new Map<string, VerificationState>();
  private readonly following = new Map<string, VerificationState>();

  read(node: V1Node): StateRead {
    const state = this.states.get(nodeName(node));
    const read: StateRead = !state || state.uid !== node.metadata?.uid ? { kind: 'none' } : { kind: 'ok', state };
    return withInFlight(read, node, this.following);
  }

  follow(state: VerificationState, name: string): void {
    this.following.set(name, state);
  }

  inFlight(name: string): VerificationState | undefined {
    return this.following.get(name);
  }

  async save(node: V1Node, state: VerificationState): Promise<V1Node> {
    this.states.set(nodeName(node), { ...state });
    return node;
  }

  async ensure(): Promise<void> {}

  assertOurs(): void {}

  forget(name: string): void {
    this.states.delete(name);
    this.following.delete(name);
  }

  async catchUp(): Promise<number> {
    return this.states.size;
  }
}

import type { V1Node } from '@kubernetes/client-node';
import type { ControllerConfig } from '../../../config/schema.js';
import type { KubeClient } from '../../../kube/client.js';
import { isConflict } from '../../../kube/errors.js';
import { nodeName } from '../../../kube/objects.js';
import { Priority } from '../../../kube/throttle.js';
import { nodePatch } from './node-patch.js';
import { readState, type StateRead } from './state.js';
import { Phase, type VerificationState } from './types.js';

/**
 * Where verification progress is kept. Normally on the Node itself (annotations, written in the
 * same guarded patch that opens the node: ADR 0002). In dry run nothing may be written to Nodes,
 * so progress lives in memory and does not survive a restart.
 */
export interface ProgressStore {
  read(node: V1Node): StateRead;
  /**
   * Stores `state` (and, with open, removes our taints and adds the verified label in the same
   * write). Returns the node as written, or 'conflict' when the node changed since it was read.
   */
  save(node: V1Node, state: VerificationState, opts: { open: boolean }): Promise<V1Node | 'conflict'>;
  /** The node is gone. */
  forget(name: string): void;
}

export class AnnotationProgressStore implements ProgressStore {
  constructor(
    private readonly kube: Pick<KubeClient, 'patchNode'>,
    private readonly config: ControllerConfig,
  ) {}

  read(node: V1Node): StateRead {
    return readState(node);
  }

  async save(node: V1Node, state: VerificationState, opts: { open: boolean }): Promise<V1Node | 'conflict'> {
    const ops = nodePatch({ node, config: this.config, state, open: opts.open });
    // Recording a finished attempt (and opening the node) goes before launching more workers.
    const priority = state.phase === Phase.Verifying ? Priority.Normal : Priority.High;
    try {
      return await this.kube.patchNode(nodeName(node), ops, priority);
    } catch (err) {
      if (isConflict(err)) return 'conflict';
      throw err;
    }
  }

  forget(): void {}
}

export class MemoryProgressStore implements ProgressStore {
  private readonly states = new Map<string, VerificationState>();

  read(node: V1Node): StateRead {
    const state = this.states.get(nodeName(node));
    if (!state) return { kind: 'none' };
    if (state.uid !== node.metadata?.uid) return { kind: 'invalid', problem: 'state belongs to an earlier node of this name' };
    return { kind: 'ok', state };
  }

  async save(node: V1Node, state: VerificationState): Promise<V1Node> {
    this.states.set(nodeName(node), { ...state });
    return node;
  }

  forget(name: string): void {
    this.states.delete(name);
  }
}

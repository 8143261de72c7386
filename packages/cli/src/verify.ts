import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { ConfigError, ExitCode, errorMessage } from '@kube-node-ready/core';
import { FIELD_MANAGER, NodeVerificationApi, stateOf, type ControllerConfig, type NodeVerification } from '@kube-node-ready/controller';
import { controllerConfig, kubeConfig } from './kube.js';

export const VERIFY_USAGE = `usage: kube-node-ready verify NODE [--kubeconfig PATH] [--config PATH] [--no-taint] [--dry-run]

Starts a new verification of NODE: deletes the node's NodeVerification, its stored progress
(attempts, backoff, last outcome), then removes the verified label and, unless --no-taint, puts
the verification taint back so no new pod lands on the node until it passes again (running pods
stay). The controller then verifies it like a new node. The node write is guarded by its
resourceVersion.
  --config PATH   the controller's configuration (taint and label names); defaults otherwise
  --no-taint      leave the node open while it is verified again; an open node keeps its
                  NodeVerification, which is what has the controller verify a node without the
                  taint (a node that had passed starts with no failures counted; one being
                  verified goes on with its count)
  --dry-run       print the node patch and the deletion instead of sending them`;

export async function runVerify(argv: string[], _env: NodeJS.ProcessEnv): Promise<number> {
  let node: string;
  let values: { kubeconfig?: string; config?: string; 'no-taint'?: boolean; 'dry-run'?: boolean; help?: boolean };
  try {
    const parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        kubeconfig: { type: 'string' },
        config: { type: 'string' },
        'no-taint': { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    values = parsed.values;
    if (values.help) {
      console.log(VERIFY_USAGE);
      return ExitCode.OK;
    }
    if (parsed.positionals.length !== 1) throw new ConfigError('expected exactly one node name', 'NODE');
    node = parsed.positionals[0]!;
  } catch (err) {
    console.error(`kube-node-ready verify: ${errorMessage(err)}\n\n${VERIFY_USAGE}`);
    return ExitCode.CONFIG_ERROR;
  }
  try {
    const config = controllerConfig(values.config);
    const kc = kubeConfig(values.kubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const taint = !values['no-taint'];
    for (let attempt = 1; ; attempt++) {
      const current = await core.readNode({ name: node });
      // Only a node that stays open (--no-taint) needs its NodeVerification read (reverifyPlan).
      const plan = reverifyPlan(current, taint ? undefined : await readVerification(kc, node), config, taint);
      if (values['dry-run']) {
        console.log(`node/${node}: JSON patch${plan.patch.length > 1 ? '' : ' (nothing to change)'}:\n${JSON.stringify(plan.patch, null, 2)}`);
        console.log(`nodeverification/${node}: ${plan.deleteVerification ? 'delete' : 'keep'}`);
        return ExitCode.OK;
      }
      // The progress goes first: the node write is what has the controller take the node up, and it
      // must then find no progress to continue from. (Again after a conflict: a 404 then.)
      if (plan.deleteVerification) await deleteVerification(kc, node);
      try {
        // Only the resourceVersion test: the node already is as a new verification needs it.
        if (plan.patch.length > 1) await core.patchNode({ name: node, body: plan.patch, fieldManager: FIELD_MANAGER }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
      } catch (err) {
        // 409/422 from the resourceVersion test: someone else wrote the node; read it again.
        const code = (err as { code?: number }).code;
        if ((code === 409 || code === 422) && attempt < 5) continue;
        if (!plan.deleteVerification) throw err;
        throw new Error(`its NodeVerification was deleted, but writing the node failed (run the command again): ${errorMessage(err)}`, { cause: err });
      }
      const how = taint ? ' (taint set until it passes)' : plan.deleteVerification ? '' : ' (the node stays open; its NodeVerification is kept)';
      console.log(`node/${node}: verification restarted${how}`);
      return ExitCode.OK;
    }
  } catch (err) {
    console.error(`kube-node-ready verify: node ${node}: ${errorMessage(err)}`);
    return err instanceof ConfigError ? ExitCode.CONFIG_ERROR : ExitCode.INTERNAL_ERROR;
  }
}

export interface ReverifyPlan {
  /** JSON patch of the Node, its first op the resourceVersion test (alone: nothing to change). */
  patch: object[];
  /** Delete the node's NodeVerification (the stored progress), so attempts and failures start again. */
  deleteVerification: boolean;
}

/**
 * What restarts the verification of `node`: delete its NodeVerification `nv`, drop the verified
 * label, optionally add the taint. The controller verifies a node that carries the taint; one
 * without it only while a NodeVerification of its own says a verification is under way or has
 * passed (or with nodeManagement.verifyUntaintedNodes). So a node left open (--no-taint) keeps its
 * NodeVerification, and one that would have neither is refused rather than left unverified.
 */
export function reverifyPlan(node: V1Node, nv: NodeVerification | undefined, config: Readonly<ControllerConfig>, taint: boolean): ReverifyPlan {
  const esc = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');
  const patch: object[] = [{ op: 'test', path: '/metadata/resourceVersion', value: node.metadata?.resourceVersion }];
  const labelKey = config.nodeManagement.verifiedLabel.key;
  if (node.metadata?.labels?.[labelKey] !== undefined) patch.push({ op: 'remove', path: `/metadata/labels/${esc(labelKey)}` });
  const taints = node.spec?.taints ?? [];
  const tainted = config.nodeManagement.taints.some((want) => taints.some((t) => t.key === want.key && t.effect === want.effect));
  if (taint && !tainted) {
    const want = config.nodeManagement.taints[0]!;
    const value = { key: want.key, value: want.value, effect: want.effect };
    patch.push(node.spec?.taints ? { op: 'add', path: '/spec/taints/-', value } : { op: 'add', path: '/spec/taints', value: [value] });
  }
  if (taint || tainted || config.nodeManagement.verifyUntaintedNodes) return { patch, deleteVerification: true };
  const read = stateOf(nv, node);
  const phase = read.kind === 'ok' ? read.state.phase : undefined;
  if (phase === 'Passed' || phase === 'Verifying' || phase === 'Backoff') return { patch, deleteVerification: false };
  const progress = phase === undefined ? 'no NodeVerification of its own' : `its NodeVerification says ${phase}`;
  throw new ConfigError(
    `the node carries no verification taint and ${progress}: the controller would not verify it again without the taint. ` +
      'Run it without --no-taint, or set nodeManagement.verifyUntaintedNodes',
    '--no-taint',
  );
}

/** The node's NodeVerification, or undefined when it has none. */
async function readVerification(kc: KubeConfig, name: string): Promise<NodeVerification | undefined> {
  const { group, version, plural } = NodeVerificationApi;
  try {
    return (await kc.makeApiClient(CustomObjectsApi).getClusterCustomObject({ group, version, plural, name })) as NodeVerification;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw new Error(`reading its NodeVerification: ${errorMessage(err)}`, { cause: err });
  }
}

async function deleteVerification(kc: KubeConfig, name: string): Promise<void> {
  const { group, version, plural } = NodeVerificationApi;
  try {
    await kc.makeApiClient(CustomObjectsApi).deleteClusterCustomObject({ group, version, plural, name });
  } catch (err) {
    // Gone already (never verified, or deleted meanwhile): nothing to reset.
    if ((err as { code?: number }).code === 404) return;
    throw new Error(`deleting its NodeVerification: ${errorMessage(err)}`, { cause: err });
  }
}

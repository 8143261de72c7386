import { parseArgs } from 'node:util';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Node } from '@kubernetes/client-node';
import { ConfigError, ExitCode, errorMessage } from '@kube-node-ready/core';
import { FIELD_MANAGER, STATE_ANNOTATION_KEYS, type ControllerConfig } from '@kube-node-ready/controller';
import { controllerConfig, kubeConfig } from './kube.js';

export const VERIFY_USAGE = `usage: kube-node-ready verify NODE [--kubeconfig PATH] [--config PATH] [--no-taint] [--dry-run]

Starts a new verification of NODE: removes the verified label and the stored progress
(attempts, backoff, last outcome) and, unless --no-taint, puts the verification taint back so
no new pod lands on the node until it passes again (running pods stay). The controller then
verifies it like a new node. One write, guarded by the node's resourceVersion.
  --config PATH   the controller's configuration (taint and label names); defaults otherwise
  --no-taint      leave the node open while it is verified again
  --dry-run       print the patch instead of sending it`;

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
    const core = kubeConfig(values.kubeconfig).makeApiClient(CoreV1Api);
    for (let attempt = 1; ; attempt++) {
      const current = await core.readNode({ name: node });
      const patch = reverifyPatch(current, config, !values['no-taint']);
      if (values['dry-run']) {
        console.log(JSON.stringify(patch, null, 2));
        return ExitCode.OK;
      }
      try {
        await core.patchNode({ name: node, body: patch, fieldManager: FIELD_MANAGER }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
        console.log(`node/${node}: verification restarted${values['no-taint'] ? '' : ' (taint set until it passes)'}`);
        return ExitCode.OK;
      } catch (err) {
        // 409/422 from the resourceVersion test: someone else wrote the node; read it again.
        const code = (err as { code?: number }).code;
        if ((code === 409 || code === 422) && attempt < 5) continue;
        throw err;
      }
    }
  } catch (err) {
    console.error(`kube-node-ready verify: node ${node}: ${errorMessage(err)}`);
    return err instanceof ConfigError ? ExitCode.CONFIG_ERROR : ExitCode.INTERNAL_ERROR;
  }
}

/** JSON patch guarded by the node's resourceVersion: drop the label and our annotations, optionally add the taint. */
export function reverifyPatch(node: V1Node, config: Readonly<ControllerConfig>, taint: boolean): object[] {
  const esc = (k: string) => k.replace(/~/g, '~0').replace(/\//g, '~1');
  const ops: object[] = [{ op: 'test', path: '/metadata/resourceVersion', value: node.metadata?.resourceVersion }];
  const labelKey = config.nodeManagement.verifiedLabel.key;
  if (node.metadata?.labels?.[labelKey] !== undefined) ops.push({ op: 'remove', path: `/metadata/labels/${esc(labelKey)}` });
  for (const key of STATE_ANNOTATION_KEYS) {
    if (node.metadata?.annotations?.[key] !== undefined) ops.push({ op: 'remove', path: `/metadata/annotations/${esc(key)}` });
  }
  if (taint) {
    const want = config.nodeManagement.taints[0]!;
    const has = (node.spec?.taints ?? []).some((t) => t.key === want.key && t.effect === want.effect);
    if (!has) {
      const value = { key: want.key, value: want.value, effect: want.effect };
      ops.push(node.spec?.taints ? { op: 'add', path: '/spec/taints/-', value } : { op: 'add', path: '/spec/taints', value: [value] });
    }
  }
  return ops;
}

import type { KubeConfig } from '@kubernetes/client-node';
import { ConfigError, errorMessage } from '@kube-node-ready/core';
import { loadConfig, PooledKubeConfig, type ControllerConfig } from '@kube-node-ready/controller';

/** --kubeconfig PATH, else KUBECONFIG / ~/.kube/config / in-cluster. */
export function kubeConfig(path: string | undefined): KubeConfig {
  const kc = new PooledKubeConfig();
  try {
    if (path) kc.loadFromFile(path);
    else kc.loadFromDefault();
    kc.inlineCredentialFiles();
  } catch (err) {
    throw new ConfigError(`cannot load kubeconfig${path ? ` ${path}` : ''}: ${errorMessage(err)}`, '--kubeconfig');
  }
  return kc;
}

/** The controller configuration the tool should interpret nodes with (--config), or the defaults. */
export function controllerConfig(path: string | undefined): Readonly<ControllerConfig> {
  return loadConfig(path, {});
}

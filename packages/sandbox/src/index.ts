export { sandboxLayout, type SandboxLayout, type SandboxState } from './layout.js';
export { startSandbox, stopSandbox, connectSandbox, execInSandbox, ensureBinaries, repoRoot, type SandboxConnection, type StartOptions } from './sandbox.js';
export { simulatedNode, SIMULATED_LABEL, FAULT, type NodeSpecOptions } from './node-registry.js';
export { DNS_CONFIGMAP, type DnsMode } from './dns.js';
export { k8s, loadKubeConfig, statusCode } from './kube.js';
export { sandboxControl } from './control.js';
export { startFaultProxy, type FaultProxy, type Faults } from './fault-proxy.js';
export { certPaths } from './certs.js';

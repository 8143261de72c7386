// The entry point of dist/chaos.mjs: the Node.js version first (a single line instead of a
// dependency's stack trace on an older Node.js), then the fault suite, loaded only once it passed.
import { exitUnlessSupportedNode } from '@kube-node-ready/core/node-version';

exitUnlessSupportedNode('chaos');
await import('./main.js');

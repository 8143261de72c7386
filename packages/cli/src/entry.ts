// The entry point of dist/kube-node-ready.mjs: the Node.js version first (a single line instead of a
// dependency's stack trace on an older Node.js), then the command line, loaded only once it passed.
import { exitUnlessSupportedNode } from '@kube-node-ready/core/node-version';

exitUnlessSupportedNode('kube-node-ready');
await import('./main.js');

// The entry point of dist/bench.mjs: the Node.js version first (a single line instead of a
// dependency's stack trace on an older Node.js), then the benchmark, loaded only once it passed.
import { exitUnlessSupportedNode } from '@kube-node-ready/core/node-version';

exitUnlessSupportedNode('bench');
await import('./main.js');

// Assembles dist/image/: exactly what the container image copies (the self-contained bundle, its
// chunks and source maps). Run after scripts/bundle.mjs.
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = `${root}/dist/image`;
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const f of ['kube-node-ready.mjs', 'kube-node-ready.mjs.map', 'chunks']) cpSync(`${root}/dist/${f}`, `${out}/${f}`, { recursive: true });
writeFileSync(`${out}/README`, 'kube-node-ready: run as `node kube-node-ready.mjs <controller|worker|status|verify|--version>`\n');
console.log(`assembled ${out}`);

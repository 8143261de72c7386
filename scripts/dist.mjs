// Assembles dist/image/: exactly what the container image copies (the self-contained bundle and
// its source map). Run after scripts/bundle.mjs.
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = `${root}/dist/image`;
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const f of ['kube-node-ready.mjs', 'kube-node-ready.mjs.map']) copyFileSync(`${root}/dist/${f}`, `${out}/${f}`);
writeFileSync(`${out}/README`, 'kube-node-ready: run as `node --enable-source-maps kube-node-ready.mjs <controller|worker|status|verify|--version>`\n');
console.log(`assembled ${out}`);

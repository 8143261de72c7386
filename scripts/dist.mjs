// Assembles dist/image/: exactly what the container image copies (the self-contained bundle, its
// chunks and source maps), and, for each npm package bundled into it, node_modules/<name>/ with
// that package's name, version and licence (package.json) and its licence text: what an SBOM
// generator reads to list them (docs/supply-chain.md#the-sbom), and the notices their licences ask
// to ship with them. Nothing loads them: the bundle resolves no package at run time. Run after
// scripts/bundle.mjs.
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = `${root}/dist/image`;
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const f of ['kube-node-ready.mjs', 'kube-node-ready.mjs.map', 'chunks']) cpSync(`${root}/dist/${f}`, `${out}/${f}`, { recursive: true });
const packages = JSON.parse(readFileSync(`${root}/dist/bundled-packages.json`, 'utf8'));
for (const p of packages) {
  // Where npm installed it (node_modules/<name>, or nested under the package that needed another version).
  if (!p.dir.startsWith('node_modules/')) throw new Error(`bundled package ${p.name} is not under node_modules/: ${p.dir}`);
  const dir = `${out}/${p.dir}`;
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/package.json`, `${JSON.stringify({ name: p.name, version: p.version, license: p.license }, null, 2)}\n`);
  const src = `${root}/${p.dir}`;
  for (const f of readdirSync(src).filter((f) => /^(licen[cs]e|copying|notice)/i.test(f)).sort()) cpSync(`${src}/${f}`, `${dir}/${f}`);
}
writeFileSync(`${out}/README`, 'kube-node-ready: run as `node kube-node-ready.mjs <controller|worker|status|verify|--version>`\n');
console.log(`assembled ${out} (${packages.length} bundled npm packages recorded in node_modules/)`);

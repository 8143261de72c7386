// `make image-lock`: resolves what image/image.yaml names to exact versions and hashes and writes
// image/lock.json, which `make image` then builds from (and checks every download against):
//   - each Debian package, per architecture: the candidate version in the definition's archives,
//     its pool file name and SHA-256 (from the signed package index);
//   - the Node.js binary package of each platform: its npm integrity hash.
// Review the diff and commit it; a new lock gives a new image digest.
import { writeFileSync } from 'node:fs';
import { LOCK, aptFor, loadDefinition, platformParts, run, step } from './lib.mjs';

const def = loadDefinition();
const lock = {
  $comment: 'Written by `make image-lock` (scripts/image/lock.mjs) from image/image.yaml: do not edit by hand.',
  node: { version: String(def.node.version), platforms: {} },
  debian: { suite: def.debian.suite, platforms: {} },
};

for (const platform of def.platforms) {
  const { debianArch, nodePackage } = platformParts(platform);
  step(`${platform}: resolving ${def.debian.packages.length} Debian packages (${def.debian.suite}, ${debianArch})`);
  const apt = aptFor(def, debianArch);
  apt.ensureLists();
  lock.debian.platforms[platform] = def.debian.packages.map((name) => {
    const f = apt.show(name);
    const entry = { package: name, version: f.get('Version'), architecture: f.get('Architecture'), filename: f.get('Filename'), sha256: f.get('SHA256') };
    for (const [k, v] of Object.entries(entry)) if (!v) throw new Error(`apt-cache show ${name}:${debianArch} gave no ${k}`);
    process.stderr.write(`    ${name} ${entry.version}\n`);
    return entry;
  });
  const spec = `${nodePackage}@${def.node.version}`;
  step(`${platform}: ${spec} from the npm registry`);
  const integrity = run('npm', ['view', spec, 'dist.integrity']).trim();
  if (!integrity.startsWith('sha512-')) throw new Error(`npm view ${spec} dist.integrity gave "${integrity}": is ${def.node.version} published for this platform?`);
  lock.node.platforms[platform] = { package: nodePackage, integrity };
}

writeFileSync(LOCK, `${JSON.stringify(lock, null, 2)}\n`);
step(`wrote ${LOCK}: review with git diff, then commit it`);

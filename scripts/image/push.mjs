// `make image-push IMAGE=registry.example.com/knr:1.0.0`: pushes the image index `make image` wrote
// (dist/kube-node-ready-oci.tar) to IMAGE with crane, every blob and manifest as it is, so the
// digests `make image` printed are the ones the registry serves. Credentials: crane's (a Docker
// config.json, `crane auth login`); plain HTTP only for a registry on localhost.
//   node scripts/image/push.mjs IMAGE
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { imageCache, root, run, step, toolsDir } from './lib.mjs';

const target = process.argv[2];
if (!target) throw new Error('usage: node scripts/image/push.mjs IMAGE (a registry reference such as registry.example.com/knr:1.0.0)');
const tar = join(root, 'dist', 'kube-node-ready-oci.tar');
const { index } = JSON.parse(readFileSync(tar.replace(/\.tar$/, '.json'), 'utf8'));
const crane = join(toolsDir(['crane']), 'crane');
mkdirSync(imageCache, { recursive: true });
const layout = mkdtempSync(join(imageCache, 'push-'));
try {
  run('tar', ['-xf', tar, '-C', layout]);
  step(`crane push ${target}`);
  // The layout's one entry is the index: pushed as it is (--index would wrap it in another).
  const pushed = run(crane, ['push', layout, target]).trim().split('\n').pop();
  const digest = pushed.split('@')[1];
  if (digest !== index) throw new Error(`the registry holds ${digest} for ${target}, make image built ${index}`);
  console.log(`pushed ${pushed}`);
} finally {
  rmSync(layout, { recursive: true, force: true });
}

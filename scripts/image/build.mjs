// `make image`: the multi-platform container image, built without a Docker engine from
// image/image.yaml and the exact inputs image/lock.json pins (docs/supply-chain.md):
//   1. per platform, three layer tarballs written by GNU tar with fixed owners, times and order:
//      the Debian base (packages from the lock, checked by SHA-256), Node.js (the npm registry's
//      official binary, checked by its integrity hash) and the app (dist/image/);
//   2. crane (go-containerregistry, built from the Go module proxy) appends them to an empty OCI
//      image, sets the config (user, entrypoint, working directory, env, labels, platform) and joins
//      the platforms in one index, in a registry of its own on loopback that lives for the build;
//   3. crane pulls the index into an OCI image layout, written as dist/kube-node-ready-oci.tar;
//   4. syft (also from the Go module proxy) writes an SPDX SBOM of each platform image beside it.
// The same commit gives the same digests: nothing in the layers or configs depends on when or where
// it was built. Prints the index digest and each platform's digest and sizes, and writes them to
// dist/kube-node-ready-oci.json.
//   node scripts/image/build.mjs [--platforms linux/amd64,...] [--no-sbom]
// `make image-push IMAGE=...` (scripts/image/push.mjs) pushes the result.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, createReadStream, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { aptFor, imageCache, loadDefinition, loadLock, platformParts, root, run, step, toolsDir } from './lib.mjs';

const { values: flags } = parseArgs({
  options: {
    platforms: { type: 'string' },
    'no-sbom': { type: 'boolean', default: false },
    out: { type: 'string', default: join(root, 'dist', 'kube-node-ready-oci.tar') },
  },
});
process.umask(0o022);
const started = Date.now();
const def = loadDefinition();
const lock = loadLock();
const platforms = flags.platforms ? flags.platforms.split(',') : def.platforms;
const version = JSON.parse(readFileSync(join(root, 'packages/cli/package.json'), 'utf8')).version;
const revision = gitOr(['rev-parse', 'HEAD'], 'unknown');
// Every file's time in every layer: the commit's (reproducible-builds.org's SOURCE_DATE_EPOCH).
const epoch = process.env.SOURCE_DATE_EPOCH || gitOr(['log', '-1', '--format=%ct'], '0');

checkLock();
const appDir = join(root, def.app.from);
if (!existsSync(join(appDir, 'kube-node-ready.mjs'))) throw fail(`${def.app.from} has no kube-node-ready.mjs: run \`make dist\` first (make image does)`);

step('the OCI tools (crane, syft): packages/sandbox/go/build.sh, cached after the first build');
const tools = toolsDir(flags['no-sbom'] ? ['crane'] : ['crane', 'syft']);
const syft = join(tools, 'syft');

mkdirSync(imageCache, { recursive: true });
const work = mkdtempSync(join(imageCache, 'build-'));
let registry;
try {
  const layers = {};
  for (const [i, platform] of platforms.entries()) {
    step(`[${i + 1}/${platforms.length}] ${platform}: layers`);
    layers[platform] = await platformLayers(platform, join(work, platform.replace('/', '-')));
  }

  step('crane: a registry of its own on loopback for the build');
  registry = await startRegistry();
  const repo = `${registry.address}/kube-node-ready`;
  const manifests = [];
  for (const platform of platforms) {
    const l = layers[platform];
    const appended = craneOut(['append', '--oci-empty-base', ...l.flatMap((f) => ['-f', f]), '-t', `${repo}:layers-${platformParts(platform).arch}`]);
    const mutated = craneOut([
      'mutate', appended,
      '--set-platform', platform,
      '--user', def.user,
      '--workdir', def.workdir,
      '--entrypoint', def.entrypoint.join(','),
      ...Object.entries(def.env).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
      ...Object.entries(labels()).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
      '-t', `${repo}:${platformParts(platform).arch}`,
    ]);
    manifests.push(mutated);
    step(`${platform}: ${mutated.split('@')[1]}`);
  }
  const index = craneOut(['index', 'append', ...manifests.flatMap((m) => ['-m', m]), '-t', `${repo}:index`]);
  const indexDigest = index.split('@')[1];

  step(`crane: the index into an OCI image layout, ${relative(root, flags.out)}`);
  const layout = join(work, 'layout');
  crane(['pull', '--format', 'oci', `${repo}@${indexDigest}`, layout]);
  mkdirSync(join(flags.out, '..'), { recursive: true });
  tarDeterministic(layout, `${flags.out}.tmp`, { owner: 0, mode: 'a+rX,u+w,go-w' });
  renameSync(`${flags.out}.tmp`, flags.out);

  const result = describe(layout, indexDigest);
  if (!flags['no-sbom']) {
    for (const p of result.platforms) {
      const file = `${flags.out.replace(/-oci\.tar$/, '')}-sbom-${p.platform.replace('/', '-')}.spdx.json`;
      step(`syft: SBOM of ${p.platform} -> ${relative(root, file)}`);
      run(syft, ['scan', `oci-dir:${layout}`, '--platform', p.platform, '--source-name', 'kube-node-ready', '--source-version', version, '-o', `spdx-json=${file}`, '-q'], {
        env: { ...process.env, SYFT_CHECK_FOR_APP_UPDATE: 'false' },
      });
      p.sbom = relative(join(flags.out, '..'), file);
      p.sbomPackages = JSON.parse(readFileSync(file, 'utf8')).packages?.length ?? 0;
    }
  }
  writeFileSync(flags.out.replace(/\.tar$/, '.json'), `${JSON.stringify(result, null, 2)}\n`);

  console.log(`image index ${result.index} (kube-node-ready ${version}, ${revision.slice(0, 12)}): ${relative(root, flags.out)}, ${mib(statSync(flags.out).size)}`);
  for (const p of result.platforms) {
    console.log(`  ${p.platform.padEnd(12)} ${p.digest}  compressed ${mib(p.compressedBytes)}, uncompressed ${mib(p.uncompressedBytes)}${p.sbom ? `, SBOM ${p.sbom} (${p.sbomPackages} packages)` : ''}`);
  }
  console.log(`built in ${((Date.now() - started) / 1000).toFixed(0)} s`);
} finally {
  registry?.stop();
  rmSync(work, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------

function fail(msg) {
  return new Error(`make image: ${msg}`);
}

function gitOr(args, fallback) {
  try {
    return run('git', args, { cwd: root }).trim() || fallback;
  } catch {
    return fallback;
  }
}

function mib(bytes) {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

function labels() {
  const all = { ...def.labels, 'org.opencontainers.image.version': version, 'org.opencontainers.image.revision': revision };
  // crane reads --label as comma-separated key=value pairs.
  for (const [k, v] of Object.entries(all)) if (/[,"]/.test(String(v))) throw fail(`label ${k}: a value may not contain a comma or a double quote`);
  return all;
}

/** The lock must cover exactly what the definition asks for: a stale lock is a mistake, not a default. */
function checkLock() {
  const stale = (why) => fail(`image/lock.json does not match image/image.yaml (${why}): run \`make image-lock\`, review and commit`);
  if (String(lock.node?.version) !== String(def.node.version)) throw stale(`node ${lock.node?.version} vs ${def.node.version}`);
  for (const platform of platforms) {
    if (!def.platforms.includes(platform)) throw fail(`--platforms ${platform} is not in image/image.yaml`);
    const debs = lock.debian?.platforms?.[platform];
    if (!debs || !lock.node.platforms[platform]) throw stale(`no entry for ${platform}`);
    const locked = debs.map((d) => d.package).join(' ');
    if (locked !== def.debian.packages.join(' ')) throw stale(`packages ${locked}`);
  }
}

function crane(args) {
  return run(join(tools, 'crane'), ['--insecure', ...args]);
}

/** A crane command that prints one image reference. */
function craneOut(args) {
  return crane(args).trim().split('\n').pop();
}

async function sha(file, algorithm, encoding) {
  const h = createHash(algorithm);
  for await (const chunk of createReadStream(file)) h.update(chunk);
  return h.digest(encoding);
}

/** The three layer tarballs of one platform: base, node, app. */
async function platformLayers(platform, dir) {
  const { debianArch, nodePackage } = platformParts(platform);
  const base = join(dir, 'base');
  const nodeRoot = join(dir, 'node');
  const app = join(dir, 'app');
  for (const d of [base, nodeRoot, app]) mkdirSync(d, { recursive: true });

  // Debian packages: from the cache, else downloaded by apt; each checked against the lock.
  const debCache = join(imageCache, 'debs');
  mkdirSync(debCache, { recursive: true });
  let apt;
  const statusDir = join(base, 'var/lib/dpkg/status.d');
  mkdirSync(statusDir, { recursive: true });
  for (const d of lock.debian.platforms[platform]) {
    const file = join(debCache, d.filename.split('/').pop());
    if (!existsSync(file) || (await sha(file, 'sha256', 'hex')) !== d.sha256) {
      rmSync(file, { force: true });
      apt ??= aptFor(def, debianArch);
      process.stderr.write(`    downloading ${d.package} ${d.version} (${debianArch})\n`);
      apt.ensureLists();
      try {
        apt.download(d.package, d.version, debCache);
      } catch (err) {
        throw fail(`apt-get download ${d.package}:${debianArch}=${d.version} failed (${String(err.stderr || err.message).trim()}). The archive may have replaced that version: run \`make image-lock\`, review and commit`);
      }
    }
    const got = await sha(file, 'sha256', 'hex');
    if (got !== d.sha256) throw fail(`${file}: SHA-256 ${got}, image/lock.json says ${d.sha256}`);
    run('dpkg-deb', ['-x', file, base]);
    // dpkg's record of the package, where distroless puts it and scanners look for it.
    writeFileSync(join(statusDir, d.package), `${run('dpkg-deb', ['-f', file]).trimEnd()}\nStatus: install ok installed\n`);
    const md5sums = run('dpkg-deb', ['-I', file, 'md5sums']);
    if (md5sums) writeFileSync(join(statusDir, `${d.package}.md5sums`), md5sums);
  }
  pruneBase(base);

  // Node.js: the npm registry's package of the official binary; npm checks the registry's hash, we check the lock's.
  const n = lock.node.platforms[platform];
  const tgz = join(imageCache, 'node', `${nodePackage}-${lock.node.version}.tgz`);
  if (!existsSync(tgz) || `sha512-${await sha(tgz, 'sha512', 'base64')}` !== n.integrity) {
    mkdirSync(join(tgz, '..'), { recursive: true });
    process.stderr.write(`    downloading ${nodePackage}@${lock.node.version} from the npm registry\n`);
    run('npm', ['pack', `${nodePackage}@${lock.node.version}`, '--pack-destination', join(tgz, '..'), '--silent']);
  }
  const integrity = `sha512-${await sha(tgz, 'sha512', 'base64')}`;
  if (integrity !== n.integrity) throw fail(`${tgz}: integrity ${integrity}, image/lock.json says ${n.integrity}`);
  const unpacked = join(dir, 'node-unpacked');
  mkdirSync(unpacked);
  run('tar', ['-xzf', tgz, '-C', unpacked, 'package/bin/node', 'package/LICENSE']);
  const nodeDir = join(nodeRoot, def.node.dir);
  mkdirSync(join(nodeDir, 'bin'), { recursive: true });
  cpSync(join(unpacked, 'package/bin/node'), join(nodeDir, 'bin/node'));
  cpSync(join(unpacked, 'package/LICENSE'), join(nodeDir, 'LICENSE'));
  chmodSync(join(nodeDir, 'bin/node'), 0o755);

  // The app.
  cpSync(appDir, join(app, def.app.to), { recursive: true });

  const out = [join(dir, 'base.tar'), join(dir, 'node.tar'), join(dir, 'app.tar')];
  // The base keeps the packages' own modes; the home directory belongs to the user.
  const [uid] = def.user.split(':').map(Number);
  tarDeterministic(base, out[0], { owner: 0, exclude: `home/nonroot` });
  tarDeterministic(base, out[0], { owner: uid, only: 'home/nonroot', append: true });
  tarDeterministic(nodeRoot, out[1], { owner: 0, mode: 'a+rX,u+w,go-w' });
  tarDeterministic(app, out[2], { owner: 0, mode: 'a+rX,u+w,go-w' });
  return out;
}

/**
 * What the image keeps of the packages, and the files no maintainer script writes here: the CA
 * bundle, the users, nsswitch.conf, /tmp and the home directory.
 */
function pruneBase(base) {
  // Documentation, man pages, lintian overrides: gone; each package's copyright stays.
  const doc = join(base, 'usr/share/doc');
  for (const pkg of existsSync(doc) ? readdirSync(doc) : []) {
    for (const f of readdirSync(join(doc, pkg))) if (f !== 'copyright') rmSync(join(doc, pkg, f), { recursive: true, force: true });
  }
  for (const d of ['usr/share/man', 'usr/share/info', 'usr/share/lintian', 'usr/share/doc-base', 'usr/share/bug', 'usr/share/gcc', 'usr/share/gdb']) rmSync(join(base, d), { recursive: true, force: true });
  // update-ca-certificates' bundle: every certificate the package ships, in the order it writes them.
  const certs = join(base, 'usr/share/ca-certificates');
  const pems = run('find', [certs, '-name', '*.crt', '-type', 'f'], { env: { LC_ALL: 'C' } })
    .trim()
    .split('\n')
    .map((p) => relative(certs, p))
    .sort();
  if (pems.length < 100) throw fail(`ca-certificates gave only ${pems.length} certificates`);
  mkdirSync(join(base, 'etc/ssl/certs'), { recursive: true });
  writeFileSync(join(base, 'etc/ssl/certs/ca-certificates.crt'), pems.map((p) => `${readFileSync(join(certs, p), 'utf8').trimEnd()}\n`).join(''));
  const [uid, gid] = def.user.split(':');
  writeFileSync(
    join(base, 'etc/passwd'),
    `root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:${uid}:${gid}:nonroot:${def.workdir}:/sbin/nologin\n`,
  );
  writeFileSync(join(base, 'etc/group'), `root:x:0:\nnobody:x:65534:\nnonroot:x:${gid}:\n`);
  writeFileSync(join(base, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n');
  mkdirSync(join(base, 'tmp'), { recursive: true });
  chmodSync(join(base, 'tmp'), 0o1777);
  mkdirSync(join(base, def.workdir), { recursive: true });
  chmodSync(join(base, def.workdir), 0o700);
  mkdirSync(join(base, 'root'), { recursive: true });
  chmodSync(join(base, 'root'), 0o700);
}

/**
 * GNU tar with what makes an archive reproducible: entries sorted by name, every time set to the
 * epoch, numeric owners, no access/change times, ACLs or extended attributes, no "./" prefix.
 */
function tarDeterministic(dir, file, { owner, mode, exclude, only, append = false }) {
  const entries = only ? [only] : readdirSync(dir).sort();
  const args = [
    append ? '-rf' : '-cf', file,
    '--format=gnu', '--sort=name', `--mtime=@${epoch}`, `--owner=${owner}`, `--group=${owner}`, '--numeric-owner',
    '--no-acls', '--no-xattrs', '--no-selinux',
    ...(mode ? [`--mode=${mode}`] : []),
    ...(exclude ? [`--exclude=./${exclude}`, `--exclude=${exclude}`] : []),
    '-C', dir, '--', ...entries,
  ];
  run('tar', args, { env: { ...process.env, LC_ALL: 'C' } });
}

/** What the layout holds: the index, and each platform's digest and sizes. */
function describe(layout, indexDigest) {
  const blob = (digest) => JSON.parse(readFileSync(join(layout, 'blobs', ...digest.split(':')), 'utf8'));
  const index = blob(indexDigest);
  return {
    index: indexDigest,
    version,
    revision,
    node: lock.node.version,
    platforms: index.manifests.map((m) => {
      const manifest = blob(m.digest);
      const config = blob(manifest.config.digest);
      const uncompressed = manifest.layers.reduce((sum, l) => sum + gunzipSize(join(layout, 'blobs', ...l.digest.split(':'))), 0);
      return {
        platform: `${m.platform.os}/${m.platform.architecture}`,
        digest: m.digest,
        compressedBytes: manifest.layers.reduce((sum, l) => sum + l.size, 0) + manifest.config.size + m.size,
        uncompressedBytes: uncompressed,
        layers: manifest.layers.map((l) => l.digest),
        user: config.config.User,
        entrypoint: config.config.Entrypoint,
      };
    }),
  };
}

/** The uncompressed size of a gzip blob (gzip -l is wrong past 4 GiB; these are far below). */
function gunzipSize(file) {
  return Number(run('bash', ['-c', 'gzip -dc "$1" | wc -c', '-', file]).trim());
}

/** crane's own registry (in memory), on a free loopback port, for the length of the build. */
async function startRegistry() {
  const port = await new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const address = `127.0.0.1:${port}`;
  const proc = spawn(join(tools, 'crane'), ['registry', 'serve', '--address', address], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (b) => (stderr += b));
  for (let i = 0; ; i++) {
    try {
      const res = await globalThis.fetch(`http://${address}/v2/`);
      if (res.ok) break;
    } catch {
      /* not listening yet */
    }
    if (proc.exitCode !== null || i > 100) throw fail(`crane registry serve on ${address} did not start: ${stderr.trim()}`);
    await sleep(100);
  }
  return { address, stop: () => proc.kill() };
}

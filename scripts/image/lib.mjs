// What `make image` and `make image-lock` share: the image definition (image/image.yaml), its lock
// (image/lock.json), the cache, and apt with a state of its own per architecture (the machine's own
// apt configuration and architecture list are never touched).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const DEFINITION = join(root, 'image', 'image.yaml');
export const LOCK = join(root, 'image', 'lock.json');
export const cacheRoot = process.env.KNR_CACHE_DIR || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'kube-node-ready');
export const imageCache = join(cacheRoot, 'image');

/** image/image.yaml, parsed. */
export function loadDefinition() {
  return YAML.parse(readFileSync(DEFINITION, 'utf8'));
}

/** image/lock.json, parsed; a missing lock says how to make one. */
export function loadLock() {
  if (!existsSync(LOCK)) throw new Error(`${LOCK} is missing: run \`make image-lock\` and commit it`);
  return JSON.parse(readFileSync(LOCK, 'utf8'));
}

/** linux/amd64 -> the Debian architecture and the npm package of the Node.js binary. */
export function platformParts(platform) {
  const arch = { 'linux/amd64': 'amd64', 'linux/arm64': 'arm64' }[platform];
  if (!arch) throw new Error(`unsupported platform ${platform}: image/image.yaml may list linux/amd64 and linux/arm64`);
  return { arch, debianArch: arch, nodePackage: `node-linux-${arch === 'amd64' ? 'x64' : 'arm64'}` };
}

export function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 << 20, ...opts });
}

/**
 * apt for one Debian architecture with its own sources, lists and cache under the image cache:
 * `apt-get update` there (once per call of ensureLists), `apt-cache show`, `apt-get download`.
 * The archives are checked against the keyring the definition names, as apt always does.
 */
export function aptFor(def, debianArch) {
  const dir = join(imageCache, 'apt', `${def.debian.suite}-${debianArch}`);
  for (const d of ['lists/partial', 'cache/archives/partial', 'state', 'empty']) mkdirSync(join(dir, d), { recursive: true });
  if (!existsSync(join(dir, 'status'))) writeFileSync(join(dir, 'status'), '');
  const sources = def.debian.archives
    .flatMap((a) => a.suites.map((s) => `deb [signed-by=${def.debian.keyring}] ${a.uri} ${s} main\n`))
    .join('');
  writeFileSync(join(dir, 'sources.list'), sources);
  const opts = [
    `Dir::State=${dir}/state`,
    `Dir::State::Lists=${dir}/lists`,
    `Dir::State::status=${dir}/status`,
    `Dir::Cache=${dir}/cache`,
    `Dir::Etc::SourceList=${dir}/sources.list`,
    `Dir::Etc::SourceParts=${dir}/empty`,
    `Dir::Etc::Preferences=${dir}/empty/preferences`,
    `Dir::Etc::PreferencesParts=${dir}/empty`,
    `APT::Architecture=${debianArch}`,
    `APT::Architectures=${debianArch}`,
    'Acquire::Languages=none',
    'APT::Sandbox::User=root',
    'Debug::NoLocking=1',
  ].flatMap((o) => ['-o', o]);
  let updated = false;
  return {
    ensureLists() {
      if (updated) return;
      if (!existsSync(def.debian.keyring)) throw new Error(`${def.debian.keyring} is missing: apt-get install debian-archive-keyring`);
      run('apt-get', [...opts, '-qq', 'update']);
      updated = true;
    },
    /** The candidate's control paragraph, as a map. */
    show(pkg) {
      const text = run('apt-cache', [...opts, 'show', '--no-all-versions', `${pkg}:${debianArch}`]);
      return parseControl(text);
    },
    /** Downloads pkg=version into dir (apt checks it against the signed index). */
    download(pkg, version, into) {
      run('apt-get', [...opts, '-qq', 'download', `${pkg}:${debianArch}=${version}`], { cwd: into });
    },
  };
}

/** A Debian control paragraph (the first one) as a map of field -> value. */
export function parseControl(text) {
  const fields = new Map();
  let last = '';
  for (const line of text.split('\n')) {
    if (line === '') {
      if (fields.size) break;
      continue;
    }
    if (/^\s/.test(line) && last) fields.set(last, `${fields.get(last)}\n${line}`);
    else {
      const i = line.indexOf(':');
      last = line.slice(0, i);
      fields.set(last, line.slice(i + 1).trim());
    }
  }
  return fields;
}

/** A step line on stderr, so long builds show where they are. */
export function step(msg) {
  process.stderr.write(`==> ${msg}\n`);
}

/** The bin directory holding the named tools (packages/sandbox/go/build.sh prints it last). */
export function toolsDir(names) {
  const out = run('bash', [join(root, 'packages/sandbox/go/build.sh'), ...names], { stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').pop();
  for (const n of names) if (!existsSync(join(dir, n))) throw new Error(`build.sh printed ${dir}, which has no ${n}`);
  return dir;
}

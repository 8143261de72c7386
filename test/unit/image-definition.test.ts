// image/image.yaml describes the container image once; `make image` builds from it, and the
// Dockerfile (for `docker buildx` users) and the Makefile's PLATFORMS must say the same. Reads the
// files only: nothing here builds or pulls an image.
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { keyValues, stages, type Instruction } from './dockerfile.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const DEFINITION_TEXT = readFileSync(`${root}/image/image.yaml`, 'utf8');
const DOCKERFILE = readFileSync(`${root}/Dockerfile`, 'utf8');
const MAKEFILE = readFileSync(`${root}/Makefile`, 'utf8');

/** The fields of image/image.yaml that the Dockerfile and the Makefile also state. */
interface ImageDefinition {
  platforms: string[];
  user: string;
  workdir: string;
  entrypoint: string[];
  env: Record<string, string>;
  node: { version: string; dir: string };
  app: { from: string; to: string };
  labels: Record<string, string>;
}

const definition = (): ImageDefinition => parseYaml(DEFINITION_TEXT) as ImageDefinition;

/** Labels the build sets (make image from packages/cli/package.json and git), and the Dockerfile from these build args. */
const BUILD_LABELS: Record<string, string> = {
  'org.opencontainers.image.version': 'VERSION',
  'org.opencontainers.image.revision': 'COMMIT',
};

const show = (v: unknown) => (v === undefined ? '(nothing)' : JSON.stringify(v));
const differ = (field: string, yaml: unknown, docker: unknown) =>
  `${field}: image/image.yaml says ${show(yaml)}, the Dockerfile says ${show(docker)}`;
const last = (body: Instruction[], keyword: string) => body.filter((i) => i.keyword === keyword).at(-1);
const trimSlash = (p: string) => posix.normalize(p).replace(/(.)\/$/, '$1');

/**
 * Where the Dockerfile or the Makefile's PLATFORMS default differ from the image definition, one
 * line per difference naming the field and both values; empty when they agree.
 */
function compare(def: ImageDefinition, dockerfile: string, makefile: string): string[] {
  const problems: string[] = [];
  const all = stages(dockerfile);
  const final = all.at(-1);
  if (!final) return ['the Dockerfile has no FROM'];
  const body = final.body;

  // The process: the last USER, WORKDIR and ENTRYPOINT of the final stage are the image's.
  const user = last(body, 'USER')?.rest;
  if (user !== def.user) problems.push(differ('user', def.user, user));

  const workdirs = body.filter((i) => i.keyword === 'WORKDIR').map((i) => i.rest);
  if (workdirs.some((w) => !w.startsWith('/'))) problems.push(`workdir: the final stage's WORKDIR ${workdirs.join(', ')} must be absolute`);
  const workdir = workdirs.at(-1);
  if (workdir === undefined || trimSlash(workdir) !== trimSlash(def.workdir)) problems.push(differ('workdir', def.workdir, workdir));

  const entrypointText = last(body, 'ENTRYPOINT')?.rest;
  let entrypoint: unknown;
  try {
    entrypoint = entrypointText === undefined ? undefined : JSON.parse(entrypointText);
  } catch {
    entrypoint = entrypointText; // the shell form: never what the definition's list means
  }
  if (JSON.stringify(entrypoint) !== JSON.stringify(def.entrypoint)) problems.push(differ('entrypoint', def.entrypoint, entrypoint));
  // The definition has no command: one from the Dockerfile would be appended to the entrypoint.
  const cmd = last(body, 'CMD');
  if (cmd) problems.push(differ('cmd', undefined, cmd.rest));

  const env = new Map<string, string>();
  for (const i of body.filter((i) => i.keyword === 'ENV')) for (const [k, v] of keyValues(i.rest)) env.set(k, v);
  for (const key of new Set([...Object.keys(def.env), ...env.keys()])) {
    if (def.env[key] !== env.get(key)) problems.push(differ(`env.${key}`, def.env[key], env.get(key)));
  }

  // Node.js: the major the bundle is built with and the one the runtime base ships; distroless
  // nodejs images keep the binary at /nodejs/bin/node, which node.dir names for make image.
  const major = String(def.node.version).split('.')[0];
  const copies = body.filter((i) => ['COPY', 'ADD', 'RUN'].includes(i.keyword));
  const fromStage = /(?:^|\s)--from=(\S+)/.exec(copies[0]?.rest ?? '')?.[1]?.toLowerCase();
  const build = all.find((s) => s.name !== undefined && s.name === fromStage);
  const buildMajor = /(?:^|\/)node:(\d+)(?=[-.:@]|$)/.exec(build?.image ?? '')?.[1];
  if (buildMajor !== major) problems.push(`node.version: image/image.yaml says ${def.node.version} (major ${major}), the Dockerfile's build stage is ${show(build?.image)}`);
  const runtimeMajor = /^gcr\.io\/distroless\/nodejs(\d+)-/.exec(final.image)?.[1];
  if (runtimeMajor !== major) problems.push(`node.version: image/image.yaml says ${def.node.version} (major ${major}), the Dockerfile's runtime base is ${show(final.image)}`);
  const nodeBinary = posix.join(def.node.dir, 'bin/node');
  if (def.entrypoint[0] !== nodeBinary) problems.push(`node.dir: image/image.yaml puts node at ${nodeBinary}, its entrypoint runs ${show(def.entrypoint[0])}`);
  if (!Array.isArray(entrypoint) || entrypoint[0] !== nodeBinary) problems.push(differ('node.dir + /bin/node', nodeBinary, Array.isArray(entrypoint) ? entrypoint[0] : entrypoint));

  // The files: the app from the build stage's checkout and nothing else (the base brings the rest).
  const buildWorkdir = build?.body.filter((i) => i.keyword === 'WORKDIR').at(-1)?.rest ?? '/';
  const wanted = `COPY --from=${fromStage ?? 'build'} ${posix.join(buildWorkdir, def.app.from)} ${def.app.to}`;
  const words = copies[0]?.rest.split(/\s+/) ?? [];
  const [src, dest] = words.filter((w) => !w.startsWith('--'));
  const flags = words.filter((w) => w.startsWith('--'));
  const sameCopy =
    copies[0]?.keyword === 'COPY' &&
    build !== undefined &&
    flags.length === 1 &&
    words.length === 3 &&
    trimSlash(src ?? '') === trimSlash(posix.join(buildWorkdir, def.app.from)) &&
    trimSlash(dest ?? '') === trimSlash(def.app.to);
  if (!sameCopy) problems.push(differ('app', `${def.app.from} -> ${def.app.to}, as ${wanted}`, copies[0] ? `${copies[0].keyword} ${copies[0].rest}` : undefined));
  for (const extra of copies.slice(1)) problems.push(`app: the final stage writes more than the app: line ${extra.line} ${extra.keyword} ${extra.rest}`);

  // The labels: the definition's, plus version and revision from the build args.
  const labels = new Map<string, string>();
  for (const i of body.filter((i) => i.keyword === 'LABEL')) for (const [k, v] of keyValues(i.rest)) labels.set(k, v);
  for (const [key, value] of Object.entries(def.labels)) {
    if (key in BUILD_LABELS) problems.push(`labels.${key}: comes from the build, image/image.yaml should not set it (it says ${show(value)})`);
    else if (labels.get(key) !== value) problems.push(differ(`labels.${key}`, value, labels.get(key)));
  }
  for (const [key, arg] of Object.entries(BUILD_LABELS)) {
    const argIndex = body.findIndex((i) => i.keyword === 'ARG' && new RegExp(`^${arg}(?:=|$)`).test(i.rest));
    const labelIndex = body.findIndex((i) => i.keyword === 'LABEL' && keyValues(i.rest).has(key));
    const value = labels.get(key);
    if (value !== `\${${arg}}` && value !== `$${arg}`) problems.push(differ(`labels.${key}`, `the build's (ARG ${arg})`, value));
    else if (argIndex < 0 || argIndex > labelIndex) problems.push(`labels.${key}: the final stage must declare ARG ${arg} before its LABEL, or the label is empty`);
  }
  for (const key of labels.keys()) {
    if (!(key in def.labels) && !(key in BUILD_LABELS)) problems.push(differ(`labels.${key}`, undefined, labels.get(key)));
  }

  // The platforms `make docker-build` builds by default.
  const platforms = /^PLATFORMS\s*\?=\s*(.*?)\s*$/m.exec(makefile)?.[1];
  if (platforms !== def.platforms.join(',')) {
    problems.push(`platforms: image/image.yaml says ${show(def.platforms.join(','))}, the Makefile's PLATFORMS ?= says ${show(platforms)}`);
  }
  return problems;
}

describe('the Dockerfile and the Makefile say what image/image.yaml says', () => {
  it('agree on user, workdir, entrypoint, env, Node.js, files, labels and platforms', () => {
    expect(compare(definition(), DOCKERFILE, MAKEFILE)).toEqual([]);
  });

  const APP = 'COPY --from=build /src/dist/image /app\n';
  it.each<[string, (d: string) => string, string]>([
    ['another USER', (d) => d.replace(/^USER .*$/m, 'USER 0:0'), 'user: image/image.yaml says "65532:65532", the Dockerfile says "0:0"'],
    ['no USER', (d) => d.replace(/^USER .*\n/m, ''), 'user: image/image.yaml says "65532:65532", the Dockerfile says (nothing)'],
    ['another ENTRYPOINT', (d) => d.replace('"/app/kube-node-ready.mjs"]', '"--enable-source-maps", "/app/kube-node-ready.mjs"]'), 'entrypoint: image/image.yaml says ["/nodejs/bin/node","/app/kube-node-ready.mjs"], the Dockerfile says ["/nodejs/bin/node","--enable-source-maps","/app/kube-node-ready.mjs"]'],
    ['a shell-form ENTRYPOINT', (d) => d.replace(/^ENTRYPOINT .*$/m, 'ENTRYPOINT /nodejs/bin/node /app/kube-node-ready.mjs'), 'entrypoint: image/image.yaml says ["/nodejs/bin/node","/app/kube-node-ready.mjs"], the Dockerfile says "/nodejs/bin/node /app/kube-node-ready.mjs"'],
    ['a CMD', (d) => `${d}CMD ["controller"]\n`, 'cmd: image/image.yaml says (nothing), the Dockerfile says "[\\"controller\\"]"'],
    ['no WORKDIR in the final stage', (d) => d.replace(/^WORKDIR \/home\/nonroot\n/m, ''), 'workdir: image/image.yaml says "/home/nonroot", the Dockerfile says (nothing)'],
    ['another WORKDIR', (d) => d.replace(/^WORKDIR \/home\/nonroot$/m, 'WORKDIR /tmp'), 'workdir: image/image.yaml says "/home/nonroot", the Dockerfile says "/tmp"'],
    ['another ENV value', (d) => d.replace('ENV PATH=/usr/local/sbin:', 'ENV PATH=/app:/usr/local/sbin:'), 'env.PATH: image/image.yaml says "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", the Dockerfile says "/app:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'],
    ['an ENV missing', (d) => d.replace(/^ENV SSL_CERT_FILE=.*\n/m, ''), 'env.SSL_CERT_FILE: image/image.yaml says "/etc/ssl/certs/ca-certificates.crt", the Dockerfile says (nothing)'],
    ['an extra ENV', (d) => d.replace(/^(ENV SSL_CERT_FILE=.*)$/m, '$1 NODE_OPTIONS=--enable-source-maps'), 'env.NODE_OPTIONS: image/image.yaml says (nothing), the Dockerfile says "--enable-source-maps"'],
    ['another Node.js major in the build stage', (d) => d.replace('ARG NODE_IMAGE=node:24-', 'ARG NODE_IMAGE=node:22-'), "node.version: image/image.yaml says 24.21.0 (major 24), the Dockerfile's build stage is \"node:22-bookworm-slim@sha256:"],
    ['another Node.js major in the runtime base', (d) => d.replace('distroless/nodejs24-', 'distroless/nodejs22-'), "node.version: image/image.yaml says 24.21.0 (major 24), the Dockerfile's runtime base is \"gcr.io/distroless/nodejs22-debian12:nonroot@sha256:"],
    ['node run from elsewhere', (d) => d.replace('["/nodejs/bin/node",', '["/usr/bin/node",'), 'node.dir + /bin/node: image/image.yaml says "/nodejs/bin/node", the Dockerfile says "/usr/bin/node"'],
    ['the app from another directory', (d) => d.replace(APP, 'COPY --from=build /src/dist /app\n'), 'app: image/image.yaml says "dist/image -> /app, as COPY --from=build /src/dist/image /app", the Dockerfile says "COPY --from=build /src/dist /app"'],
    ['the app with another owner', (d) => d.replace(APP, 'COPY --from=build --chown=65532:65532 /src/dist/image /app\n'), 'app: image/image.yaml says "dist/image -> /app, as COPY --from=build /src/dist/image /app", the Dockerfile says "COPY --from=build --chown=65532:65532 /src/dist/image /app"'],
    ['another file', (d) => d.replace(APP, `${APP}COPY --from=build /src/package.json /app/\n`), 'app: the final stage writes more than the app: line'],
    ['a RUN in the final stage', (d) => d.replace(APP, `${APP}RUN ["/nodejs/bin/node", "-e", "1"]\n`), 'app: the final stage writes more than the app: line'],
    ['another label value', (d) => d.replace('licenses="Apache-2.0"', 'licenses="MIT"'), 'labels.org.opencontainers.image.licenses: image/image.yaml says "Apache-2.0", the Dockerfile says "MIT"'],
    ['a label missing', (d) => d.replace(/^\s*org\.opencontainers\.image\.source=.*\n/m, ''), 'labels.org.opencontainers.image.source: image/image.yaml says "https://github.com/kube-node-ready/kube-node-ready", the Dockerfile says (nothing)'],
    ['an extra label', (d) => d.replace(APP, `LABEL vendor="someone"\n${APP}`), 'labels.vendor: image/image.yaml says (nothing), the Dockerfile says "someone"'],
    ['a fixed version label', (d) => d.replace('version="${VERSION}"', 'version="1.0.0"'), `labels.org.opencontainers.image.version: image/image.yaml says "the build's (ARG VERSION)", the Dockerfile says "1.0.0"`],
    ['the revision ARG not declared in the final stage', (d) => d.replace(/(FROM \$\{RUNTIME_IMAGE\}\nARG VERSION\n)ARG COMMIT\n/, '$1'), 'labels.org.opencontainers.image.revision: the final stage must declare ARG COMMIT before its LABEL, or the label is empty'],
  ])('fails on a Dockerfile with %s', (_, mutate, problem) => {
    const mutated = mutate(DOCKERFILE);
    expect(mutated).not.toBe(DOCKERFILE);
    const problems = compare(definition(), mutated, MAKEFILE);
    expect(problems.some((p) => p.startsWith(problem)), `${problem}\nnot in:\n${problems.join('\n')}`).toBe(true);
  });

  it.each<[string, (d: ImageDefinition) => void, string]>([
    ['another node.dir', (d) => void (d.node.dir = '/usr/local'), 'node.dir: image/image.yaml puts node at /usr/local/bin/node, its entrypoint runs "/nodejs/bin/node"'],
    ['a platform more', (d) => void d.platforms.push('linux/s390x'), `platforms: image/image.yaml says "linux/amd64,linux/arm64,linux/s390x", the Makefile's PLATFORMS ?= says "linux/amd64,linux/arm64"`],
    ['a version label of its own', (d) => void (d.labels['org.opencontainers.image.version'] = '1.0.0'), 'labels.org.opencontainers.image.version: comes from the build, image/image.yaml should not set it (it says "1.0.0")'],
  ])('fails on an image/image.yaml with %s', (_, mutate, problem) => {
    const def = definition();
    mutate(def);
    expect(compare(def, DOCKERFILE, MAKEFILE)).toContain(problem);
  });

  it('fails on a Makefile with other default PLATFORMS', () => {
    const mutated = MAKEFILE.replace(/^PLATFORMS \?=.*$/m, 'PLATFORMS ?= linux/amd64');
    expect(mutated).not.toBe(MAKEFILE);
    expect(compare(definition(), DOCKERFILE, mutated)).toContain(
      `platforms: image/image.yaml says "linux/amd64,linux/arm64", the Makefile's PLATFORMS ?= says "linux/amd64"`,
    );
  });

  it.each<[string, (d: string) => string]>([
    ['ENV in its legacy form', (d) => d.replace('ENV SSL_CERT_FILE=', 'ENV SSL_CERT_FILE ')],
    ['one ENV for both', (d) => d.replace(/\nENV SSL_CERT_FILE=/, ' SSL_CERT_FILE=')],
    ['the labels over several LABEL lines', (d) => d.replace(/ \\\n\s+org\.opencontainers\.image\.source=/, '\nLABEL org.opencontainers.image.source=')],
    ['$VERSION for ${VERSION}', (d) => d.replace('"${VERSION}"', '$VERSION')],
    ['trailing slashes on the copy', (d) => d.replace(APP, 'COPY --from=build /src/dist/image/ /app/\n')],
  ])('still agrees with %s', (_, mutate) => {
    const mutated = mutate(DOCKERFILE);
    expect(mutated).not.toBe(DOCKERFILE);
    expect(compare(definition(), mutated, MAKEFILE)).toEqual([]);
  });
});

// The image's supply chain as the repository states it (docs/supply-chain.md): every image the
// Dockerfile builds from is pinned by digest, and `make docker-build` asks BuildKit for an SBOM and
// a provenance attestation. Reads the files only: nothing here builds or pulls an image.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { expand, instructions } from './dockerfile.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const DOCKERFILE = readFileSync(`${root}/Dockerfile`, 'utf8');
const MAKEFILE = readFileSync(`${root}/Makefile`, 'utf8');

/** repository[:tag]@sha256:<64 lowercase hex>, nothing left to expand. */
const PINNED = /^[^\s@$]+@sha256:[0-9a-f]{64}$/;

/**
 * Every image reference the Dockerfile pulls (FROM, COPY --from) with ARG defaults substituted, and
 * the ones not pinned by digest; an ARG named *IMAGE* or used in such a reference needs a pinned
 * default too. Stage names, stage indexes and `scratch` are not pulled.
 */
function checkPinned(dockerfile: string): { images: string[]; problems: string[] } {
  const args = new Map<string, string | undefined>();
  const argLines = new Map<string, number>();
  const imageArgs = new Set<string>();
  const stages = new Set<string>(['scratch']);
  const images: string[] = [];
  const problems: string[] = [];
  const check = (ref: string, where: string) => {
    if (stages.has(ref.toLowerCase()) || /^\d+$/.test(ref)) return;
    for (const m of ref.matchAll(/\$(?:\{(\w+)|(\w+))/g)) imageArgs.add((m[1] ?? m[2])!);
    const expanded = expand(ref, args);
    images.push(expanded);
    if (!PINNED.test(expanded)) problems.push(`${where}: ${ref}${expanded === ref ? '' : ` (${expanded})`} is not pinned by @sha256:<64 hex>`);
  };
  for (const { line, keyword, rest } of instructions(dockerfile)) {
    if (keyword === 'ARG') {
      for (const m of rest.matchAll(/(\w+)(?:=("[^"]*"|'[^']*'|\S*))?/g)) {
        const name = m[1]!;
        const value = m[2]?.replace(/^(["'])(.*)\1$/, '$2');
        // A stage's ARG without a default takes the global one.
        if (value !== undefined || !args.has(name)) args.set(name, value);
        if (!argLines.has(name)) argLines.set(name, line);
        if (/IMAGE/i.test(name)) imageArgs.add(name);
      }
    } else if (keyword === 'FROM') {
      const words = rest.split(/\s+/).filter((w) => !w.startsWith('--'));
      check(words[0] ?? '', `line ${line} FROM`);
      if (words[1]?.toUpperCase() === 'AS' && words[2]) stages.add(words[2].toLowerCase());
    } else if (keyword === 'COPY' || keyword === 'ADD') {
      const from = /(?:^|\s)--from=(\S+)/.exec(rest);
      if (from) check(from[1]!, `line ${line} ${keyword} --from`);
    }
  }
  for (const name of imageArgs) {
    const value = args.get(name);
    const line = argLines.has(name) ? ` (line ${argLines.get(name)})` : ' (not declared)';
    if (value === undefined) problems.push(`ARG ${name}${line} has no default, so the image is whatever --build-arg says`);
    else if (!PINNED.test(value)) problems.push(`ARG ${name}=${value}${line} is not pinned by @sha256:<64 hex>`);
  }
  return { images, problems: [...new Set(problems)] };
}

/** What the docker-build target's `docker buildx build` lacks for SBOM and provenance attestations. */
function checkAttestations(makefile: string): string[] {
  const lines = makefile.split(/\r?\n/);
  const start = lines.findIndex((l) => /^docker-build\s*:/.test(l));
  if (start < 0) return ['no docker-build target'];
  const recipe: string[] = [];
  for (let i = start + 1; i < lines.length && lines[i]!.startsWith('\t'); i++) recipe.push(lines[i]!);
  const text = recipe.join('\n');
  const at = text.indexOf('docker buildx build');
  if (at < 0) return ['docker-build does not run docker buildx build'];
  const build = text.slice(at);
  const problems: string[] = [];
  if (!/(?:^|\s)--sbom=true(?:\s|$)/.test(build)) problems.push('docker-build lacks --sbom=true');
  const provenance = /(?:^|\s)--provenance=(\S+)/.exec(build);
  if (!provenance) problems.push('docker-build lacks --provenance=');
  else if (/^(false|0)$/i.test(provenance[1]!)) problems.push(`docker-build turns provenance off (--provenance=${provenance[1]})`);
  // The classic image store of --load keeps no attestations (docs/supply-chain.md).
  if (/(?:^|\s)--load(?:\s|$)/.test(build)) problems.push('docker-build uses --load, which keeps no attestations');
  return problems;
}

const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;

describe('the Dockerfile pins every image it builds from', () => {
  it('has both base images pinned by digest, and nothing unpinned', () => {
    const { images, problems } = checkPinned(DOCKERFILE);
    expect(problems).toEqual([]);
    // The parser saw the two bases (a check that found nothing would pass too).
    expect(images).toHaveLength(2);
    expect(images[0]).toMatch(/^node:24-bookworm-slim@sha256:[0-9a-f]{64}$/);
    expect(images[1]).toMatch(/^gcr\.io\/distroless\/nodejs24-debian12:nonroot@sha256:[0-9a-f]{64}$/);
  });

  it('fails when a base image ARG of the real Dockerfile loses its digest', () => {
    const unpinned = DOCKERFILE.replace(/^(ARG RUNTIME_IMAGE=[^@\n]+)@sha256:[0-9a-f]{64}$/m, '$1');
    expect(unpinned).not.toBe(DOCKERFILE);
    const { problems } = checkPinned(unpinned);
    expect(problems.some((p) => p.includes('FROM: ${RUNTIME_IMAGE} (gcr.io/distroless/nodejs24-debian12:nonroot) is not pinned'))).toBe(true);
    expect(problems.some((p) => p.startsWith('ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot (line'))).toBe(true);
    expect(problems.join('\n')).not.toContain('NODE_IMAGE');
  });

  it.each([
    ['a tag only', 'FROM node:24-bookworm-slim\n'],
    ['latest implied', 'FROM node\n'],
    ['a short digest', 'FROM node:24@sha256:0123abcd\n'],
    ['an upper-case digest', `FROM node:24@${DIGEST.toUpperCase().replace('SHA256', 'sha256')}\n`],
    ['an ARG default without digest', 'ARG BASE=node:24\nFROM ${BASE}\n'],
    ['an ARG without default', 'ARG BASE\nFROM $BASE\n'],
    ['an unexpanded form', `ARG BASE=node:24@${DIGEST}\nFROM \${BASE:-node:24}\n`],
    ['a second, unpinned stage', `FROM node:24@${DIGEST} AS build\nFROM --platform=$TARGETPLATFORM debian:12\n`],
    ['COPY --from an image', `FROM node:24@${DIGEST}\nCOPY --from=busybox:1 /bin/sh /sh\n`],
    ['an *IMAGE ARG not used in a FROM', `ARG TOOLS_IMAGE=busybox:1\nFROM node:24@${DIGEST}\n`],
    ['a continued FROM', 'FROM \\\n  node:24 \\\n  AS build\n'],
  ])('fails on %s', (_, dockerfile) => {
    expect(checkPinned(dockerfile).problems).not.toEqual([]);
  });

  it.each([
    ['a literal digest', `FROM node:24@${DIGEST}\n`],
    ['a digest without tag', `FROM node@${DIGEST}\n`],
    ['stages, scratch and --platform', `ARG BASE=node:24@${DIGEST}\nFROM --platform=$BUILDPLATFORM \${BASE} AS build\nFROM scratch\nCOPY --from=build /a /a\nCOPY --from=0 /b /b\n`],
  ])('passes %s', (_, dockerfile) => {
    expect(checkPinned(dockerfile).problems).toEqual([]);
  });
});

describe('make docker-build asks for SBOM and provenance attestations', () => {
  it('has --sbom=true and --provenance= on its docker buildx build', () => {
    expect(checkAttestations(MAKEFILE)).toEqual([]);
  });

  it.each([
    ['without --sbom=true', (m: string) => m.replace(' --sbom=true', ''), 'docker-build lacks --sbom=true'],
    ['without --provenance=', (m: string) => m.replace(' --provenance=mode=max', ''), 'docker-build lacks --provenance='],
    ['with --provenance=false', (m: string) => m.replace('--provenance=mode=max', '--provenance=false'), 'docker-build turns provenance off (--provenance=false)'],
    ['with --load', (m: string) => m.replace('--sbom=true', '--sbom=true --load'), 'docker-build uses --load, which keeps no attestations'],
    ['without the target', (m: string) => m.replace(/^docker-build:/m, 'docker-image:'), 'no docker-build target'],
  ])('fails on the Makefile %s', (_, mutate, problem) => {
    const mutated = mutate(MAKEFILE);
    expect(mutated).not.toBe(MAKEFILE);
    expect(checkAttestations(mutated)).toContain(problem);
  });
});

#!/usr/bin/env bash
# Re-pins the Dockerfile's base images (ARG NODE_IMAGE, ARG RUNTIME_IMAGE) to the digest their tag
# points at now: the digest of the tag's multi-platform index, so that one pin serves every
# platform the image is built for. Rewrites the two ARG lines (and the "# Base image digests:"
# comment line, which says where the digests came from) in place and prints old -> new.
#
#   scripts/pin-base-images.sh            (or: make pin-base-images)
#
# Resolves with `crane digest` when crane is installed, else with
# `docker buildx imagetools inspect REF --format '{{json .Manifest}}'`; PIN_TOOL=crane|buildx
# chooses. Both talk to the registries directly (no image is pulled). DOCKERFILE=path rewrites
# another file (the tests' copy). Review the diff, then rebuild (docs/supply-chain.md).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dockerfile=${DOCKERFILE:-$root/Dockerfile}
args=(NODE_IMAGE RUNTIME_IMAGE)
digest_re='^sha256:[0-9a-f]{64}$'

die() {
  echo "pin-base-images: $*" >&2
  exit 1
}

has_buildx() { command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; }
has_crane() { command -v crane >/dev/null 2>&1; }

tool=${PIN_TOOL:-}
case "$tool" in
  '')
    if has_crane; then tool=crane
    elif has_buildx; then tool=buildx
    else
      die "neither crane nor docker buildx is installed; install one of them (crane: https://github.com/google/go-containerregistry/tree/main/cmd/crane, buildx: https://docs.docker.com/build/) and run again. Nothing was changed."
    fi
    ;;
  crane) has_crane || die "PIN_TOOL=crane but crane is not installed. Nothing was changed." ;;
  buildx) has_buildx || die "PIN_TOOL=buildx but docker buildx is not installed. Nothing was changed." ;;
  *) die "PIN_TOOL must be crane or buildx, got '$tool'" ;;
esac
[[ -f "$dockerfile" ]] || die "no Dockerfile at $dockerfile"
case "$tool" in
  crane) echo "resolving with $(command -v crane) ($(crane version 2>/dev/null || echo 'version unknown'))" ;;
  buildx) echo "resolving with $(docker buildx version 2>/dev/null | head -n 1)" ;;
esac

# The digest REF's tag points at; fails unless it is a multi-platform index (one with "manifests").
resolve() {
  local ref=$1 out digest
  case "$tool" in
    crane)
      out=$(crane manifest "$ref") || die "crane manifest $ref failed"
      digest=$(crane digest "$ref") || die "crane digest $ref failed"
      ;;
    buildx)
      # {{json .Manifest}}: the index (or manifest) with its own "digest" before any of its
      # manifests' digests, so the first "digest" in the output is the index's.
      out=$(docker buildx imagetools inspect "$ref" --format '{{json .Manifest}}') || die "docker buildx imagetools inspect $ref failed"
      [[ $out =~ \"digest\":\ *\"(sha256:[0-9a-f]{64})\" ]] || die "no digest in the output of docker buildx imagetools inspect $ref"
      digest=${BASH_REMATCH[1]}
      ;;
  esac
  [[ $digest =~ $digest_re ]] || die "$ref: unexpected digest '$digest'"
  [[ $out == *'"manifests"'* ]] || die "$ref is a single-platform manifest, not a multi-platform index; the Dockerfile builds for several platforms, so it is not pinned"
  printf '%s\n' "$digest"
}

# Resolve everything first: the file is rewritten only when every image resolved.
declare -A old new
for name in "${args[@]}"; do
  lines=$(grep -c "^ARG $name=" "$dockerfile" || true)
  [[ $lines == 1 ]] || die "expected one 'ARG $name=...' line in $dockerfile, found $lines"
  value=$(grep "^ARG $name=" "$dockerfile")
  value=${value#"ARG $name="}
  ref=${value%@*} # the tag, without the current digest
  [[ -n $ref && $ref != *@* ]] || die "ARG $name: cannot read an image reference from '$value'"
  old[$name]=$value
  new[$name]="$ref@$(resolve "$ref")"
done

note="# Base image digests: resolved by scripts/pin-base-images.sh with $tool on $(date -u +%Y-%m-%d); update: make pin-base-images (docs/supply-chain.md)"
tmp=$(mktemp "$dockerfile.XXXXXX")
trap 'rm -f "$tmp"' EXIT
while IFS= read -r line || [[ -n $line ]]; do
  for name in "${args[@]}"; do
    [[ $line == "ARG $name="* ]] && line="ARG $name=${new[$name]}"
  done
  [[ $line == '# Base image digests:'* ]] && line=$note
  printf '%s\n' "$line"
done <"$dockerfile" >"$tmp"
cat "$tmp" >"$dockerfile" # keeps the file's mode and owner

for name in "${args[@]}"; do
  if [[ ${old[$name]} == "${new[$name]}" ]]; then
    echo "$name: ${old[$name]} (unchanged)"
  else
    echo "$name: ${old[$name]} -> ${new[$name]}"
  fi
done
echo "review: git diff -- ${dockerfile#"$root/"}; then rebuild (make docker-build)"

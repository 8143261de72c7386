#!/usr/bin/env bash
# Builds the sandbox's real components from the pinned wrapper modules beside this script and
# caches them outside the clone. Each component has its own cache key (its version and the hash of
# its own go.mod/go.sum), so changing one component's module never rebuilds another's:
#   $KNR_CACHE_DIR/components/<component>-<version>-<os>-<arch>-<hash>/<binaries>
# and one directory of symlinks that gathers them for the sandbox:
#   $KNR_CACHE_DIR/bin/<hash of the component keys>/{etcd,kube-apiserver,kube-controller-manager,
#     kube-scheduler,kubectl,kubelet,kube-proxy,helm,karpenter,node-readiness-controller/}
# Usage: build.sh [component...] (default: the sandbox set above). Prints the bin directory on the
# last line of stdout; progress goes to stderr.
#
# Opt-in tools, built only when named and never part of the default set (so the default bin directory
# and its hash stay as they are): crane (github.com/google/go-containerregistry), registry (the CNCF
# Distribution registry, github.com/distribution/distribution/v3), syft (github.com/anchore/syft) and
# coredns (github.com/coredns/coredns, with every plugin of its plugin.cfg, as its releases ship),
# each from its own wrapper module and cached under its own key like the components above. Named
# components get their own view directory keyed by the requested component directories (in the order
# given), holding a symlink per binary:
#   build.sh crane registry syft  ->  last stdout line $KNR_CACHE_DIR/bin/<hash>/, with crane, registry, syft
#
# node-readiness-controller (sigs.k8s.io/node-readiness-controller, which the Go module proxy here
# does not serve) is built from its source archive in shared/third_party/ beside the clone (or in
# $KNR_SHARED_DIR/third_party/), keyed by the archive's sha256; its directory in the view holds the
# binaries (manager, and reporter: its cmd/readiness-condition-reporter), its CRDs (crds/), its
# Helm chart (chart/) and its cni-readiness example (examples/cni-readiness/: the reporter's DaemonSet). The default set includes it when the
# archive is found and skips it with a notice otherwise; asked for by name, a missing archive fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KNR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-node-ready}
command -v go >/dev/null || { echo "build.sh: the Go toolchain (go) is needed to build the sandbox; install Go >= 1.26" >&2; exit 1; }
export CGO_ENABLED=0 GOFLAGS=-mod=mod
goos=$(go env GOOS) goarch=$(go env GOARCH)

modver() { awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { for (i = 1; i <= NF; i++) if ($i ~ /^v[0-9]/) { print $i; exit } }' "$here/$1/go.mod"; }
# The Go toolchain a module asks for: its `go` line when the local Go is older (fetched through the
# module proxy, as GOTOOLCHAIN=goX.Y.Z does), else the local one.
toolchain() {
  local want have
  want=$(awk '$1 == "go" { print $2; exit }' "$here/$1/go.mod")
  have=$(go env GOVERSION); have=${have#go}
  if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ]; then echo local; else echo "go$want"; fi
}

KUBE_VERSION=$(modver kubernetes k8s.io/kubernetes)
ETCD_VERSION=$(modver etcd go.etcd.io/etcd/server/v3)
HELM_VERSION=$(modver helm helm.sh/helm/v3)
KARPENTER_VERSION=$(modver karpenter sigs.k8s.io/karpenter)
CRANE_VERSION=$(modver crane github.com/google/go-containerregistry)
REGISTRY_VERSION=$(modver registry github.com/distribution/distribution/v3)
SYFT_VERSION=$(modver syft github.com/anchore/syft)
COREDNS_VERSION=$(modver coredns github.com/coredns/coredns)

kmajor=${KUBE_VERSION#v}; kmajor=${kmajor%%.*}
kminor=${KUBE_VERSION#v*.}; kminor=${kminor%%.*}
kflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=$kmajor -X $p.gitMinor=$kminor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
hflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  hflags+=" -X $p.k8sVersionMajor=$kmajor -X $p.k8sVersionMinor=$kminor"
done

# Stamped as the upstream release builds do: crane's cmd.Version (as its doc comment says),
# Distribution's version package (its Makefile), syft's main vars and build tags (its .goreleaser.yaml;
# the tags swap the cgo-only gpgme signature mechanism for the pure-Go one, which turns on its
# containers-storage image source), CoreDNS's commit variable and build tag (its Makefile: `git
# describe` of a release is its tag, the only name the module proxy gives).
craneflags="-X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION"
registryflags="-X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION"
syftflags="-X main.version=${SYFT_VERSION#v} -X main.gitDescription=$SYFT_VERSION"
corednsflags="-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"

# component -> "module dir|version|binary=package ...|ldflags[|build tags, comma-separated]"
declare -A spec=(
  [etcd]="etcd|$ETCD_VERSION|etcd=go.etcd.io/etcd/server/v3|-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
  [kubernetes]="kubernetes|$KUBE_VERSION|kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler kubectl=k8s.io/kubernetes/cmd/kubectl kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy|$kflags"
  [helm]="helm|$HELM_VERSION|helm=helm.sh/helm/v3/cmd/helm|$hflags"
  [karpenter]="karpenter|$KARPENTER_VERSION|karpenter=sigs.k8s.io/karpenter/kwok|"
  [crane]="crane|$CRANE_VERSION|crane=github.com/google/go-containerregistry/cmd/crane|$craneflags"
  [registry]="registry|$REGISTRY_VERSION|registry=github.com/distribution/distribution/v3/cmd/registry|$registryflags"
  [syft]="syft|$SYFT_VERSION|syft=github.com/anchore/syft/cmd/syft|$syftflags|containers_image_openpgp,exclude_graphdriver_btrfs"
  [coredns]="coredns|$COREDNS_VERSION|coredns=github.com/coredns/coredns|$corednsflags|grpcnotrace"
)
# The default set (and, with node-readiness-controller, the default bin directory's key).
order=(etcd kubernetes helm karpenter)
# Built only when named.
optin=(crane registry syft coredns)

# node-readiness-controller's source archive: $KNR_SHARED_DIR/third_party/, else shared/third_party/
# in the directory of the clone or any directory above it.
NRC_VERSION=v0.5.0
NRC_ARCHIVE_NAME=node-readiness-controller-$NRC_VERSION.tar.gz
nrc_looked=()
nrc_src=""
# Sets nrc_src to the archive's path (empty when not found) and nrc_looked to where it looked.
nrc_find_archive() {
  local d
  if [ -n "${KNR_SHARED_DIR:-}" ]; then
    nrc_looked+=("$KNR_SHARED_DIR/third_party/$NRC_ARCHIVE_NAME")
    if [ -f "$KNR_SHARED_DIR/third_party/$NRC_ARCHIVE_NAME" ]; then nrc_src="$KNR_SHARED_DIR/third_party/$NRC_ARCHIVE_NAME"; return; fi
  fi
  d=$(cd "$here/../../.." && pwd)
  while :; do
    nrc_looked+=("${d%/}/shared/third_party/$NRC_ARCHIVE_NAME")
    if [ -f "${d%/}/shared/third_party/$NRC_ARCHIVE_NAME" ]; then nrc_src="${d%/}/shared/third_party/$NRC_ARCHIVE_NAME"; return; fi
    [ "$d" = / ] && return
    d=$(dirname "$d")
  done
}
nrc_find_archive

wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  wanted=("${order[@]}")
  if [ -n "$nrc_src" ]; then wanted+=(node-readiness-controller)
  else echo "build.sh: skipping node-readiness-controller: $NRC_ARCHIVE_NAME not found (looked in: ${nrc_looked[*]})" >&2; fi
fi
for c in "${wanted[@]}"; do
  [ "$c" = node-readiness-controller ] && continue
  [ -n "${spec[$c]+x}" ] || { echo "build.sh: unknown component $c (known: ${order[*]} node-readiness-controller ${optin[*]})" >&2; exit 2; }
done

component_dir() {
  local c=$1 dir version
  if [ "$c" = node-readiness-controller ]; then
    echo "$cache/components/node-readiness-controller-$NRC_VERSION-$goos-$goarch-$(sha256sum <"$nrc_src" | cut -c1-12)"
    return
  fi
  IFS='|' read -r dir version _ _ <<<"${spec[$c]}"
  echo "$cache/components/$c-$version-$goos-$goarch-$(cat "$here/$dir/go.mod" "$here/$dir/go.sum" | sha256sum | cut -c1-12)"
}

# build_component C: go build each binary of C into its own cache directory, with a package counter as progress.
step=0
build_component() {
  local c=$1 dir version pkgs ldflags tags out tc bin pkg start n
  IFS='|' read -r dir version pkgs ldflags tags <<<"${spec[$c]}"
  out=$(component_dir "$c")
  tc=$(toolchain "$dir")
  step=$((step + 1))
  mkdir -p "$out"
  # Every missing binary of the component in one go build: they share most packages, which are
  # compiled once. Several binaries are written into a directory, each named after its package's
  # last element; one alone is written under its own name.
  local missing=() bins=() tmp dest
  for entry in $pkgs; do
    bin=${entry%%=*} pkg=${entry#*=}
    if [ -x "$out/$bin" ]; then echo "[$step/${#wanted[@]}] $bin: cached" >&2; else missing+=("$pkg"); bins+=("$bin"); fi
  done
  [ ${#missing[@]} -eq 0 ] && return
  if [ ${#missing[@]} -gt 1 ]; then
    for i in "${!missing[@]}"; do
      [ "${bins[$i]}" = "${missing[$i]##*/}" ] || { echo "build.sh: $c: binary ${bins[$i]} must be named after its package ${missing[$i]}" >&2; exit 2; }
    done
  fi
  start=$(date +%s) n=0
  # A directory of its own: another checkout may be building the same component.
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  dest="$tmp/"
  [ ${#missing[@]} -eq 1 ] && dest="$tmp/${bins[0]}"
  echo "[$step/${#wanted[@]}] building ${bins[*]} $version (Go toolchain: $tc; a first build takes minutes on 2 cores)..." >&2
  (cd "$here/$dir" && GOTOOLCHAIN=$tc go build -v -trimpath ${tags:+-tags=$tags} -ldflags "-s -w $ldflags" -o "$dest" "${missing[@]}" 2>&1) |
    while IFS= read -r line; do
      n=$((n + 1))
      case "$line" in *" "*) echo "    $line" >&2 ;; esac  # package names have no spaces; errors do
      if [ $((n % 200)) -eq 0 ]; then echo "    $c: $n packages compiled, $(( $(date +%s) - start ))s" >&2; fi
    done
  for bin in "${bins[@]}"; do
    [ -x "$tmp/$bin" ] || { rm -rf "$tmp"; echo "build.sh: building $bin failed (see above)" >&2; exit 1; }
    mv "$tmp/$bin" "$out/$bin"
  done
  rm -rf "$tmp"
  echo "    ${bins[*]}: done in $(( $(date +%s) - start ))s" >&2
}

# Karpenter's CRDs (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass, ...) come from the same module
# version as the binary; they are kept beside it in the component directory.
karpenter_crds() {
  local out src
  out=$(component_dir karpenter)/karpenter-crds
  [ -d "$out" ] && return
  src=$(cd "$here/karpenter" && GOTOOLCHAIN=$(toolchain karpenter) go mod download -json "sigs.k8s.io/karpenter@$KARPENTER_VERSION" | awk -F'"' '$2 == "Dir" { print $4 }')
  [ -d "$src/kwok/charts/crds" ] || { echo "build.sh: Karpenter's CRDs not found in the module ($src)" >&2; exit 1; }
  mkdir -p "$out.tmp"
  cp "$src"/kwok/charts/crds/*.yaml "$src"/kwok/apis/crds/*.yaml "$out.tmp/"
  chmod u+w "$out.tmp"/*.yaml
  mv "$out.tmp" "$out"
}

# node-readiness-controller from its source archive: unpacked into a scratch directory under the
# cache, built as its README says (its dependencies come from the Go module proxy), then only the
# binaries, its CRDs, its chart, its cni-readiness example and its licence are kept in the component directory.
build_nrc() {
  local out tc work start n
  step=$((step + 1))
  if [ -z "$nrc_src" ]; then
    echo "build.sh: node-readiness-controller's source archive $NRC_ARCHIVE_NAME was not found; looked in:" >&2
    printf '    %s\n' "${nrc_looked[@]}" >&2
    echo "  put shared/ beside the clone, or set KNR_SHARED_DIR to the directory holding third_party/" >&2
    exit 1
  fi
  out=$(component_dir node-readiness-controller)
  if [ -x "$out/manager" ] && [ -x "$out/reporter" ] && [ -d "$out/examples/cni-readiness" ] && [ -d "$out/crds" ] && [ -d "$out/chart" ]; then echo "[$step/${#wanted[@]}] node-readiness-controller: cached" >&2; return; fi
  start=$(date +%s) n=0
  mkdir -p "$cache/components"
  work=$(mktemp -d "$cache/components/.node-readiness-controller-src.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "[$step/${#wanted[@]}] building node-readiness-controller $NRC_VERSION from $nrc_src (a first build takes about 3 minutes on 2 cores)..." >&2
  tar -xzf "$nrc_src" -C "$work"
  [ -f "$work/cmd/main.go" ] || { echo "build.sh: $nrc_src has no cmd/main.go" >&2; exit 1; }
  tc=local
  if [ "$(printf '%s\n%s\n' "$(awk '$1 == "go" { print $2; exit }' "$work/go.mod")" "$(go env GOVERSION | sed 's/^go//')" | sort -V | head -1)" != "$(awk '$1 == "go" { print $2; exit }' "$work/go.mod")" ]; then
    tc="go$(awk '$1 == "go" { print $2; exit }' "$work/go.mod")"
  fi
  (cd "$work" && GOTOOLCHAIN=$tc go build -v -trimpath -ldflags "-s -w" -o "$work/manager" ./cmd/main.go 2>&1) |
    while IFS= read -r line; do
      n=$((n + 1))
      case "$line" in *" "*) echo "    $line" >&2 ;; esac
      if [ $((n % 200)) -eq 0 ]; then echo "    node-readiness-controller: $n packages compiled, $(( $(date +%s) - start ))s" >&2; fi
    done
  [ -x "$work/manager" ] || { echo "build.sh: building node-readiness-controller failed (see above)" >&2; exit 1; }
  # Its readiness-condition-reporter (cmd/readiness-condition-reporter, the image of its DaemonSet
  # examples): the same module, so its packages are mostly compiled already.
  echo "    node-readiness-controller: building readiness-condition-reporter" >&2
  (cd "$work" && GOTOOLCHAIN=$tc go build -trimpath -ldflags "-s -w" -o "$work/reporter" ./cmd/readiness-condition-reporter 2>&1) | sed 's/^/    /' >&2
  [ -x "$work/reporter" ] || { echo "build.sh: building node-readiness-controller's readiness-condition-reporter failed (see above)" >&2; exit 1; }
  # Staged beside the sources and moved into place in one rename: a concurrent build of the same
  # archive (another checkout's test run) either wins the rename or finds the directory complete.
  mkdir -p "$work/out/crds"
  cp "$work/manager" "$work/reporter" "$work/out/"
  cp "$work"/config/crd/bases/*.yaml "$work/out/crds/"
  cp -r "$work/charts/node-readiness-controller" "$work/out/chart"
  mkdir -p "$work/out/examples" && cp -r "$work/examples/cni-readiness" "$work/out/examples/"
  cp "$work/LICENSE" "$work/out/LICENSE"
  chmod -R u+w "$work/out"
  [ -x "$out/reporter" ] && [ -d "$out/examples/cni-readiness" ] || rm -rf "$out"
  mv -T "$work/out" "$out" 2>/dev/null || [ -d "$out/examples/cni-readiness" ]
  rm -rf "$work"; trap - EXIT
  echo "    node-readiness-controller: done in $(( $(date +%s) - start ))s" >&2
}

for c in "${wanted[@]}"; do
  if [ "$c" = node-readiness-controller ]; then build_nrc; continue; fi
  build_component "$c"
  if [ "$c" = karpenter ]; then karpenter_crds; fi
done

# The gathered view: symlinks to each component's binaries, keyed by the component directories.
dirs=()
for c in "${wanted[@]}"; do dirs+=("$(component_dir "$c")"); done
view="$cache/bin/$(printf '%s\n' "${dirs[@]}" | sha256sum | cut -c1-12)"
mkdir -p "$view"
for d in "${dirs[@]}"; do
  # node-readiness-controller's directory is linked whole: its binary is named manager.
  case "$(basename "$d")" in node-readiness-controller-*) ln -sfn "$d" "$view/node-readiness-controller"; continue ;; esac
  for b in "$d"/*; do
    case "$b" in *.tmp) continue ;; esac
    ln -sfn "$b" "$view/$(basename "$b")"
  done
done
echo "binaries (${wanted[*]}): $view" >&2
echo "$view"

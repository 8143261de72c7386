#!/usr/bin/env bash
# Builds the sandbox's real components from the pinned wrapper modules beside this script and
# caches them outside the clone. Each component has its own cache key (its version and the hash of
# its own go.mod/go.sum), so changing one component's module never rebuilds another's:
#   $KNR_CACHE_DIR/components/<component>-<version>-<os>-<arch>-<hash>/<binaries>
# and one directory of symlinks that gathers them for the sandbox:
#   $KNR_CACHE_DIR/bin/<hash of the component keys>/{etcd,kube-apiserver,kube-controller-manager,
#     kube-scheduler,kubectl,helm,karpenter}
# Usage: build.sh [component...] (default: all). Prints the bin directory on the last line of stdout.
# Progress goes to stderr.
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

# component -> "module dir|version|binary=package ...|ldflags"
declare -A spec=(
  [etcd]="etcd|$ETCD_VERSION|etcd=go.etcd.io/etcd/server/v3|-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
  [kubernetes]="kubernetes|$KUBE_VERSION|kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler kubectl=k8s.io/kubernetes/cmd/kubectl|$kflags"
  [helm]="helm|$HELM_VERSION|helm=helm.sh/helm/v3/cmd/helm|$hflags"
  [karpenter]="karpenter|$KARPENTER_VERSION|karpenter=sigs.k8s.io/karpenter/kwok|"
)
order=(etcd kubernetes helm karpenter)
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${order[@]}")
for c in "${wanted[@]}"; do [ -n "${spec[$c]+x}" ] || { echo "build.sh: unknown component $c (known: ${order[*]})" >&2; exit 2; }; done

component_dir() {
  local c=$1 dir version
  IFS='|' read -r dir version _ _ <<<"${spec[$c]}"
  echo "$cache/components/$c-$version-$goos-$goarch-$(cat "$here/$dir/go.mod" "$here/$dir/go.sum" | sha256sum | cut -c1-12)"
}

# build_component C: go build each binary of C into its own cache directory, with a package counter as progress.
step=0
build_component() {
  local c=$1 dir version pkgs ldflags out tc bin pkg start n
  IFS='|' read -r dir version pkgs ldflags <<<"${spec[$c]}"
  out=$(component_dir "$c")
  tc=$(toolchain "$dir")
  step=$((step + 1))
  mkdir -p "$out"
  for entry in $pkgs; do
    bin=${entry%%=*} pkg=${entry#*=}
    if [ -x "$out/$bin" ]; then echo "[$step/${#wanted[@]}] $bin: cached" >&2; continue; fi
    start=$(date +%s) n=0
    echo "[$step/${#wanted[@]}] building $bin $version from $pkg (Go toolchain: $tc; a first build takes minutes on 2 cores)..." >&2
    (cd "$here/$dir" && GOTOOLCHAIN=$tc go build -v -trimpath -ldflags "-s -w $ldflags" -o "$out/$bin.tmp" "$pkg" 2>&1) |
      while IFS= read -r line; do
        n=$((n + 1))
        case "$line" in *" "*) echo "    $line" >&2 ;; esac  # package names have no spaces; errors do
        if [ $((n % 200)) -eq 0 ]; then echo "    $bin: $n packages compiled, $(( $(date +%s) - start ))s" >&2; fi
      done
    [ -x "$out/$bin.tmp" ] || { echo "build.sh: building $bin failed (see above)" >&2; exit 1; }
    mv "$out/$bin.tmp" "$out/$bin"
    echo "    $bin: done in $(( $(date +%s) - start ))s" >&2
  done
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

for c in "${wanted[@]}"; do
  build_component "$c"
  if [ "$c" = karpenter ]; then karpenter_crds; fi
done

# The gathered view: symlinks to each component's binaries, keyed by the component directories.
dirs=()
for c in "${wanted[@]}"; do dirs+=("$(component_dir "$c")"); done
view="$cache/bin/$(printf '%s\n' "${dirs[@]}" | sha256sum | cut -c1-12)"
mkdir -p "$view"
for d in "${dirs[@]}"; do
  for b in "$d"/*; do
    case "$b" in *.tmp) continue ;; esac
    ln -sfn "$b" "$view/$(basename "$b")"
  done
done
echo "sandbox binaries: $view" >&2
echo "$view"

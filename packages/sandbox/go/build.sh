#!/usr/bin/env bash
# Builds the sandbox's real components from the pinned wrapper modules beside this script
# and caches them outside the clone, keyed by version and by the hash of go.mod/go.sum:
#   $KNR_CACHE_DIR/bin/<key>/{etcd,kube-apiserver,kube-scheduler,kubectl,helm}
# Prints the bin directory on the last line of stdout. Progress goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KNR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-node-ready}
command -v go >/dev/null || { echo "build.sh: the Go toolchain (go) is needed to build the sandbox; install Go >= 1.26" >&2; exit 1; }

modver() { awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { for (i = 1; i <= NF; i++) if ($i ~ /^v[0-9]/) { print $i; exit } }' "$here/$1/go.mod"; }
KUBE_VERSION=$(modver kubernetes k8s.io/kubernetes)
ETCD_VERSION=$(modver etcd go.etcd.io/etcd/server/v3)
HELM_VERSION=$(modver helm helm.sh/helm/v3)
hash=$(cat "$here"/*/go.mod "$here"/*/go.sum | sha256sum | cut -c1-12)
key="k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION-$(go env GOOS)-$(go env GOARCH)-$hash"
out="$cache/bin/$key"
bins=(etcd kube-apiserver kube-scheduler kubectl helm)

have_all() { for b in "${bins[@]}"; do [ -x "$out/$b" ] || return 1; done; }
if have_all; then echo "sandbox binaries: cached in $out" >&2; echo "$out"; exit 0; fi
mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

# build DIR PKG NAME LDFLAGS: go build with a package counter as progress.
step=0
build() {
  local dir=$1 pkg=$2 name=$3 ldflags=$4 start n=0
  step=$((step + 1))
  if [ -x "$out/$name" ]; then echo "[$step/${#bins[@]}] $name: cached" >&2; return; fi
  start=$(date +%s)
  echo "[$step/${#bins[@]}] building $name from $pkg (first build takes minutes on 2 cores)..." >&2
  (cd "$here/$dir" && go build -v -trimpath -ldflags "-s -w $ldflags" -o "$out/$name.tmp" "$pkg" 2>&1) |
    while IFS= read -r line; do
      n=$((n + 1))
      case "$line" in *" "*) echo "    $line" >&2 ;; esac  # package names have no spaces; errors do
      if [ $((n % 200)) -eq 0 ]; then echo "    $name: $n packages compiled, $(( $(date +%s) - start ))s" >&2; fi
    done
  [ -x "$out/$name.tmp" ] || { echo "build.sh: building $name failed (see above)" >&2; exit 1; }
  mv "$out/$name.tmp" "$out/$name"
  echo "    $name: done in $(( $(date +%s) - start ))s" >&2
}

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

build etcd go.etcd.io/etcd/server/v3 etcd "-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"
build kubernetes k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$kflags"
build kubernetes k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$kflags"
build kubernetes k8s.io/kubernetes/cmd/kubectl kubectl "$kflags"
build helm helm.sh/helm/v3/cmd/helm helm "$hflags"
have_all || { echo "build.sh: some binaries are missing in $out" >&2; exit 1; }
echo "sandbox binaries: built in $out" >&2
echo "$out"

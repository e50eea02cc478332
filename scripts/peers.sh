#!/usr/bin/env bash
# Build the Go peers modelseal's round-trip tests run against, at pinned releases,
# into a cache outside the repository; print the path of the binary asked for.
#
#   scripts/peers.sh oras      # -> .../peers/oras-v1.3.6/bin/oras
#   scripts/peers.sh cosign    # -> .../peers/cosign-v3.1.3/bin/cosign
#   scripts/peers.sh all       # build both, print both
#
# None of their code is committed here: `go install MODULE/cmd@VERSION` fetches the
# module from the Go module proxy (checked against sum.golang.org) and builds it.
# A build already in the cache is used as is. The first build takes minutes on two
# cores; it runs under `nice`. What it does goes to stderr; only paths go to stdout.
#
# Not buildable here: the module proxy refuses github.com/modelpack/modctl,
# github.com/kitops-ml/kitops and github.com/modelpack/model-spec at every version
# ("403 Forbidden ... This module version is not available."); see docs/modelpack.md.
set -euo pipefail

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
CACHE=${MODELSEAL_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/modelseal/peers}

declare -A MODULE=(
  [oras]=oras.land/oras/cmd/oras
  [cosign]=github.com/sigstore/cosign/v3/cmd/cosign
)
declare -A VERSION=(
  [oras]=v1.3.6
  [cosign]=v3.1.3
)

build() {
  local name=$1 version=${VERSION[$1]} module=${MODULE[$1]}
  local dir="$CACHE/$name-$version" bin
  bin="$dir/bin/$name"
  if [ -x "$bin" ]; then
    echo "$bin"
    return
  fi
  mkdir -p "$dir"
  local lock="$dir.lock"
  (
    flock 9
    if [ ! -x "$bin" ]; then
      echo "peers: building $module@$version into $dir/bin (nice; minutes the first time)" >&2
      local start=$SECONDS
      GOBIN="$dir/bin.tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
        nice -n 10 "$GO" install -trimpath "$module@$version" >&2
      rm -rf "$dir/bin"
      mv "$dir/bin.tmp" "$dir/bin"
      echo "peers: built $name $version in $((SECONDS - start)) s" >&2
    fi
  ) 9>"$lock"
  echo "$bin"
}

case "${1:-}" in
  oras | cosign) build "$1" ;;
  all)
    build oras
    build cosign
    ;;
  *)
    echo "usage: $0 oras|cosign|all" >&2
    exit 2
    ;;
esac

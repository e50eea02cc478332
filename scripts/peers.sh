#!/usr/bin/env bash
# Build the Go peers modelseal's round-trip tests run against, at pinned releases,
# into a cache outside the repository; print the path of the binary asked for.
#
#   scripts/peers.sh oras        # -> .../peers/oras-v1.3.6/bin/oras
#   scripts/peers.sh cosign      # -> .../peers/cosign-v3.1.3/bin/cosign
#   scripts/peers.sh modelspec   # -> .../peers/modelspec-v0.0.7-<hash>/bin/modelspec-check
#   scripts/peers.sh all         # build all three, print their paths
#
# None of their code is committed here: `go install MODULE/cmd@VERSION` fetches the
# module from the Go module proxy (checked against the checksum database, which the
# go command reaches through the proxy) and builds it. `modelspec` is our own small
# program, scripts/peers/modelspec-check, built against github.com/modelpack/model-spec
# v0.0.7 (the spec's Go validator and types) as pinned by its go.sum; its cache
# directory names a hash of its source, so an edit rebuilds it.
# A build already in the cache is used as is. The first build takes minutes on two
# cores; it runs under `nice`. What it does goes to stderr; only paths go to stdout.
#
# Not buildable here: the module proxy refuses github.com/modelpack/modctl and
# github.com/kitops-ml/kitops at every version ("reading
# https://proxy.golang.org/github.com/modelpack/modctl/@v/list: 403 Forbidden",
# "server response: This module version is not available."); it serves
# github.com/modelpack/model-spec by exact version only (v0.0.1 to v0.0.7; its
# version list and v0.0.8 on are refused the same way). See docs/formats/modelpack.md.
set -euo pipefail

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
CACHE=${MODELSEAL_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/modelseal/peers}

MODELSPEC_SRC=$(cd "$(dirname "$0")/peers/modelspec-check" && pwd)

declare -A MODULE=(
  [oras]=oras.land/oras/cmd/oras
  [cosign]=github.com/sigstore/cosign/v3/cmd/cosign
  [modelspec]=github.com/modelpack/model-spec
)
declare -A VERSION=(
  [oras]=v1.3.6
  [cosign]=v3.1.3
  [modelspec]=v0.0.7-$(cat "$MODELSPEC_SRC"/main.go "$MODELSPEC_SRC"/go.mod "$MODELSPEC_SRC"/go.sum |
    sha256sum | cut -c1-12)
)
declare -A BINARY=([oras]=oras [cosign]=cosign [modelspec]=modelspec-check)

# Build peer $1 into directory $2 (with GOBIN and the flags set by build).
compile() {
  mkdir -p "$2"
  if [ "$1" = modelspec ]; then
    (cd "$MODELSPEC_SRC" && nice -n 10 "$GO" build -mod=readonly -trimpath -o "$2/modelspec-check" .)
  else
    GOBIN="$2" nice -n 10 "$GO" install -trimpath "${MODULE[$1]}@${VERSION[$1]}"
  fi
}

build() {
  local name=$1 version=${VERSION[$1]} module=${MODULE[$1]}
  local dir="$CACHE/$name-$version" bin
  bin="$dir/bin/${BINARY[$name]}"
  if [ -x "$bin" ]; then
    echo "$bin"
    return
  fi
  mkdir -p "$dir"
  local lock="$dir.lock"
  (
    flock 9
    if [ ! -x "$bin" ]; then
      echo "peers: building $name $version ($module) into $dir/bin (nice; minutes the first time)" >&2
      local start=$SECONDS
      rm -rf "$dir/bin.tmp"
      GOFLAGS=-buildvcs=false CGO_ENABLED=0 compile "$name" "$dir/bin.tmp" >&2
      rm -rf "$dir/bin"
      mv "$dir/bin.tmp" "$dir/bin"
      echo "peers: built $name $version in $((SECONDS - start)) s" >&2
    fi
  ) 9>"$lock"
  echo "$bin"
}

case "${1:-}" in
  oras | cosign | modelspec) build "$1" ;;
  all)
    build oras
    build cosign
    build modelspec
    ;;
  *)
    echo "usage: $0 oras|cosign|modelspec|all" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Build the Go peers modelseal's round-trip tests run against, at pinned releases,
# into a cache outside the repository; print the path of the binary asked for.
#
#   scripts/peers.sh oras        # -> .../peers/oras-v1.3.6/bin/oras
#   scripts/peers.sh cosign      # -> .../peers/cosign-v3.1.3/bin/cosign
#   scripts/peers.sh modelspec   # -> .../peers/modelspec-v0.0.7-<hash>/bin/modelspec-check
#   scripts/peers.sh modctl      # -> .../peers/modctl-v0.2.2-<source>/bin/modctl
#   scripts/peers.sh kit         # -> .../peers/kit-v1.7.0-<source>/bin/kit
#   scripts/peers.sh all         # build them all, print their paths and a line of timings
#   scripts/peers.sh path NAME   # the path of a peer already built; exit 1 (saying how to
#                                # build it) when it is not: this never builds anything
#
# None of their code is committed here. oras and cosign come from the Go module proxy
# (`go install MODULE@VERSION`, checked against the checksum database). `modelspec` is our
# own small program, scripts/peers/modelspec-check, built against github.com/modelpack/model-spec
# v0.0.7 as pinned by its go.sum; its cache directory names a hash of its source.
#
# modctl (github.com/modelpack/modctl) and kit (github.com/kitops-ml/kitops) are tried from the
# module proxy first (this one serves modctl v0.2.2 by exact version and refuses kitops); when it
# refuses, their release archive is built: a `git archive` of the tag, modctl-VERSION.tar.gz and
# kitops-VERSION.tar.gz in the folder $MODELSEAL_PEER_SOURCES names. With an archive given, the
# build is cached under its SHA-256, so another archive builds again. Their dependencies come from
# the proxy.
#
# A build already in the cache is used as is. The first build takes minutes on two cores; it
# runs under `nice`. What it does goes to stderr; only paths go to stdout.
set -euo pipefail

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
CACHE=${MODELSEAL_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/modelseal/peers}
SOURCES=${MODELSEAL_PEER_SOURCES:-}

MODELSPEC_SRC=$(cd "$(dirname "$0")/peers/modelspec-check" && pwd)

declare -A MODULE=(
  [oras]=oras.land/oras/cmd/oras
  [cosign]=github.com/sigstore/cosign/v3/cmd/cosign
  [modelspec]=github.com/modelpack/model-spec
  [modctl]=github.com/modelpack/modctl
  [kit]=github.com/kitops-ml/kitops
)
declare -A RELEASE=([oras]=v1.3.6 [cosign]=v3.1.3 [modelspec]=v0.0.7 [modctl]=v0.2.2 [kit]=v1.7.0)
declare -A ARCHIVE=([modctl]=modctl [kit]=kitops)  # the archive's name: NAME-VERSION.tar.gz
declare -A BINARY=([oras]=oras [cosign]=cosign [modelspec]=modelspec-check [modctl]=modctl [kit]=kit)
PEERS=(oras cosign modelspec modctl kit)

say() { printf 'peers: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

archive_of() { [ -n "$SOURCES" ] && echo "$SOURCES/${ARCHIVE[$1]}-${RELEASE[$1]}.tar.gz"; }

# The cache folder of peer $1 (printed). For an archive peer it depends on whether the module
# proxy serves the release: the module's folder when it does, else the archive's hash.
VIA=()
version_of() {
  local name=$1 release=${RELEASE[$1]}
  case $name in
    modelspec)
      echo "$release-$(cat "$MODELSPEC_SRC"/main.go "$MODELSPEC_SRC"/go.mod "$MODELSPEC_SRC"/go.sum |
        sha256sum | cut -c1-12)" ;;
    modctl | kit)
      local archive
      archive=$(archive_of "$name" || true)
      if [ -n "$archive" ] && [ -f "$archive" ]; then
        echo "$release-$(sha256sum < "$archive" | cut -c1-16)"
      else
        echo "$release-module"
      fi ;;
    *) echo "$release" ;;
  esac
}

# Build from the module proxy, or else from the archive: $1 peer, $2 output folder. The proxy may
# serve a release by exact version while refusing the module's version list (modctl v0.2.2 here):
# `go install` then fails (it reads the list for deprecations), so the release is downloaded and
# built in its module folder instead.
from_module_or_archive() {
  local name=$1 out=$2 module=${MODULE[$1]} release=${RELEASE[$1]} archive scratch answer top
  archive=$(archive_of "$name" || true)
  scratch=$(mktemp -d)
  if answer=$(cd "$scratch" && GOFLAGS=-mod=mod "$GO" mod download -json "$module@$release" 2>&1); then
    top=$(printf '%s\n' "$answer" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -n 1)
    say "$module@$release is served by the Go module proxy: building it from $top"
  else
    answer=$(printf '%s' "$answer" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' | head -n 1)
    answer=$(printf '%b' "$answer" | tr '\n\t' '  ' | tr -s ' ')
    if [ -z "$archive" ] || [ ! -f "$archive" ]; then
      rm -rf "$scratch"
      die "the Go module proxy refused $module@$release (${answer:-see go mod download}); set MODELSEAL_PEER_SOURCES to a folder holding ${ARCHIVE[$name]}-$release.tar.gz"
    fi
    say "the Go module proxy refused $module@$release (${answer:-see go mod download}): building ${archive##*/}"
    tar -xzf "$archive" -C "$scratch"
    top=$(find "$scratch" -mindepth 1 -maxdepth 2 -name go.mod -printf '%h\n' | head -n 1)
  fi
  [ -n "$top" ] || { rm -rf "$scratch"; die "no go.mod found for $module@$release"; }
  (cd "$top" && nice -n 10 "$GO" build -mod=readonly -trimpath -o "$out/${BINARY[$name]}" .) \
    || { rm -rf "$scratch"; die "building $name $release failed (above)"; }
  rm -rf "$scratch"
}

# Build peer $1 into directory $2.
compile() {
  mkdir -p "$2"
  case $1 in
    modelspec) (cd "$MODELSPEC_SRC" && nice -n 10 "$GO" build -mod=readonly -trimpath -o "$2/modelspec-check" .) ;;
    modctl | kit) from_module_or_archive "$1" "$2" ;;
    *) GOBIN="$2" nice -n 10 "$GO" install -trimpath "${MODULE[$1]}@${RELEASE[$1]}" ;;
  esac
}

binary_path() { echo "$CACHE/$1-$(version_of "$1")/bin/${BINARY[$1]}"; }

TIMINGS=()
build() {
  local name=$1 version bin dir
  version=$(version_of "$name")
  dir="$CACHE/$name-$version"
  bin="$dir/bin/${BINARY[$name]}"
  if [ -x "$bin" ]; then
    TIMINGS+=("$name cached")
    echo "$bin"
    return
  fi
  mkdir -p "$dir"
  local start=$SECONDS
  (
    flock 9
    if [ ! -x "$bin" ]; then
      say "building $name $version (${MODULE[$name]}) into $dir/bin (nice; minutes the first time)"
      rm -rf "$dir/bin.tmp"
      GOFLAGS=-buildvcs=false CGO_ENABLED=0 compile "$name" "$dir/bin.tmp" >&2
      rm -rf "$dir/bin"
      mv "$dir/bin.tmp" "$dir/bin"
      echo $((SECONDS - start)) > "$dir/build-seconds"
      say "built $name $version in $((SECONDS - start)) s"
    fi
  ) 9>"$dir.lock"
  TIMINGS+=("$name $((SECONDS - start)) s")
  echo "$bin"
}

case "${1:-}" in
  oras | cosign | modelspec | modctl | kit) build "$1" ;;
  all)
    begun=$SECONDS
    for name in "${PEERS[@]}"; do build "$name"; done
    say "$(IFS=,; echo "${TIMINGS[*]}" | sed 's/,/, /g'); all in $((SECONDS - begun)) s"
    ;;
  path)
    [ $# -eq 2 ] && [ -n "${BINARY[$2]:-}" ] || die "usage: $0 path oras|cosign|modelspec|modctl|kit"
    bin=$(binary_path "$2")
    if [ ! -x "$bin" ] && [ -z "$SOURCES" ]; then
      # built from an archive (MODELSEAL_PEER_SOURCES was set then, not now): the newest such build
      bin=$(ls -td "$CACHE/$2-${RELEASE[$2]}"-*/bin/"${BINARY[$2]}" 2>/dev/null | head -n 1)
    fi
    [ -n "$bin" ] && [ -x "$bin" ] \
      || die "$2 is not built ($(binary_path "$2")): run bash scripts/peers.sh all (scripts/test.sh does, before pytest)"
    echo "$bin"
    ;;
  *) die "usage: $0 oras|cosign|modelspec|modctl|kit|all|path NAME" ;;
esac

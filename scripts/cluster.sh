#!/usr/bin/env bash
# A Kubernetes control plane on loopback, for the real-cluster tests (tests/cluster) and for trying
# the operator by hand: etcd, kube-apiserver and kube-controller-manager, built from their Go
# modules at the releases pinned in scripts/cluster/*/go.mod (go.sum checks every byte) and cached
# outside the repository, and LLMKube's controller manager beside them.
#
#   bash scripts/cluster.sh up DIR      build on first use, start, write DIR/kubeconfig (admin);
#                                       with LLMKube: its CRDs, PriorityClasses and manager
#   bash scripts/cluster.sh up DIR --without-llmkube
#                                       modelseal alone: the Model CRD of deploy/crd, no LLMKube
#   bash scripts/cluster.sh down DIR    stop what `up DIR` started, by the PIDs it recorded
#   bash scripts/cluster.sh restart DIR kube-apiserver|kube-controller-manager|etcd|llmkube
#   bash scripts/cluster.sh build       build (or find in the cache) and print where
#
# LLMKube (the default) is installed as its Helm chart would: the CRDs the chart ships
# (inference.llmkube.dev and federation.llmkube.dev, from config/crd/bases), its five
# PriorityClasses (its serving Pods name llmkube-normal by default), and the manager, run here out
# of cluster as a client certificate of its own in system:masters (CN llmkube-manager, so the audit
# log tells its requests apart) with --leader-elect=false, its health probe and (plain HTTP)
# metrics on free loopback ports (DIR/llmkube-metrics-port) and --allowed-remote-hosts=127.0.0.1
# (its SSRF guard refuses loopback sources otherwise). `up` waits for its first reconcile: a probe
# Model in llmkube-system that only its Model controller turns Ready; then deletes it. Its own
# webhooks (the chart's Model defaulter, failurePolicy Ignore, which only sets
# spec.hardware.accelerator for GPU Models, and its ModelRouter validator) are not run: its
# webhook server binds every interface (no flag sets the address), and servers here bind to
# loopback only; without --webhook-cert-path the manager registers none.
#
# There is no kubelet, scheduler or kube-proxy: Pods are created, admitted and owned as on any
# cluster, but nothing runs them (the tests play the kubelet where they need one).
#
# The envtest convention: when KUBEBUILDER_ASSETS names a folder holding `etcd` and
# `kube-apiserver` (controller-runtime's setup-envtest layout), those are used and not built;
# so is a `kube-controller-manager` beside them, and only when there is none is it built.
#
# LLMKube's manager (`go build ./cmd/` of github.com/defilantech/llmkube at LLMKUBE_VERSION) is
# built from the Go module when the proxy serves it; otherwise from the source tree or `git
# archive` tarball MODELSEAL_LLMKUBE_SOURCE names, cached under the archive's SHA-256. Its CRDs
# (config/crd/bases) are kept beside the binary.
#
# Needs Go 1.26 (and the Go module proxy) to build; openssl, curl, python3 and flock to run.
# Environment: MODELSEAL_CLUSTER_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/modelseal/cluster),
# GO (the go command; default: go on PATH, else /usr/local/go/bin/go), KUBEBUILDER_ASSETS,
# MODELSEAL_LLMKUBE_SOURCE.
set -euo pipefail

K8S_VERSION=v1.36.3
ETCD_VERSION=v3.6.8
LLMKUBE_MODULE=github.com/defilantech/llmkube
LLMKUBE_VERSION=v0.9.19

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${MODELSEAL_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modelseal/cluster}
BUILD=$CACHE/kubernetes-$K8S_VERSION-etcd-$ETCD_VERSION
BIN=$BUILD/bin
STARTED=$SECONDS
# where each component's binary is (build() fills it in: the cache, or KUBEBUILDER_ASSETS)
declare -A EXE=()

step() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }

usage() {
  echo "usage: bash scripts/cluster.sh up DIR [--without-llmkube] | down DIR | restart DIR COMPONENT | build" >&2
  exit 2
}

find_go() {
  GO=${GO:-$(command -v go || true)}
  [ -n "$GO" ] || GO=/usr/local/go/bin/go
  [ -x "$GO" ] || die "no Go toolchain (go on PATH or /usr/local/go/bin/go): install Go 1.26 to build the control plane"
}

# Kubernetes's own build stamps its version into the binaries (hack/lib/version.sh); without it they
# report v0.0.0-master+$Format:%H$, which kubectl version and other clients cannot parse.
K8S_LDFLAGS=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=${K8S_VERSION:1:1}"
  K8S_LDFLAGS+=" -X $pkg.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean"
done
STAMP="kubernetes $K8S_VERSION etcd $ETCD_VERSION ldflags:$K8S_LDFLAGS"

built() {
  [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kube-controller-manager" ] && [ -x "$BIN/etcd" ] \
    && [ "$(cat "$BUILD/stamp" 2>/dev/null)" = "$STAMP" ]
}

# KUBEBUILDER_ASSETS, when it names etcd and kube-apiserver: print the folder, else nothing.
envtest_assets() {
  local assets=${KUBEBUILDER_ASSETS:-}
  [ -n "$assets" ] && [ -x "$assets/etcd" ] && [ -x "$assets/kube-apiserver" ] && (cd "$assets" && pwd)
  return 0
}

# $1 packages to build into $BIN ("all", or "kcm" for kube-controller-manager alone)
build_kubernetes() {
  local which=$1 work begun packages
  begun=$SECONDS
  mkdir -p "$BUILD"
  work=$(mktemp -d "$BUILD/build.XXXXXX")
  cp -r "$ROOT/scripts/cluster/kubernetes" "$ROOT/scripts/cluster/etcd" "$work/"
  packages=(k8s.io/kubernetes/cmd/kube-controller-manager)
  [ "$which" = kcm ] || packages=(k8s.io/kubernetes/cmd/kube-apiserver "${packages[@]}")
  step "go build ${packages[*]}"
  (cd "$work/kubernetes" && nice -n 10 "$GO" build -ldflags="$K8S_LDFLAGS" -o "$work/bin/" "${packages[@]}") \
    || { rm -rf "$work"; die "building Kubernetes $K8S_VERSION failed (above)"; }
  if [ "$which" = all ]; then
    step "go build go.etcd.io/etcd/server/v3 (the etcd command)"
    (cd "$work/etcd" && nice -n 10 "$GO" build -o "$work/bin/etcd" go.etcd.io/etcd/server/v3) \
      || { rm -rf "$work"; die "building etcd $ETCD_VERSION failed (above)"; }
    echo $((SECONDS - begun)) > "$BUILD/build-seconds"
    rm -rf "$BIN"
    mv "$work/bin" "$BIN"
    echo "$STAMP" > "$BUILD/stamp"
  else
    mkdir -p "$BUILD/kcm"
    mv "$work/bin/kube-controller-manager" "$BUILD/kcm/kube-controller-manager"
    echo "$STAMP" > "$BUILD/kcm/stamp"
  fi
  rm -rf "$work"
  step "built in $((SECONDS - begun))s"
}

control_plane() {
  local assets
  assets=$(envtest_assets)
  if [ -n "$assets" ]; then
    EXE[etcd]=$assets/etcd
    EXE[kube-apiserver]=$assets/kube-apiserver
    step "KUBEBUILDER_ASSETS: etcd and kube-apiserver from $assets ($("$assets/kube-apiserver" --version 2>/dev/null || echo "version unknown"))"
    if [ -x "$assets/kube-controller-manager" ]; then
      EXE[kube-controller-manager]=$assets/kube-controller-manager
      step "KUBEBUILDER_ASSETS: kube-controller-manager from there too; nothing of the control plane is built"
      return 0
    fi
    if [ -x "$BUILD/kcm/kube-controller-manager" ] && [ "$(cat "$BUILD/kcm/stamp" 2>/dev/null)" = "$STAMP" ]; then
      step "kube-controller-manager $K8S_VERSION: $BUILD/kcm (cached; envtest's layout has none)"
    elif [ -x "$BIN/kube-controller-manager" ] && built; then
      step "kube-controller-manager $K8S_VERSION: $BIN (cached; envtest's layout has none)"
      EXE[kube-controller-manager]=$BIN/kube-controller-manager
      return 0
    else
      find_go
      step "KUBEBUILDER_ASSETS has no kube-controller-manager: building it alone ($K8S_VERSION)"
      build_kubernetes kcm
    fi
    EXE[kube-controller-manager]=$BUILD/kcm/kube-controller-manager
    return 0
  fi
  if built; then
    step "control plane: $BIN (cached; building it took $(cat "$BUILD/build-seconds" 2>/dev/null || echo "?")s)"
  else
    find_go
    step "building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION with $("$GO" version | cut -d' ' -f3) (first use: this takes a while)"
    build_kubernetes all
  fi
  EXE[etcd]=$BIN/etcd
  EXE[kube-apiserver]=$BIN/kube-apiserver
  EXE[kube-controller-manager]=$BIN/kube-controller-manager
}

# LLMKube's source: the module's folder (the proxy serves it), or MODELSEAL_LLMKUBE_SOURCE's.
# Sets LLMKUBE_KEY (what the cache is keyed by) and LLMKUBE_FROM (what to say).
llmkube_source() {
  local scratch out source=${MODELSEAL_LLMKUBE_SOURCE:-}
  scratch=$(mktemp -d)
  if out=$(cd "$scratch" && GOFLAGS=-mod=mod "$GO" mod download -json "$LLMKUBE_MODULE@$LLMKUBE_VERSION" 2>&1); then
    rm -rf "$scratch"
    LLMKUBE_SRC=$(printf '%s\n' "$out" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -n 1)
    LLMKUBE_KEY=module
    LLMKUBE_FROM="the Go module $LLMKUBE_MODULE@$LLMKUBE_VERSION"
    return 0
  fi
  rm -rf "$scratch"
  local error
  error=$(printf '%s\n' "$out" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' | head -n 1)
  [ -n "$error" ] || error=$(printf '%s\n' "$out" | tr '\n' ' ')
  error=$(printf '%b' "$error" | tr '\n\t' '  ' | tr -s ' ')
  [ -n "$source" ] || die "LLMKube: the Go module proxy refused $LLMKUBE_MODULE@$LLMKUBE_VERSION ($error); set MODELSEAL_LLMKUBE_SOURCE to its source tree or its release archive (git archive of the tag)"
  [ -e "$source" ] || die "MODELSEAL_LLMKUBE_SOURCE=$source does not exist"
  step "LLMKube: the Go module proxy refused $LLMKUBE_MODULE@$LLMKUBE_VERSION; using $source"
  if [ -d "$source" ]; then
    LLMKUBE_SRC=$(cd "$source" && pwd)
    LLMKUBE_KEY=tree-$(cd "$source" && find . -type f -not -path './.git/*' -print0 | LC_ALL=C sort -z \
      | xargs -0 sha256sum | sha256sum | cut -c1-16)
  else
    LLMKUBE_SRC=
    LLMKUBE_KEY=$(sha256sum < "$source" | cut -c1-16)
  fi
  LLMKUBE_FROM=$source
}

# LLMKube's manager and CRDs, built on first use: sets LLMKUBE_DIR (bin/manager, crd/*.yaml).
build_llmkube() {
  find_go
  llmkube_source
  LLMKUBE_DIR=$CACHE/llmkube-$LLMKUBE_VERSION-$LLMKUBE_KEY
  if [ -x "$LLMKUBE_DIR/bin/manager" ] && [ -f "$LLMKUBE_DIR/crd/inference.llmkube.dev_models.yaml" ]; then
    step "LLMKube $LLMKUBE_VERSION manager: $LLMKUBE_DIR (cached; building it took $(cat "$LLMKUBE_DIR/build-seconds" 2>/dev/null || echo "?")s)"
    return 0
  fi
  local begun=$SECONDS work src
  mkdir -p "$CACHE"
  work=$(mktemp -d "$CACHE/llmkube-build.XXXXXX")
  src=$LLMKUBE_SRC
  if [ -z "$src" ]; then  # an archive: unpack it
    tar -xzf "$MODELSEAL_LLMKUBE_SOURCE" -C "$work"
    src=$(find "$work" -mindepth 1 -maxdepth 2 -name go.mod -printf '%h\n' | head -n 1)
    [ -n "$src" ] || { rm -rf "$work"; die "$MODELSEAL_LLMKUBE_SOURCE holds no go.mod"; }
  fi
  step "building LLMKube $LLMKUBE_VERSION's manager (go build ./cmd/) from $LLMKUBE_FROM (first use: minutes)"
  (cd "$src" && GOFLAGS=-buildvcs=false nice -n 10 "$GO" build -mod=readonly -o "$work/out/bin/manager" ./cmd/) \
    || { rm -rf "$work"; die "building LLMKube's manager failed (above)"; }
  mkdir -p "$work/out/crd"
  cp "$src"/config/crd/bases/*.yaml "$work/out/crd/"
  echo $((SECONDS - begun)) > "$work/out/build-seconds"
  rm -rf "$LLMKUBE_DIR"
  mv "$work/out" "$LLMKUBE_DIR"
  rm -rf "$work"
  step "built LLMKube's manager in $((SECONDS - begun))s: $LLMKUBE_DIR"
}

# $1: "with-llmkube" (default) or "without-llmkube" (the control plane alone)
build() {
  local begun=$SECONDS
  mkdir -p "$CACHE"
  exec 9>"$CACHE/build.lock"
  if ! flock -n 9; then
    step "another build holds $CACHE/build.lock: waiting for it"
    flock 9
  fi
  control_plane
  [ "${1:-with-llmkube}" = without-llmkube ] || build_llmkube
  exec 9>&-  # unlocks; the daemons started later do not inherit it
  step "ready in $((SECONDS - begun))s"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A key and a certificate signed by DIR/pki/ca: NAME SUBJECT EXTENDED-KEY-USAGE [SUBJECT-ALT-NAMES]
issue() {
  local name=$1 subject=$2 usage=$3 sans=${4:-}
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } > "$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

pki() {
  PKI=$DIR/pki
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  umask 077
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=modelseal test cluster CA" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$PKI/ca.crt" 2>/dev/null
  issue etcd "/CN=etcd" serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
  issue apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
  issue apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  issue admin "/O=system:masters/CN=modelseal-test-admin" clientAuth
  issue controller-manager "/CN=system:kube-controller-manager" clientAuth
  issue llmkube "/O=system:masters/CN=llmkube-manager" clientAuth
  # service-account tokens: the apiserver signs with sa.key and checks with sa.pub
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
  openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  umask 022
}

b64() { base64 -w0 < "$1"; }

kubeconfig() {  # FILE USER: a kubeconfig with DIR/pki/USER.crt and .key embedded
  local file=$1 user=$2
  umask 077
  cat > "$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: modelseal-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(b64 "$PKI/$user.crt")
    client-key-data: $(b64 "$PKI/$user.key")
contexts:
- name: modelseal-test
  context: {cluster: modelseal-test, user: $user}
current-context: modelseal-test
EOF
  mv "$file.tmp" "$file"
  umask 022
}

api() {  # curl as the admin: PATH [curl options]
  local path=$1
  shift
  curl -sS --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$@" "https://127.0.0.1:$API_PORT$path"
}

start() {  # NAME ARGS...: start ${EXE[NAME]} in the background, logging to DIR/logs/NAME.log
  local name=$1
  shift
  printf '%s\n' "$@" > "$DIR/$name.args"  # for restart
  readlink -f "${EXE[$name]}" > "$DIR/$name.exe"
  "${EXE[$name]}" "$@" >> "$DIR/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$DIR/$name.pid"
}

alive() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

wait_for() {  # NAME SECONDS WHAT COMMAND...: until COMMAND succeeds, while NAME runs
  local name=$1 seconds=$2 what=$3
  shift 3
  local deadline=$((SECONDS + seconds))
  until "$@" > /dev/null 2>&1; do
    if ! alive "$name"; then
      tail -n 20 "$DIR/logs/$name.log" >&2 || true
      fail "$name exited before $what ($DIR/logs/$name.log above)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$DIR/logs/$name.log" >&2 || true
      fail "$name: waited ${seconds}s for $what, in vain ($DIR/logs/$name.log above)"
    fi
    sleep 0.2
  done
}

fail() {
  printf 'cluster.sh: %s\n' "$*" >&2
  stop_all
  exit 1
}

etcd_healthy() {
  local health
  health=$(curl -sSf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/apiserver-etcd-client.crt" \
    --key "$PKI/apiserver-etcd-client.key" "https://127.0.0.1:$ETCD_PORT/health") || return 1
  [[ $health =~ \"health\":[[:space:]]*\"true\" ]]
}

apiserver_ready() { api /readyz -f; }

controllers_working() {  # the serviceaccount controller made the default namespace's account
  api /api/v1/namespaces/default/serviceaccounts/default -f
}

install_crd() {  # FILE: POST a CRD (one document); one that exists already is kept
  local crd=$1 code
  code=$(api /apis/apiextensions.k8s.io/v1/customresourcedefinitions -o "$DIR/logs/crd.out" \
    -w '%{http_code}' -X POST -H 'Content-Type: application/yaml' --data-binary "@$crd")
  case $code in
    201 | 409) ;;
    *) cat "$DIR/logs/crd.out" >&2; fail "installing the CRD $crd: HTTP $code" ;;
  esac
}

served() {  # GROUP/VERSION PLURAL...: the API server's discovery lists every one
  local found plural
  found=$(api "/apis/$1" -f) || return 1
  shift
  for plural in "$@"; do
    [[ $found =~ \"name\":[[:space:]]*\"$plural\" ]] || return 1  # curl gets it pretty-printed
  done
}

# The CRDs LLMKube's chart ships (charts/llmkube/templates/crds: the inference.llmkube.dev and
# federation.llmkube.dev ones of config/crd/bases; the foreman ones are not the chart's), and its
# PriorityClasses (charts/llmkube/templates/priority-classes.yaml at v0.9.19: name, value, policy).
LLMKUBE_RESOURCES=(models inferenceservices loraadapters modelpools modelrouters gpuquotas)
llmkube_crds() {
  local crd
  for crd in "$LLMKUBE_DIR"/crd/inference.llmkube.dev_*.yaml "$LLMKUBE_DIR"/crd/federation.llmkube.dev_*.yaml; do
    install_crd "$crd"
  done
  wait_for kube-apiserver 60 "LLMKube's CRDs served" llmkube_crds_served
  local class value policy code
  for class in critical:1000000:PreemptLowerPriority high:100000:PreemptLowerPriority \
    normal:10000:PreemptLowerPriority low:1000:PreemptLowerPriority batch:100:Never; do
    IFS=: read -r class value policy <<< "$class"
    code=$(api /apis/scheduling.k8s.io/v1/priorityclasses -o "$DIR/logs/priorityclass.out" -w '%{http_code}' \
      -X POST -H 'Content-Type: application/json' --data-binary @- <<JSON
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
 "metadata": {"name": "llmkube-$class", "labels": {"app.kubernetes.io/name": "llmkube"}},
 "value": $value, "preemptionPolicy": "$policy", "globalDefault": false,
 "description": "LLMKube's $class priority (as its chart installs it)"}
JSON
    )
    case $code in 201 | 409) ;; *) cat "$DIR/logs/priorityclass.out" >&2; fail "PriorityClass llmkube-$class: HTTP $code" ;; esac
  done
}

llmkube_crds_served() {
  served inference.llmkube.dev/v1alpha1 "${LLMKUBE_RESOURCES[@]}" && served federation.llmkube.dev/v1alpha1 federatedclusters
}

standalone_crd() {  # modelseal alone: the Model CRD deploy/crd ships (deploy/overlays/standalone)
  install_crd "$ROOT/deploy/crd/crd-models.yaml"
  wait_for kube-apiserver 60 "the Model CRD served" served inference.llmkube.dev/v1alpha1 models
}

PROBE=/apis/inference.llmkube.dev/v1alpha1/namespaces/llmkube-system/models/first-reconcile

llmkube_healthy() { curl -sSf --max-time 5 "http://127.0.0.1:$(cat "$DIR/llmkube-probe-port")/readyz"; }

# The manager's first reconcile: a Model of a Hugging Face repository id (LLMKube resolves those
# at runtime, so its Model controller turns them Ready at once, downloading nothing) is Ready.
probe_ready() {
  local found
  found=$(api "$PROBE" -f) || return 1
  [[ $found =~ \"phase\":[[:space:]]*\"Ready\" ]]
}

first_reconcile() {
  local code
  api /api/v1/namespaces -o /dev/null -X POST -H 'Content-Type: application/json' \
    --data-binary '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llmkube-system"}}' || true
  api "$PROBE" -o /dev/null -X DELETE || true  # left over by a manager killed before it was Ready
  wait_for kube-apiserver 30 "the probe Model gone" probe_gone
  code=$(api "${PROBE%/*}" -o "$DIR/logs/probe.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary '{"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model",
      "metadata": {"name": "first-reconcile"}, "spec": {"source": "modelseal/first-reconcile-probe"}}')
  [ "$code" = 201 ] || { cat "$DIR/logs/probe.out" >&2; fail "creating the probe Model: HTTP $code"; }
  wait_for llmkube 120 "its first reconcile (the probe Model llmkube-system/first-reconcile Ready)" probe_ready
  api "$PROBE" -o /dev/null -X DELETE
}

probe_gone() { [ "$(api "$PROBE" -o /dev/null -w '%{http_code}')" = 404 ]; }

start_llmkube() {
  local probe metrics
  probe=$(free_port)
  metrics=$(free_port)
  echo "$probe" > "$DIR/llmkube-probe-port"
  echo "$metrics" > "$DIR/llmkube-metrics-port"
  EXE[llmkube]=$LLMKUBE_DIR/bin/manager
  # --model-cache-path stays /models, as the chart sets it: the Pods LLMKube builds mount its cache
  # there, and the manager itself writes there only for file:// and /path sources, which its
  # host-path allowlist (empty by default, as in the chart) refuses before any copy
  start llmkube --kubeconfig="$DIR/llmkube.kubeconfig" --leader-elect=false \
    --health-probe-bind-address="127.0.0.1:$probe" --metrics-bind-address="127.0.0.1:$metrics" \
    --metrics-secure=false --allowed-remote-hosts=127.0.0.1
  wait_for llmkube 60 "its health probe (127.0.0.1:$probe/readyz)" llmkube_healthy
  first_reconcile
}

up() {  # $1: with-llmkube or without-llmkube
  local with=$1
  [ ! -f "$DIR/kube-apiserver.pid" ] || ! alive kube-apiserver \
    || die "$DIR already has a running control plane: bash scripts/cluster.sh down $DIR first"
  mkdir -p "$DIR/logs"
  build "$with"
  step "certificates: a CA of this cluster's own, serving and client certificates, service-account keys ($DIR/pki)"
  pki
  ETCD_PORT=$(free_port)
  PEER_PORT=$(free_port)
  API_PORT=$(free_port)
  echo "$API_PORT" > "$DIR/api-port"
  step "etcd $ETCD_VERSION on 127.0.0.1:$ETCD_PORT (TLS, client certificates)"
  start etcd --name=modelseal-test --data-dir="$DIR/etcd" \
    --listen-client-urls="https://127.0.0.1:$ETCD_PORT" --advertise-client-urls="https://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="https://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls="https://127.0.0.1:$PEER_PORT" \
    --initial-cluster="modelseal-test=https://127.0.0.1:$PEER_PORT" \
    --cert-file="$PKI/etcd.crt" --key-file="$PKI/etcd.key" --trusted-ca-file="$PKI/ca.crt" --client-cert-auth \
    --peer-cert-file="$PKI/etcd.crt" --peer-key-file="$PKI/etcd.key" --peer-trusted-ca-file="$PKI/ca.crt" \
    --peer-client-cert-auth --unsafe-no-fsync --log-level=warn
  wait_for etcd 60 "health" etcd_healthy
  step "kube-apiserver $K8S_VERSION on https://127.0.0.1:$API_PORT (RBAC; service-account tokens; admission webhooks)"
  # the audit log records every request of modelseal-system's service accounts (the operator as
  # deploy/ runs it), with the bodies of its Model status writes, and LLMKube's manager's requests
  # (no bodies): the tests count the operator's refusals and read what it wrote, the benchmark
  # counts both controllers' requests
  cat > "$DIR/audit-policy.yaml" <<POLICY
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Request
    userGroups: ["system:serviceaccounts:modelseal-system"]
    resources: [{group: inference.llmkube.dev, resources: [models/status]}]
  - level: Metadata
    userGroups: ["system:serviceaccounts:modelseal-system"]
  - level: Metadata
    users: ["llmkube-manager"]
  - level: None
POLICY
  # --enable-aggregator-routing: a webhook named by its Service is called at a ready endpoint's
  # address (no kube-proxy routes a ClusterIP here), as tests/cluster/test_replicas.py reaches two
  # operator replicas
  start kube-apiserver --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --etcd-servers="https://127.0.0.1:$ETCD_PORT" --etcd-cafile="$PKI/ca.crt" \
    --etcd-certfile="$PKI/apiserver-etcd-client.crt" --etcd-keyfile="$PKI/apiserver-etcd-client.key" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --authorization-mode=RBAC \
    --enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultTolerationSeconds,Priority,PodSecurity,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-signing-key-file="$PKI/sa.key" --service-account-key-file="$PKI/sa.pub" \
    --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
    --enable-aggregator-routing=true \
    --cert-dir="$DIR/apiserver-certs" --profiling=false \
    --audit-policy-file="$DIR/audit-policy.yaml" --audit-log-path="$DIR/logs/audit.log" --audit-log-format=json
  wait_for kube-apiserver 180 "readiness (/readyz)" apiserver_ready
  kubeconfig "$DIR/kubeconfig" admin
  kubeconfig "$DIR/controller-manager.kubeconfig" controller-manager
  kubeconfig "$DIR/llmkube.kubeconfig" llmkube
  step "kube-controller-manager $K8S_VERSION (Deployment, ReplicaSet, Job, garbage collector, service accounts, ...)"
  start kube-controller-manager --kubeconfig="$DIR/controller-manager.kubeconfig" --secure-port=0 \
    --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --kube-api-qps=200 --kube-api-burst=400
  wait_for kube-controller-manager 120 "the default ServiceAccount (its controllers at work)" controllers_working
  if [ "$with" = with-llmkube ]; then
    step "LLMKube $LLMKUBE_VERSION as its chart installs it: its CRDs ($LLMKUBE_DIR/crd) and PriorityClasses"
    llmkube_crds
    step "LLMKube's manager, out of cluster (log: $DIR/logs/llmkube.log); waiting for its first reconcile"
    start_llmkube
  else
    step "modelseal alone (no LLMKube): the Model CRD of deploy/crd"
    standalone_crd
  fi
  echo "$with" > "$DIR/mode"
  step "up in $((SECONDS - STARTED))s: export KUBECONFIG=$DIR/kubeconfig   (stop: bash scripts/cluster.sh down $DIR)"
}

# Stop one component by the PID `up` recorded, only if that PID still runs the binary `up` started.
stop_one() {
  local name=$1 pid exe
  [ -f "$DIR/$name.pid" ] || return 0
  pid=$(cat "$DIR/$name.pid")
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  if [ -n "$exe" ] && [ "$exe" = "$(cat "$DIR/$name.exe" 2>/dev/null)" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    step "stopped $name (pid $pid)"
  fi
  rm -f "$DIR/$name.pid"
}

# Restart one component with the flags `up` gave it (the tests restart the apiserver mid-judgement).
restart() {
  local name=$1 args
  case $name in etcd | kube-apiserver | kube-controller-manager | llmkube) ;; *) die "cannot restart $name" ;; esac
  [ -f "$DIR/$name.args" ] || die "$DIR has no $name that \`up\` started"
  EXE[$name]=$(cat "$DIR/$name.exe")
  PKI=$DIR/pki
  API_PORT=$(cat "$DIR/api-port")
  stop_one "$name"
  mapfile -t args < "$DIR/$name.args"
  step "starting $name again"
  start "$name" "${args[@]}"
  case $name in
    etcd) ETCD_PORT=$(sed -n 's|^--listen-client-urls=https://127.0.0.1:||p' "$DIR/etcd.args")
      wait_for etcd 60 "health" etcd_healthy ;;
    kube-apiserver) wait_for kube-apiserver 180 "readiness (/readyz)" apiserver_ready ;;
    kube-controller-manager) wait_for kube-controller-manager 120 "its controllers at work" controllers_working ;;
    llmkube) wait_for llmkube 60 "its health probe" llmkube_healthy
      first_reconcile ;;
  esac
}

stop_all() {
  for name in llmkube kube-controller-manager kube-apiserver etcd; do stop_one "$name"; done
}

[ $# -ge 1 ] || usage
for tool in openssl curl python3 flock; do
  command -v "$tool" > /dev/null || die "$tool is missing: scripts/cluster.sh needs openssl, curl, python3 and flock (util-linux)"
done
case $1 in
  build)
    [ $# -eq 1 ] || usage
    build
    ;;
  up)
    [ $# -eq 2 ] || { [ $# -eq 3 ] && [ "$3" = --without-llmkube ]; } || usage
    mkdir -p "$2"
    DIR=$(cd "$2" && pwd)
    up "$([ $# -eq 3 ] && echo without-llmkube || echo with-llmkube)"
    ;;
  down)
    [ $# -eq 2 ] || usage
    mkdir -p "$2"
    DIR=$(cd "$2" && pwd)
    stop_all
    ;;
  restart)
    [ $# -eq 3 ] || usage
    DIR=$(cd "$2" && pwd)
    restart "$3"
    ;;
  *) usage ;;
esac

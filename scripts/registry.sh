#!/usr/bin/env bash
# A registry to try modelseal on: Debian's docker-registry (CNCF distribution), plain HTTP, on loopback.
#
#     bash scripts/registry.sh start DIR [PORT]   # prints HOST:PORT; the images are kept in DIR
#     bash scripts/registry.sh stop DIR
#
# start runs the registry in the background and prints its address (127.0.0.1:PORT, a free port
# unless PORT is given) on stdout, so REGISTRY=$(bash scripts/registry.sh start DIR) keeps it; a
# registry already serving DIR is reused. Plain HTTP, no login: give modelseal --plain-http. Not
# for production. docker-registry is installed with apt when it is missing and this runs as root.
set -euo pipefail

usage() { echo "usage: bash scripts/registry.sh start DIR [PORT] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1 dir=$2 port=${3:-}

running() {  # the pid in DIR/registry.pid, when that process is a docker-registry still alive
  local pid
  pid=$(cat "$dir/registry.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q docker-registry "/proc/$pid/cmdline" 2>/dev/null \
    && echo "$pid"
}

case $action in
stop)
  if pid=$(running); then
    kill "$pid"
    echo "registry: stopped (pid $pid); its images stay in $dir" >&2
  else
    echo "registry: none is running for $dir" >&2
  fi
  rm -f "$dir/registry.pid"
  exit 0
  ;;
start) ;;
*) usage ;;
esac

if pid=$(running); then
  cat "$dir/registry.address"
  echo "registry: already serving $dir (pid $pid)" >&2
  exit 0
fi
if ! command -v docker-registry >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "registry: installing docker-registry (apt)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
  else
    echo "registry: docker-registry is missing: apt-get install docker-registry (as root)" >&2
    exit 1
  fi
fi
# a free port, or the one given if it is free (a taken one would answer for another server)
if ! port=$(python3 - "$port" <<'PY'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1] or 0)))
except (OSError, ValueError) as e:
    sys.exit(f"registry: cannot listen on 127.0.0.1:{sys.argv[1]}: {getattr(e, 'strerror', None) or e}; give another PORT, or none")
print(s.getsockname()[1])
PY
); then
  exit 1
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cat > "$dir/config.yml" <<YAML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $dir/data}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$port}
YAML
nohup docker-registry serve "$dir/config.yml" > "$dir/registry.log" 2>&1 &
echo $! > "$dir/registry.pid"
echo "127.0.0.1:$port" > "$dir/registry.address"
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "127.0.0.1:$port"
    echo "registry: serving $dir at 127.0.0.1:$port (plain HTTP: give modelseal --plain-http);" \
      "stop it with: bash scripts/registry.sh stop $dir" >&2
    exit 0
  fi
  if ! running >/dev/null; then break; fi
  sleep 0.1
done
echo "registry: docker-registry did not start on 127.0.0.1:$port: $(tail -n 3 "$dir/registry.log" | tr '\n' ' ')" >&2
kill "$(cat "$dir/registry.pid")" 2>/dev/null || true
rm -f "$dir/registry.pid"
exit 1

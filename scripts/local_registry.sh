# Sourced: start_local_registry DIR starts a throwaway OCI registry (Debian's docker-registry)
# on a free loopback port, storing in DIR; sets registry_port and registry_pid, and stops it
# when the shell exits. Needs $VENV/bin/python (scripts/setup.sh).
start_local_registry() {
  local dir=$1
  registry_port=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$dir"
  cat > "$dir/config.yml" <<YAML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $(cd "$dir" && pwd)/data}}
http: {addr: 127.0.0.1:$registry_port}
YAML
  docker-registry serve "$dir/config.yml" > "$dir/log" 2>&1 &
  registry_pid=$!
  trap 'kill "$registry_pid" 2>/dev/null || true' EXIT
  "$VENV/bin/python" - "$registry_port" <<'PY'
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        time.sleep(0.05)
PY
}

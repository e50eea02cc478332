# Sourced: start_local_registry DIR starts a throwaway OCI registry (scripts/registry.sh: Debian's
# docker-registry on a free loopback port, storing in DIR); sets registry_port and registry_pid, and
# stops it when the shell exits.
start_local_registry() {
  local address
  address=$(bash scripts/registry.sh start "$1" 2>/dev/null)
  registry_port=${address##*:}
  registry_pid=$(cat "$1/registry.pid")
  trap 'kill "$registry_pid" 2>/dev/null || true' EXIT
}

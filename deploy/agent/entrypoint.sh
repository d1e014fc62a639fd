#!/bin/sh
# Entry point of the agent image (deploy/agent/Dockerfile): prepares cgroups when it runs as root, then
# becomes `gatehouse agent` with the container's arguments (a later --state-dir overrides the default here),
# or `gatehouse agent doctor` when the first argument is `doctor`.
#
# Under cgroup v2 a container starts in the root of its own cgroup namespace, with every process in that
# root and no controller enabled for children. runsc (per-sandbox memory limit) and the bubblewrap driver
# (per-job memory and pids limits) both create child cgroups, which the kernel allows only from a cgroup
# that holds no process itself. So, as root with a writable hierarchy, move our processes into a leaf and
# enable the controllers at the root, as Docker-in-Docker does. Only at the root of our own cgroup namespace
# (/proc/self/cgroup reads `0::/`): with the host's namespace (--cgroupns=host) that root is the host's, and its
# processes are not ours to move. Not root, read-only, cgroup v1 or not at that root: nothing to do here (the
# agent says which limits it cannot enforce).
set -eu
cgroup=${GATEHOUSE_CGROUP_ROOT:-/sys/fs/cgroup}
self_cgroup=${GATEHOUSE_SELF_CGROUP:-/proc/self/cgroup}

if [ "$(id -u)" = 0 ] && [ -f "$cgroup/cgroup.controllers" ] && [ -w "$cgroup/cgroup.procs" ] && [ "$(cat "$self_cgroup" 2>/dev/null)" = '0::/' ]; then
  if mkdir -p "$cgroup/agent" 2>/dev/null; then
    # One pid per write: cgroup.procs takes a single pid each time. A process that exits meanwhile is fine.
    while read -r pid; do
      echo "$pid" > "$cgroup/agent/cgroup.procs" 2>/dev/null || :
    done < "$cgroup/cgroup.procs"
    missing=''
    for c in $(cat "$cgroup/cgroup.controllers"); do
      case $c in
        memory|pids|cpu|io) echo "+$c" > "$cgroup/cgroup.subtree_control" 2>/dev/null || missing="$missing $c" ;;
      esac
    done
    [ -z "$missing" ] || echo "gatehouse-agent-entrypoint: could not enable the cgroup controllers$missing in $cgroup: jobs may run without those limits" >&2
  fi
fi

if [ "${1:-}" = doctor ]; then
  shift
  exec gatehouse agent doctor "$@"
fi
exec gatehouse agent --state-dir /var/lib/gatehouse/state "$@"

#!/bin/sh
# Open MPI's rsh launch agent for hosts that are network namespaces of this machine:
# `netns_agent.sh HOST COMMAND...` runs COMMAND in the namespace VRNIC_NETNS_MAP names for HOST
# ("10.97.0.1=ns-a,10.97.0.2=ns-b"), with VRNIC_IP=HOST so that `vrnic run` there takes the
# host's own address (tests/veth/mpi_veth.py).
host=$1
shift
ns=$(printf '%s\n' "$VRNIC_NETNS_MAP" | tr ',' '\n' | sed -n "s/^$host=//p")
if [ -z "$ns" ]; then
  echo "netns_agent.sh: no namespace for host '$host' in VRNIC_NETNS_MAP" >&2
  exit 1
fi
exec ip netns exec "$ns" env VRNIC_IP="$host" sh -c "$*"

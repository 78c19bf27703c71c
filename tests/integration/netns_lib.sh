# Why: everything distributed once ran only on loopback, where every rank
# shares one host and a wrong advertised address still works. These tests
# give each process a host of its own: a network namespace per host
# (coordinator, each worker, prometheus) with one address in 10.213.0.0/24,
# joined by veth pairs to a bridge that lives in a namespace of its own, so
# nothing touches this machine's own network. Processes start with
# `ip netns exec`; a partition takes a host's bridge port down (packets
# silently dropped both ways) or adds blackhole routes (one direction).
# Everything is torn down on exit, also on failure. Needs root and
# network namespaces: elsewhere the test skips (exit 77) saying why.
#
#   source netns_lib.sh BIN_DIR HOST...   (cluster_lib.sh's functions, hosts
#                                          made; "coordinator" is always one)

NETNS_BIN=$1
shift
NETNS_PREFIX="mt$$"
NETNS_BRIDGE="$NETNS_PREFIX-br"
NETNS_HOSTS=(coordinator "$@")
declare -A HOST_IP=()

netns_skip() {
  echo "SKIP: $*" >&2
  exit 77
}

[ "$(id -u)" = 0 ] || netns_skip "network namespaces need root"
command -v ip >/dev/null || netns_skip "iproute2 (ip) is not installed"
ip netns add "$NETNS_PREFIX-probe" 2>/dev/null || netns_skip "cannot create a network namespace"
ip netns del "$NETNS_PREFIX-probe"

source "$(dirname "${BASH_SOURCE[0]}")/../e2e/cluster_lib.sh" "$NETNS_BIN"

host_cmd() { echo ip netns exec "$NETNS_PREFIX-$1"; }
host_address() { echo "${HOST_IP[$1]}"; }
teardown_hosts() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$NETNS_PREFIX-"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
}
LISTEN_ADDR=0.0.0.0
# Each host is its own machine: the compose ports (DESIGN.md §3).
COORD_PORT=50051
HTTP_PORT=9400

# The bridge, then each host with eth0 on it.
ip netns add "$NETNS_BRIDGE"
ip -n "$NETNS_BRIDGE" link add br0 type bridge
ip -n "$NETNS_BRIDGE" link set br0 up
netns_index=1
for host in "${NETNS_HOSTS[@]}"; do
  ns="$NETNS_PREFIX-$host"
  HOST_IP[$host]=10.213.0.$netns_index
  netns_index=$((netns_index + 1))
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add eth0 type veth peer name "p-$host" netns "$NETNS_BRIDGE"
  ip -n "$NETNS_BRIDGE" link set "p-$host" master br0 up
  ip -n "$ns" addr add "${HOST_IP[$host]}/24" dev eth0
  ip -n "$ns" link set eth0 up
  # Names resolve as in the compose network; a host's own name maps to
  # 127.0.1.1 as Debian's /etc/hosts does (ip netns exec mounts this file).
  mkdir -p "/etc/netns/$ns"
  {
    echo "127.0.0.1 localhost"
    echo "127.0.1.1 host-$host"
    for other in "${!HOST_IP[@]}"; do echo "${HOST_IP[$other]} $other"; done
  } >"/etc/netns/$ns/hosts"
done
# Names of hosts made after a host's file was written.
for host in "${NETNS_HOSTS[@]}"; do
  for other in "${NETNS_HOSTS[@]}"; do
    grep -q " $other\$" "/etc/netns/$NETNS_PREFIX-$host/hosts" ||
      echo "${HOST_IP[$other]} $other" >>"/etc/netns/$NETNS_PREFIX-$host/hosts"
  done
done

# partition HOST / heal HOST: its bridge port down (every packet to and from
# it silently dropped) or up again.
partition() { ip -n "$NETNS_BRIDGE" link set "p-$1" down; }
heal() { ip -n "$NETNS_BRIDGE" link set "p-$1" up; }
# blackhole FROM TO / unblackhole FROM TO: FROM's packets to TO vanish
# (one direction; TO's packets still arrive).
blackhole() { ip -n "$NETNS_PREFIX-$1" route add blackhole "${HOST_IP[$2]}/32"; }
unblackhole() { ip -n "$NETNS_PREFIX-$1" route del blackhole "${HOST_IP[$2]}/32"; }

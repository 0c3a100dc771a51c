#!/usr/bin/python3
"""The device's network interface, found the ways tools look for it in `vrnic run`:

  netdev_view.py --bin BUILD/bin [--user NAME] loopback_v4|loopback_v6|veth_v4|veth_v6

Inside `vrnic run` a probe does what they do: ibdev2netdev (ports/N/gid_attrs/ndevs/0, the
netdev's operstate), rdma-core's tests (the first entry of device/net/, then `ip -j addr show`
on it for the address RDMA CM cases use), UCX (`ucx_info -d`, whose debug log names the netdev
it read) and the verbs (ibv_query_gid_ex's ndev_ifindex, through vrnic's libibverbs). Each must
name the interface that holds the device's address: lo for 127.0.0.x and ::1, the veth inside a
network namespace (IPv4 and IPv6). In the veth cases the address rdma-core's lookup finds
carries an RDMA CM exchange (rdma_server / rdma_client) between the two namespaces, and
perftest's ib_send_bw -R over IPv4.
With --user, run as root, vrnic and the programs run as that plain user (`runuser`), inside
each namespace for the veth cases; without root they run as the caller anyway.
Exit status: 0 pass, 1 fail, 77 skipped (not root or no namespaces, for the veth cases).
"""
import argparse
import ipaddress
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from veth_wire import Skipped, VethPair, report  # noqa: E402

PROBE = r'''
import ctypes, json, os, re, subprocess
IB = "/sys/class/infiniband"
out = {}

def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None

# ibdev2netdev: every device and port, the netdev of GID 0 and its link state; and the
# port as `rdma link` prints it (state, physical state, netdev), from the same files.
lines, links = [], []
for dev in sorted(os.listdir(IB)):
    for port in sorted(os.listdir(f"{IB}/{dev}/ports")):
        p = f"{IB}/{dev}/ports/{port}"
        ndev = read(f"{p}/gid_attrs/ndevs/0")
        state = read(f"/sys/class/net/{ndev}/operstate") if ndev else None
        lines.append(f"{dev} port {port} ==> {ndev} ({state})")
        st, phys = (read(f"{p}/{f}").split(": ")[1] for f in ("state", "phys_state"))
        links.append(f"link {dev}/{port} state {st} physical_state {phys} netdev {ndev} "
                     f"link_layer {read(p + '/link_layer')} rate {read(p + '/rate')}")
out["ibdev2netdev"] = lines
out["rdma_link"] = links
out["uid"] = os.getuid()

# rdma-core's tests/base.py: the first entry of device/net/, then its first address.
net = f"{IB}/vrnic0/device/net"
names = sorted(os.listdir(net)) if os.path.isdir(net) else []
out["device_net"] = names
if names:
    out["device_net_ifindex"] = int(read(f"{net}/{names[0]}/ifindex") or -1)
    shown = json.loads(subprocess.check_output(["ip", "-j", "addr", "show", names[0]]))
    out["ip_addr"] = [f"{a['local']}/{a['prefixlen']}" for a in shown[0]["addr_info"]]

# UCX: its debug log names the netdev of the GID it uses (run before this process opens
# the device, which then holds the address).
try:
    log = subprocess.run(["ucx_info", "-d"], env=dict(os.environ, UCX_LOG_LEVEL="debug"),
                         capture_output=True, text=True, timeout=60)
    m = re.search(r"RoCE LAG level on vrnic0:1 \(([^)]*)\)", log.stdout + log.stderr)
    out["ucx_ndev"] = m.group(1) if m else None
    m = re.search(r"adding gid (\S+) to hash on device vrnic0", log.stdout + log.stderr)
    out["ucx_gid"] = m.group(1) if m else None
except FileNotFoundError:
    out["ucx_ndev"] = "no ucx_info"

# The verbs: GID 0 and its ndev_ifindex, through the libibverbs vrnic run put first.
class GidEntry(ctypes.Structure):
    _fields_ = [("gid", ctypes.c_uint8 * 16), ("gid_index", ctypes.c_uint32),
                ("port_num", ctypes.c_uint32), ("gid_type", ctypes.c_uint32),
                ("ndev_ifindex", ctypes.c_uint32)]
v = ctypes.CDLL("libibverbs.so.1")
v.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
v.ibv_get_device_name.restype = ctypes.c_char_p
v.ibv_get_device_name.argtypes = [ctypes.c_void_p]
v.ibv_open_device.restype = ctypes.c_void_p
v.ibv_open_device.argtypes = [ctypes.c_void_p]
v._ibv_query_gid_ex.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                ctypes.POINTER(GidEntry), ctypes.c_uint32, ctypes.c_size_t]
n = ctypes.c_int()
devs = v.ibv_get_device_list(ctypes.byref(n))
out["ibv_device"] = v.ibv_get_device_name(devs[0]).decode()
ctx = v.ibv_open_device(devs[0])
e = GidEntry()
out["query_gid_ex"] = v._ibv_query_gid_ex(ctx, 1, 0, ctypes.byref(e), 0, ctypes.sizeof(e))
out["gid"] = bytes(e.gid).hex()
out["ndev_ifindex"] = e.ndev_ifindex
v.ibv_close_device.argtypes = [ctypes.c_void_p]
v.ibv_close_device(ctx)

print("@@" + json.dumps(out))
'''


# `runuser -u NAME --` when the programs run as a plain user (--user, as root).
AS_USER = []
# Debian's python3 runs the probe (one under root's home would be out of a plain user's reach).
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def gid_of(address):
    """The RoCEv2 GID of an address, as hex (IPv4-mapped for IPv4)."""
    a = ipaddress.ip_address(address)
    if a.version == 4:
        return (b"\0" * 10 + b"\xff\xff" + a.packed).hex()
    return a.packed.hex()


def probe(vrnic, prefix, address):
    cmd = [*prefix, *AS_USER, vrnic, "run", *(["--ip", address] if address else []), "--",
           PYTHON, "-c", PROBE]
    env = {k: v for k, v in os.environ.items() if k not in ("VRNIC_IP", "VRNIC_SYSFS")}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:]), p
    raise RuntimeError(f"probe printed nothing (exit {p.returncode}): {p.stdout} {p.stderr}")


def interface_index(prefix, ifname):
    shown = json.loads(subprocess.check_output([*prefix, "ip", "-j", "link", "show", ifname]))
    return shown[0]["ifindex"]


def check(found, prefix, ifname, address):
    """What each tool found against the interface that holds the address."""
    problems = []
    want_index = interface_index(prefix, ifname)
    print(f"{address} on {ifname} (ifindex {want_index}): {json.dumps(found)}")
    if found["ibdev2netdev"] != [f"vrnic0 port 1 ==> {ifname} "
                                 f"({open_operstate(prefix, ifname)})"]:
        problems.append(f"ibdev2netdev: {found['ibdev2netdev']}")
    link = f"link vrnic0/1 state ACTIVE physical_state LinkUp netdev {ifname} " \
           "link_layer Ethernet"
    if len(found["rdma_link"]) != 1 or not found["rdma_link"][0].startswith(link + " rate "):
        problems.append(f"rdma link: {found['rdma_link']}, want {link}")
    if found["device_net"] != [ifname]:
        problems.append(f"device/net: {found['device_net']}, want [{ifname}]")
    elif found["device_net_ifindex"] != want_index:
        problems.append(f"device/net/{ifname}/ifindex {found['device_net_ifindex']}")
    if AS_USER and found["uid"] == 0:
        problems.append("the probe ran as root, not as the plain user")
    if found["ibv_device"] != "vrnic0" or found["query_gid_ex"] != 0:
        problems.append(f"verbs: {found['ibv_device']}, query_gid_ex {found['query_gid_ex']}")
    if found["ndev_ifindex"] != want_index:
        problems.append(f"ndev_ifindex {found['ndev_ifindex']}, want {want_index}")
    device_address = address or gid_address(found["gid"])
    if found["gid"] != gid_of(device_address):
        problems.append(f"GID {found['gid']} is not {device_address}'s")
    # The interface's addresses cover the device's (lo lists 127.0.0.1/8 for all of 127/8).
    nets = [ipaddress.ip_interface(a).network for a in found.get("ip_addr", [])]
    if not any(ipaddress.ip_address(device_address) in n for n in nets):
        problems.append(f"rdma-core's lookup: {device_address} not on {found.get('ip_addr')}")
    if found["ucx_ndev"] != "no ucx_info":
        if found["ucx_ndev"] != ifname:
            problems.append(f"UCX read netdev {found['ucx_ndev']}, want {ifname}")
        ucx_gid = ipaddress.ip_address(found["ucx_gid"] or "::")
        if str(ucx_gid.ipv4_mapped or ucx_gid) != device_address:
            problems.append(f"UCX used GID {found['ucx_gid']}, not {device_address}'s")
    return problems


def open_operstate(prefix, ifname):
    return subprocess.check_output([*prefix, "cat", f"/sys/class/net/{ifname}/operstate"],
                                   text=True).strip()


def gid_address(gid_hex):
    raw = bytes.fromhex(gid_hex)
    if raw[:12] == b"\0" * 10 + b"\xff\xff":
        return str(ipaddress.IPv4Address(raw[12:]))
    return str(ipaddress.IPv6Address(raw))


def case_loopback(vrnic, v6):
    if v6 and "::1" not in subprocess.check_output(["ip", "-6", "addr", "show", "lo"], text=True):
        raise Skipped("lo has no ::1 (IPv6 disabled)")
    # IPv4: an address of its own, so that no other vrnic program (tests run two at a time)
    # can take it between UCX's look and the probe's (docs/live.md, "The sysfs view").
    address = "::1" if v6 else "127.0.0.202" if AS_USER else "127.0.0.201"
    found, _ = probe(vrnic, [], address)
    return check(found, [], "lo", address)


def case_veth(vrnic, v6):
    with VethPair(1500) as veth:
        addrs = veth.addr
        if v6:
            addrs = ["fd00:97::1", "fd00:97::2"]
            for i in range(2):
                veth.run("ip", "-n", veth.ns[i], "addr", "add", addrs[i] + "/64", "dev",
                         veth.dev[i], "nodad")
        for i in range(2):  # both ends up (operstate), so that ibdev2netdev's view is stable
            for _ in range(50):
                if open_operstate(veth.exec(i), veth.dev[i]) == "up":
                    break
                subprocess.run(["sleep", "0.1"])
        problems, found = [], []
        for i in range(2):
            f, _ = probe(vrnic, veth.exec(i), addrs[i])
            found.append(f)
            problems += check(f, veth.exec(i), veth.dev[i], addrs[i])
        if problems:
            return problems
        # The RDMA CM between the addresses rdma-core's lookup found.
        server_ip = next(a.split("/")[0] for a in found[1]["ip_addr"]
                         if a.split("/")[0] == addrs[1])
        problems = exchange(vrnic, veth, addrs, ["rdma_server", "-s", server_ip, "-p", "7471"],
                            ["rdma_client", "-s", server_ip, "-p", "7471"])
        if v6:  # Debian's perftest (4.5) has no --ipv6-addr: it reaches IPv4 servers only
            return problems
        # perftest over the RDMA CM (-R): the address picks the device, as on a real host.
        return problems + exchange(vrnic, veth, addrs, ["ib_send_bw", "-R", "-n", "200"],
                                   ["ib_send_bw", "-R", "-n", "200", server_ip])


def exchange(vrnic, veth, addrs, server, client):
    """server (argv) in the second namespace, then client (argv) in the first, each on its
    own device; problems if either fails."""
    with tempfile.TemporaryFile("w+") as log:
        s = subprocess.Popen([*veth.exec(1), *AS_USER, vrnic, "run", "--ip", addrs[1], "--",
                              *server], stdout=log, stderr=log)
        try:
            c = None
            for _ in range(20):  # until the server listens
                c = subprocess.run([*veth.exec(0), *AS_USER, vrnic, "run", "--ip", addrs[0], "--",
                                    *client], capture_output=True, text=True, timeout=60)
                if c.returncode == 0:
                    break
                subprocess.run(["sleep", "0.25"])
            rc = s.wait(timeout=60)
        finally:
            if s.poll() is None:
                s.kill()
        log.seek(0)
        print(f"{' '.join(client)}: exit {c.returncode}; {server[0]}: exit {rc}")
        if c.returncode != 0 or rc != 0:
            return [f"{' '.join(client)}: client {c.returncode} {c.stdout} {c.stderr}, "
                    f"server {rc} {log.read()}"]
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--user", help="run vrnic and the programs as this plain user (if root)")
    ap.add_argument("case", choices=["loopback_v4", "loopback_v6", "veth_v4", "veth_v6"])
    a = ap.parse_args()
    vrnic = os.path.join(os.path.abspath(a.bin), "vrnic")
    kind, family = a.case.split("_")
    if a.user and os.geteuid() == 0:
        AS_USER.extend(["runuser", "-u", a.user, "--"])
    body = case_veth if kind == "veth" else case_loopback
    return report(a.case, lambda: body(vrnic, family == "v6"))


if __name__ == "__main__":
    sys.exit(main())

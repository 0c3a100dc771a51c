#!/usr/bin/env python3
"""Checks `vrnic run`'s sysfs view against what vrnic's libibverbs reports (`ibv_devinfo -v`
in the same namespace): every attribute file, the uverbs class entry, and that
/dev/infiniband/uverbs_vrnic0 is a character device. Then that --no-sysfs and VRNIC_SYSFS=0
leave /dev and /sys/class untouched.  Usage: sysfs_view_test.py VRNIC [USER]
With USER, run as root, vrnic and the programs run as that plain user (`runuser`)."""
import ipaddress
import os
import re
import shutil
import subprocess
import sys

VRNIC = sys.argv[1]
AS_USER = ["runuser", "-u", sys.argv[2], "--"] if len(sys.argv) > 2 and os.geteuid() == 0 else []
# ibv_devinfo, the shell's child, takes the address vrnic run found free: the one the view shows.
SCRIPT = r'''
echo "uid $(id -u)"
ibv_devinfo -v || exit 1
echo @@@
stat -c 'node %F %t:%T' /dev/infiniband/uverbs_vrnic0
ls /sys/class/infiniband | sed 's/^/entry /'
cd /sys/class/infiniband/vrnic0 &&
  find . -type f | sort | while read f; do echo "${f#./}=$(cat $f)"; done
cd /sys/class/infiniband_verbs/uverbs_vrnic0 && for f in *; do echo "uverbs/$f=$(cat $f)"; done
'''
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def field(text, name):
    m = re.search(r"^\s*" + re.escape(name) + r":\s*(.*)$", text, re.M)
    return m.group(1).strip() if m else None


def number(text):
    m = re.search(r"\((\d+)\)", text or "")
    return int(m.group(1)) if m else None


def main():
    if not shutil.which("ibv_devinfo"):
        print("SKIP: no ibv_devinfo (ibverbs-utils) to compare the view with")
        return 77
    env = {k: v for k, v in os.environ.items() if k not in ("VRNIC_IP", "VRNIC_SYSFS")}
    p = subprocess.run([*AS_USER, VRNIC, "run", "--", "sh", "-c", SCRIPT], env=env, capture_output=True,
                       text=True, timeout=60)
    out = p.stdout
    check(p.returncode == 0, f"exit status {p.returncode}: {p.stderr}")
    dev, _, view = out.partition("@@@\n")
    check(not AS_USER or not re.search(r"^uid 0$", dev, re.M), "ran as root, not the user")
    files = dict(line.split("=", 1) for line in view.splitlines() if "=" in line)
    node = re.search(r"^node (.*) (\w+):(\w+)$", view, re.M)
    check(node and node.group(1) == "character special file", "uverbs node is no char device")
    check(re.findall(r"^entry (.*)$", view, re.M) == ["vrnic0"],
          "/sys/class/infiniband holds more than vrnic0")
    for name in ("node_guid", "sys_image_guid", "fw_ver", "board_id"):
        check(files.get(name) == field(dev, name),
              f"{name}: {files.get(name)} vs {field(dev, name)}")
    check(int(files.get("hw_rev", "-1"), 0) == int(field(dev, "hw_ver"), 0), "hw_rev")
    check(files.get("node_type") == "1: CA", "node_type")
    check(number(field(dev, "state")) == int(files["ports/1/state"].split(":")[0]), "state")
    check(files["ports/1/state"] == "4: ACTIVE", "state text")
    check(number(field(dev, "phys_state")) == int(files["ports/1/phys_state"].split(":")[0]),
          "phys_state")
    check(files["ports/1/phys_state"] == "5: LinkUp", "phys_state text")
    check(files["ports/1/link_layer"] == field(dev, "link_layer"), "link_layer")
    check(int(files["ports/1/lid"], 16) == int(field(dev, "port_lid"), 0), "lid")
    check(int(files["ports/1/sm_lid"], 16) == int(field(dev, "sm_lid"), 0), "sm_lid")
    check(int(files["ports/1/lid_mask_count"]) == int(field(dev, "port_lmc"), 0), "lmc")
    check(int(files["ports/1/cap_mask"], 16) == int(field(dev, "port_cap_flags"), 0), "cap_mask")
    width = re.match(r"(\d+)X", field(dev, "active_width")).group(1)
    gbps = float(re.match(r"([\d.]+) Gbps", field(dev, "active_speed")).group(1))
    rate = re.match(r"(\d+) Gb/sec \((\d+)X \w+\)$", files["ports/1/rate"])
    check(rate and int(rate.group(2)) == int(width) and float(rate.group(1)) == gbps * int(width),
          f"rate {files['ports/1/rate']} vs {width}X {gbps}")
    gids = re.findall(r"GID\[\s*(\d+)\]:\s*([0-9a-f:.]+), (RoCE v\d)", dev)
    check(len(gids) == 1, f"GIDs {gids}")
    sys_gids = sorted(k for k in files if k.startswith("ports/1/gids/"))
    check(sys_gids == [f"ports/1/gids/{i}" for i, _, _ in gids], f"gid files {sys_gids}")
    for i, gid, kind in gids:
        address = ipaddress.ip_address(gid)
        check(ipaddress.ip_address(files[f"ports/1/gids/{i}"]) == address, f"gids/{i}")
        check(files[f"ports/1/gid_attrs/types/{i}"] == kind, f"types/{i}")
        mapped = address.ipv4_mapped or address
        want = "lo" if mapped.is_loopback else None
        check(want is None or files[f"ports/1/gid_attrs/ndevs/{i}"] == want, f"ndevs/{i}")
    check(files.get("ports/1/pkeys/0") == "0xffff", "pkeys/0")
    check(files.get("device/numa_node") == "-1", "numa_node")
    check(files.get("uverbs/ibdev") == field(dev, "hca_id"), "uverbs ibdev")
    if node:
        check(files.get("uverbs/dev") == f"{int(node.group(2), 16)}:{int(node.group(3), 16)}",
              "uverbs dev")
    for how in (["run", "--no-sysfs"], ["run"]):
        e = dict(env, VRNIC_SYSFS="0") if how == ["run"] else env
        q = subprocess.run([*AS_USER, VRNIC, *how, "--", "sh", "-c",
                            "ls /dev/infiniband /sys/class/infiniband"],
                           env=e, capture_output=True, text=True, timeout=30)
        check(q.returncode != 0 and q.stdout == "" and "vrnic run" not in q.stderr,
              f"{how} {e.get('VRNIC_SYSFS')}: view present or a message: {q.stdout} {q.stderr}")
    if problems:
        print(out, p.stderr)
        print("\n".join("FAIL: " + x for x in problems))
        return 1
    print(f"OK: {len(files)} sysfs values agree with ibv_devinfo -v; the node is a char device")
    return 0


sys.exit(main())

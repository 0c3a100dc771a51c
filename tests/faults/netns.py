"""The network namespaces of the fault cases: two of them joined by a veth pair, impaired by
kernel netem, by nftables rules (plus an HTB class for reordering), or, where the kernel has no
netem, by a netem profile put in nftables terms (NetemByNft). Used by faults.py and its case
modules; the impairments are described in tests/faults/README.md."""
import os
import re
import subprocess


class Skipped(Exception):
    pass


class Netem:
    """Two namespaces joined by a veth pair, netem on both ends; removed on exit, whatever
    happens (also on SIGTERM from ctest's timeout). Subclasses (Nft) replace impair() and use
    their own names and subnet, so a netem and an nft case can run at the same time."""
    NS, DEV, NET = "vrnicf", "vf", "10.99.0"

    def __init__(self, netem_args):
        tag = str(os.getpid())
        self.ns = [f"{self.NS}-a-{tag}", f"{self.NS}-b-{tag}"]
        self.dev = [f"{self.DEV}a{tag}"[:15], f"{self.DEV}b{tag}"[:15]]
        # The server in namespace a; clients in namespace b, each with its own address (a
        # vrnic process binds UDP port 4791 on its address).
        self.addr = [f"{self.NET}.1", f"{self.NET}.2", f"{self.NET}.3"]
        self.netem_args = netem_args
        self.created = []

    def _ip(self, *args, check=True):
        r = subprocess.run(list(args), capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
        return r

    TOOLS = {"ip": "iproute2", "tc": "iproute2", "ethtool": "ethtool"}

    def __enter__(self):
        if os.geteuid() != 0:
            raise Skipped(f"not root: network namespaces and {'/'.join(self.TOOLS)} need "
                          "CAP_NET_ADMIN")
        for tool, pkg in self.TOOLS.items():
            if subprocess.run(["which", tool], capture_output=True).returncode != 0:
                raise Skipped(f"'{tool}' ({pkg}) is not installed")
        self.remove_stale()
        for ns in self.ns:
            r = self._ip("ip", "netns", "add", ns, check=False)
            if r.returncode != 0:
                self.__exit__()
                raise Skipped(f"ip netns add failed: {r.stderr.strip()}")
            self.created.append(ns)
        try:
            self._ip("ip", "link", "add", self.dev[0], "netns", self.ns[0], "type", "veth",
                     "peer", "name", self.dev[1], "netns", self.ns[1])
            for i in range(2):
                n = self.ns[i]
                # Jumbo frames, as RoCE networks use: a 4096 B MTU packet is one datagram.
                self._ip("ip", "-n", n, "link", "set", self.dev[i], "mtu", "9000")
                for a in self.addr[i:] if i else self.addr[:1]:
                    self._ip("ip", "-n", n, "addr", "add", a + "/24", "dev", self.dev[i])
                self._ip("ip", "-n", n, "link", "set", self.dev[i], "up")
                self._ip("ip", "-n", n, "link", "set", "lo", "up")
                # Segmented before the link, as by a NIC without UDP segmentation offload:
                # the impairments then act on each RoCE packet, not on a whole offload group.
                self._ip("ip", "netns", "exec", n, "ethtool", "-K", self.dev[i],
                         "tx-udp-segmentation", "off")
            self.impair()
        except (RuntimeError, Skipped):
            self.__exit__()
            raise
        print(f"netns: {self.ns[0]} {self.addr[0]} <-> {self.ns[1]} {' '.join(self.addr[1:])}, "
              f"{self.describe()}")
        return self

    def impair(self):
        for i in range(2 if self.netem_args else 0):
            r = self._ip("tc", "-n", self.ns[i], "qdisc", "add", "dev", self.dev[i], "root",
                         "netem", *self.netem_args, check=False)
            if r.returncode != 0:
                raise Skipped(f"tc qdisc add ... netem failed ({r.stderr.strip()}): "
                              f"{kernel_netem()}")

    def describe(self):
        return f"netem {' '.join(self.netem_args or ['(none)'])} on both ends"

    @classmethod
    def remove_stale(cls):
        """Namespaces left by a run that was SIGKILLed (ctest's timeout) before its cleanup."""
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        for m in re.finditer(rf"^({cls.NS}-[ab]-(\d+))", r.stdout, re.M):
            if not os.path.exists(f"/proc/{m.group(2)}"):
                subprocess.run(["ip", "netns", "del", m.group(1)], capture_output=True)

    def __exit__(self, *exc):
        for ns in self.created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.created = []
        return False

    def prefix(self, i):
        return ["ip", "netns", "exec", self.ns[i]]


def kernel_netem():
    """Why netem is missing, as far as the kernel says."""
    try:
        import gzip
        for line in gzip.open("/proc/config.gz", "rt"):
            if "CONFIG_NET_SCH_NETEM" in line:
                return f"kernel {os.uname().release}: {line.strip()}"
    except OSError:
        pass
    return f"kernel {os.uname().release} has no sch_netem (module missing or not built)"


def kernel_options(names):
    """The kernel's configuration lines for these options, for a skip reason."""
    found = []
    try:
        import gzip
        for line in gzip.open("/proc/config.gz", "rt"):
            if any(re.search(rf"\b{n}\b", line) for n in names):
                found.append(line.strip())
    except OSError:
        return f"kernel {os.uname().release} (no /proc/config.gz)"
    return f"kernel {os.uname().release}: {'; '.join(found) or 'none of ' + ' '.join(names)}"


class Nft(Netem):
    """The same two namespaces and veth pair (own names, 10.98.0.0/24), impaired by nftables in
    each namespace instead of a qdisc. On the RoCEv2 datagrams (UDP dport 4791) a namespace
    receives from the veth (prerouting, `iifname` the veth), each rule drawing its own number
    with `numgen random mod 10000 < N`:
      loss     `drop`
      dup      `dup to ip daddr` (nf_dup_ipv4: the copy is routed to the packet's own, local,
               destination and delivered through lo, so it does not meet these rules again)
      corrupt  `@th,160,8 set @th,160,8 ^ 0xff`: flips every bit of the byte after the BTH
               (AETH, RETH or payload), which the ICRC covers; the UDP checksum does not
               stop it (veth passes the sender's CHECKSUM_PARTIAL, not verified again)
    and on what it sends (postrouting, `oifname` the veth):
      reorder  `meta priority set 1:1`: the packet goes into class 1:1 of an HTB root qdisc
               on the veth, limited to 10 Mbit/s (a 4 KiB packet costs 3.4 ms); unmarked
               packets bypass the class (HTB's direct queue, `default 0`), so a held packet
               arrives after later ones. A token bucket, not a delay line: a marked packet
               is held only while the class still pays for an earlier one, so bursts of
               4 KiB packets (the bw cases) are reordered and sparse small packets (atomics)
               mostly pass at once; htb_overlimits shows how many were held.
    Losses are on receive: a drop in the sender's output hook fails its sendmsg (EPERM),
    which a wire loss does not."""
    NS, DEV, NET = "vrnicn", "vn", "10.98.0"
    RULES = {"loss": "drop", "dup": "dup to ip daddr"}
    KERNEL = ["CONFIG_NF_TABLES", "CONFIG_NFT_NUMGEN", "CONFIG_NF_DUP_IPV4", "CONFIG_NFT_DUP_IPV4",
              "CONFIG_NET_SCH_HTB"]

    # Where `corrupt` flips a byte: bit offsets from the UDP header (160: the byte after the
    # BTH). Several offsets share the rate.
    CORRUPT_AT = (160,)

    def __init__(self, rates, match=""):
        super().__init__(None)
        self.rates = rates or {}
        self.match = match  # more to match than `udp dport 4791`, e.g. the CM's MADs only
        self.TOOLS = {"ip": "iproute2", "nft": "nftables", "ethtool": "ethtool"}
        if "reorder" in self.rates:
            self.TOOLS["tc"] = "iproute2"

    def rx_rules(self, i):
        """(rule, counter name) on what namespace i receives from the veth."""
        head = f'iifname "{self.dev[i]}" udp dport 4791 {self.match} '.replace("  ", " ")
        out = []
        for kind, n in self.rates.items():
            if kind == "corrupt":  # each offset its share: `numgen` draws once per rule
                share = max(1, n // len(self.CORRUPT_AT))
                # Only datagrams that hold the byte: the counter then counts flips made.
                out += [f"{head}udp length > {o // 8} numgen random mod 10000 < {share} counter "
                        f'@th,{o},8 set @th,{o},8 ^ 0xff comment "corrupt"'
                        for o in self.CORRUPT_AT]
            elif kind in self.RULES:
                out.append(f'{head}numgen random mod 10000 < {n} counter {self.RULES[kind]} '
                           f'comment "{kind}"')
        return out

    def ruleset(self, i):
        rx = self.rx_rules(i)
        tx = [f'oifname "{self.dev[i]}" udp dport 4791 numgen random mod 10000 < {n} '
              f'counter meta priority set 1:1 comment "{kind}"'
              for kind, n in self.rates.items() if kind == "reorder"]
        chains = "".join(f"  chain {name} {{\n    type filter hook {hook} priority 0; "
                         f"policy accept;\n" + "".join(f"    {r}\n" for r in rules) + "  }\n"
                         for name, hook, rules in (("rx", "prerouting", rx),
                                                   ("tx", "postrouting", tx)) if rules)
        return f"table ip vrnic_faults {{\n{chains}}}\n"

    def impair(self):
        if not self.rates:
            return
        for i in range(2):
            if "reorder" in self.rates:
                for cmd in (["qdisc", "add", "dev", self.dev[i], "root", "handle", "1:", "htb",
                             "default", "0"],
                            ["class", "add", "dev", self.dev[i], "parent", "1:", "classid",
                             "1:1", "htb", "rate", "10mbit", "ceil", "10mbit", "burst", "1600",
                             "quantum", "9100"]):
                    r = self._ip("tc", "-n", self.ns[i], *cmd, check=False)
                    if r.returncode != 0:
                        raise Skipped(f"tc {' '.join(cmd[:2])} ... htb failed "
                                      f"({r.stderr.strip()}): {kernel_options(self.KERNEL)}")
            r = subprocess.run(["ip", "netns", "exec", self.ns[i], "nft", "-f", "-"],
                               input=self.ruleset(i), capture_output=True, text=True)
            if r.returncode != 0:
                raise Skipped(f"nft -f failed ({' '.join(r.stderr.split())}): "
                              f"{kernel_options(self.KERNEL)}")

    def describe(self):
        if not self.rates:
            return "no nft rules"
        return ("nft on both ends, per 10000 RoCEv2 packets: "
                + " ".join(f"{k} {v}" for k, v in self.rates.items()))

    def stats(self):
        """What the kernel did, summed over both namespaces: packets that hit each rule, the
        HTB class's packets and overlimits, the namespaces' UDP receive errors."""
        st = {f"nft_{k}": 0 for k in self.rates}
        for i in range(2):
            out = self._ip("ip", "netns", "exec", self.ns[i], "nft", "list", "ruleset").stdout
            for n, kind in re.findall(r'counter packets (\d+) bytes \d+ .*comment "(\w+)"', out):
                st[f"nft_{kind}"] += int(n)
            if "reorder" in self.rates:
                out = self._ip("tc", "-n", self.ns[i], "-s", "class", "show", "dev",
                               self.dev[i]).stdout
                m = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", out)
                for k, v in zip(("htb_pkts", "htb_dropped", "htb_overlimits"),
                                m.groups() if m else ()):
                    st[k] = st.get(k, 0) + int(v)
            snmp = self._ip("ip", "netns", "exec", self.ns[i], "cat", "/proc/net/snmp").stdout
            udp = [line.split() for line in snmp.splitlines() if line.startswith("Udp:")]
            if len(udp) == 2:
                for k, v in zip(udp[0][1:], udp[1][1:]):
                    if k in ("InCsumErrors", "RcvbufErrors"):
                        st[f"udp_{k}"] = st.get(f"udp_{k}", 0) + int(v)
        return st


class NetemByNft(Nft):
    """What a netem case runs where the kernel has no sch_netem: the same profile in nftables
    terms on each veth's ingress (Nft), in the netem cases' own namespaces and subnet. loss
    and duplicate as in the nft cases; corrupt flips a byte at one of five places the ICRC
    covers, a fifth of the rate each (netem flips a random bit anywhere): the BTH's opcode,
    destination QP and PSN, the byte after the BTH, and the one 48 bytes after it;
    reorder is the nft cases' HTB class. netem's delay has no nftables form and is left out
    (it is printed)."""
    NS, DEV, NET = Netem.NS, Netem.DEV, Netem.NET
    CORRUPT_AT = (64, 104, 152, 160, 544)
    KINDS = {"loss": "loss", "duplicate": "dup", "corrupt": "corrupt", "reorder": "reorder"}

    def __init__(self, netem_args):
        rates, self.left_out = {}, []
        args = list(netem_args or [])
        for i, word in enumerate(args):
            if word in self.KINDS and i + 1 < len(args) and args[i + 1].endswith("%"):
                rate = round(float(args[i + 1][:-1]) * 100)
                if rate:
                    rates[self.KINDS[word]] = rate
            elif word == "delay":
                self.left_out.append(f"delay {args[i + 1]}")
        super().__init__(rates)
        self.netem_args = netem_args

    def describe(self):
        return (f"no sch_netem ({kernel_netem()}): netem {' '.join(self.netem_args or [])} as "
                f"{super().describe()}" + (f"; left out: {', '.join(self.left_out)}"
                                           if self.left_out else ""))


_netem_works = None


def netem_works():
    """Whether the kernel has sch_netem: a netem qdisc tried once on lo of a throwaway
    namespace (root only; False without root, where the cases skip anyway)."""
    global _netem_works
    if _netem_works is None:
        ns = f"vrnicp-{os.getpid()}"
        _netem_works = False
        if os.geteuid() == 0 and subprocess.run(["ip", "netns", "add", ns],
                                                capture_output=True).returncode == 0:
            r = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem",
                                "delay", "1ms"], capture_output=True)
            _netem_works = r.returncode == 0
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return _netem_works


def netem_or_nft(netem_args):
    """The impairment of a netem case: netem where the kernel has it, NetemByNft where not
    (the cases then run instead of skipping)."""
    return Netem(netem_args) if not netem_args or netem_works() else NetemByNft(netem_args)

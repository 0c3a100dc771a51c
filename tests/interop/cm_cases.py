"""The interop cases that connect through the RDMA CM (vrnic's librdmacm.so.1): rdmacm-utils,
perftest with -R, fio's rdma engine and rsockets. Used by interop.py."""
import os
import subprocess


def cm(server, client, server_expect=(), client_expect=(), **extra):
    """A pair that connects through the RDMA CM (vrnic's librdmacm.so.1). The server has
    127.0.0.1 (the first free address), the client 127.0.0.2; each side's output must match
    every regex given for it."""
    return dict({"server": server, "clients": [client], "kind": "cm", "noport": True,
                 "expect": {"server": list(server_expect), "client0": list(client_expect)},
                 "start_delay": 1.5}, **extra)


def check_xrc_capture(tmp):
    """The server's capture of rdma_xserver -c x: the client's message is an XRC SEND Only
    (0xa4) whose XRCETH (tshark shows it as the 4 bytes after the BTH: it decodes the XRC
    opcodes but not the XRCETH) names a non-zero XRC SRQ with the reserved byte 0, and the
    server answers with an XRC ACK (0xb1)."""
    out = subprocess.run(["tshark", "-r", os.path.join(tmp, "server.pcap"), "-Y",
                          "infiniband.bth.opcode == 0xa4 || infiniband.bth.opcode == 0xb1",
                          "-T", "fields", "-e", "ip.src", "-e", "infiniband.bth.opcode",
                          "-e", "infiniband.vendor"], capture_output=True, text=True).stdout
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    print(f"XRC packets in the server's capture: {rows}")

    def xrceth_ok(r):
        word = int(r[2].split(",")[0][:8] or "0", 16)
        return word >> 24 == 0 and word & 0xffffff != 0

    sends = [r for r in rows if r[:2] == ["127.0.0.2", "164"] and len(r) > 2 and xrceth_ok(r)]
    acks = [r for r in rows if r[:2] == ["127.0.0.1", "177"]]
    return [] if sends and acks else [f"no XRC SEND with an XRCETH and XRC ACK: {rows}"]


def cm_cases(c, perftest):
    """rdmacm-utils and perftest with -R: programs that connect through librdmacm."""
    done = [r"test complete", r"return status 0"]
    # rping -V verifies every ping; -v on the client prints each one (200 lines).
    c["cm_rping"] = cm(["rping", "-s", "-a", "127.0.0.1", "-C", "200", "-V", "-S", "4096"],
                       ["rping", "-c", "-a", "127.0.0.1", "-C", "200", "-V", "-S", "4096", "-v"],
                       client_expect=[r"ping data: rdma-ping-0: ", r"ping data: rdma-ping-199: "])
    c["cm_ucmatose"] = cm(["ucmatose", "-c", "4"], ["ucmatose", "-s", "127.0.0.1", "-c", "4"],
                          done, ["data transfers complete", *done])
    c["cm_udaddy"] = cm(["udaddy", "-c", "4"], ["udaddy", "-s", "127.0.0.1", "-c", "4"],
                        ["data transfers complete", *done], ["data transfers complete", *done])
    c["cm_rdma_server"] = cm(["rdma_server", "-s", "127.0.0.1"], ["rdma_client", "-s", "127.0.0.1"],
                             [r"rdma_server: end 0"], [r"rdma_client: end 0"])
    # XRC (`-c x`): the server's XRC target QP and XRC SRQ (its number in the private data of
    # the REP), the client's XRC initiator QP sending to that SRQ; and their default, RC.
    c["cm_rdma_xserver"] = cm(["rdma_xserver", "-c", "x"],
                              ["rdma_xclient", "-s", "127.0.0.1", "-c", "x"],
                              [r"rdma_xserver: end 0"], [r"rdma_xclient: end 0"],
                              pcap=True, post=check_xrc_capture)
    c["cm_rdma_xserver_rc"] = cm(["rdma_xserver"], ["rdma_xclient", "-s", "127.0.0.1"],
                                 [r"rdma_xserver: end 0"], [r"rdma_xclient: end 0"])
    # One multicast group: the receiver must count ten datagrams of the sender's forty (a
    # datagram sent before a slow receiver has joined is lost, as on any fabric).
    c["cm_mckey"] = cm(["mckey", "-m", "239.1.1.1", "-b", "127.0.0.1", "-C", "10"],
                       ["mckey", "-m", "239.1.1.1", "-b", "127.0.0.2", "-s", "-C", "40"],
                       ["joined dgid: ::ffff:239.1.1.1", "receiving data transfers",
                        "data transfers complete", *done],
                       ["joined dgid: ::ffff:239.1.1.1", "initiating data transfers",
                        "data transfers complete", *done], start_delay=3)
    # cmtime's server (rdma-core v44) serves until it is stopped: the client's table counts.
    c["cm_cmtime"] = cm(["cmtime", "-b", "127.0.0.1"], ["cmtime", "-s", "127.0.0.1", "-c", "20"],
                        [], [r"connect\s*:\s*[\d.]+", r"disconnect\s*:\s*[\d.]+"],
                        server_persists=True)
    # Captures of both sides: the CM exchange decodes in tshark, and the REQ/REP carry the
    # port, addresses, QPNs and PSNs the RC traffic then used.
    c["cm_pcap_rping"] = cm(["rping", "-s", "-a", "127.0.0.1", "-C", "10"],
                            ["rping", "-c", "-a", "127.0.0.1", "-C", "10", "-v"],
                            [], [r"ping data: rdma-ping-9: "], pcap=True, cm_capture=True)
    # fio's rdma engine: a passive job (rw=read) and an active one that moves 64 MiB with
    # each verb; both report err=0 and the active one the whole 64 MiB. fio connects with
    # rnr_retry_count 0: a SEND that finds no receive posted ends the job with RNR retry
    # exceeded (status 13) on any device, so with --verb=send the passive job keeps 512
    # receives posted (fio's most), not 16 that a receiver descheduled for a few
    # milliseconds on a busy machine had used up (16 SENDs of 64 KiB).
    for verb in ["write", "read", "send"]:
        depth = 512 if verb == "send" else 16
        c["cm_fio_" + verb] = cm(
            ["fio", "--name=passive", "--ioengine=rdma", "--port=7310", "--rw=read",
             "--bs=64k", "--size=64m", f"--iodepth={depth}"],
            ["fio", "--name=active", "--ioengine=rdma", "--hostname=127.0.0.1", "--port=7310",
             "--rw=write", "--bs=64k", "--size=64m", f"--verb={verb}", "--iodepth=1",
             "--iodepth_batch_complete=1"],
            [r"passive: \(groupid=0, jobs=1\): err= 0"],
            [r"active: \(groupid=0, jobs=1\): err= 0", r"WRITE: bw=.*io=64\.0MiB"],
            forbid=["fio: event is", "init failed", "got signal"])
    for tool in ["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat",
                 "ib_send_lat"]:
        c["cm_" + tool] = dict(perftest(tool, ["-R", "-n", "1000"]), start_delay=1.5)
    c["cm_ib_send_bw_ud"] = dict(perftest("ib_send_bw", ["-R", "-c", "UD", "-n", "1000"]),
                                 start_delay=1.5)
    disconnect_cases(c)
    rsocket_cases(c)


def disconnect_cases(c):
    """How a connection ends (tests/cm/cm_disconnect.cc): each side's DISCONNECTED and its
    status, the QP's state, a clean exit of both, as the kernel CMA + librdmacm give them."""
    pairs = {
        "client_first": ("answer", "first"), "server_first": ("first", "answer"),
        "both_first": ("first", "first"), "peer_destroys": ("destroy", "first"),
        "peer_leaves": ("leave", "first"), "peer_exits": ("exit", "answer"),
        "sync": ("answer", "sync"),
    }
    for i, (name, (server, client)) in enumerate(pairs.items()):
        port = str(7480 + i)
        c["cm_disconnect_" + name] = cm(
            ["@vrnic_cm_disconnect", "server", "127.0.0.1", port, server],
            ["@vrnic_cm_disconnect", "client", "127.0.0.1", port, client],
            [rf"server {server}: (PASS|exiting connected)"],
            [rf"client {client}: PASS"], timeout=60)
    # A peer that answers nothing (stopped): the DREQ's resends run out, DISCONNECTED comes
    # with -ETIMEDOUT (the response timeout at 2^12 x 4.096 us: 16 tries take ~0.3 s).
    c["cm_disconnect_unanswered"] = cm(
        ["@vrnic_cm_disconnect", "server", "127.0.0.1", "7479", "stop"],
        ["@vrnic_cm_disconnect", "client", "127.0.0.1", "7479", "unanswered"],
        [r"server stop: stopping"], [r"client unanswered: PASS"], server_persists=True,
        env={"VRNIC_CM_RESPONSE_TIMEOUT": "12"}, timeout=60)


RSPRELOAD = "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"
MIB64 = 64 << 20


def make_file(path, size):
    with open(path, "wb") as f:
        for _ in range(size // (1 << 20)):
            f.write(os.urandom(1 << 20))


def same_files(a, b):
    """Problems if file b is not byte for byte file a."""
    if not os.path.exists(b):
        return [f"{os.path.basename(b)} was not written"]
    if subprocess.run(["cmp", a, b]).returncode != 0:
        return [f"{os.path.basename(b)} ({os.path.getsize(b)} bytes) differs from "
                f"{os.path.basename(a)} ({os.path.getsize(a)} bytes)"]
    print(f"cmp: {os.path.basename(b)} identical to {os.path.basename(a)}, "
          f"{os.path.getsize(b)} bytes")
    return []


def rsocket_cases(c):
    """rsockets (vrnic's librdmacm on both sides): rdmacm-utils' rsocket programs, and a TCP
    program under Debian's librspreload.so, whose bytes must show in vrnic's counters (the
    preload library falls back to kernel TCP silently when rsockets fail)."""
    # All of rstream's default sizes, latency then bandwidth (a connection each), every byte
    # checked (-T v; nonblocking calls) or waiting in rpoll (-T a).
    rows = [rf"(?m)^{n}_{k}\s+{n}\s" for k in ("lat", "bw") for n in ("64", "4k", "64k", "1m")]
    c["cm_rstream_verify"] = cm(["rstream", "-b", "127.0.0.1", "-T", "v"],
                                ["rstream", "-s", "127.0.0.1", "-T", "v"], rows, rows,
                                forbid=["verification failed"], timeout=400)
    # rpoll-driven: 10,000 x 4 KiB each way (the default sizes take minutes on a busy host).
    custom = [r"(?m)^custom\s+4k\s+10k\s"]
    async_opts = ["-T", "a", "-S", "4096", "-C", "10000"]
    c["cm_rstream_async"] = cm(["rstream", "-b", "127.0.0.1", *async_opts],
                               ["rstream", "-s", "127.0.0.1", *async_opts], custom, custom)
    c["cm_rcopy_64m"] = cm(["rcopy"], ["rcopy", "{tmp}/src.bin", "127.0.0.1:{tmp}/dst.bin"],
                           [r"67108864 bytes\.\.\.closing\.\.\.done"],
                           [r"67108864 bytes in [\d.]+ seconds"], server_persists=True,
                           setup=lambda tmp: make_file(os.path.join(tmp, "src.bin"), MIB64),
                           post=lambda tmp: same_files(os.path.join(tmp, "src.bin"),
                                                       os.path.join(tmp, "dst.bin")))
    # riowrite into the peer's riomap'ed buffer, every byte checked; the reader spins on the
    # buffer's last byte.
    rio = [r"(?m)^custom\s+64k\s+1k\s"]
    rio_opts = ["-T", "v", "-S", "65536", "-C", "1000"]
    c["cm_riostream"] = cm(["riostream", "-b", "127.0.0.1", *rio_opts],
                           ["riostream", "-s", "127.0.0.1", *rio_opts], rio, rio,
                           forbid=["verification failed"])
    # udpong (datagram rsockets): 1,000 datagrams of 1000 B, each echoed whole (the client
    # resends one not answered within 1 ms and prints its table only once all 1,000 came
    # back at their size), and, waiting in rpoll, 10,000 of 2000 B one way (loss allowed:
    # the count is the server's). The server serves until it is stopped; line-buffered so
    # that its login line is in the log when it is killed.
    login = [r"client login from 127\.0\.0\.2"]
    c["cm_udpong"] = cm(["stdbuf", "-oL", "udpong", "-b", "127.0.0.1"],
                        ["udpong", "-s", "127.0.0.1", "-S", "1000", "-C", "1000", "-T", "e"],
                        login, [r"(?m)^custom\s+1000\s+2k\s+1\.9m\s"], server_persists=True)
    # The default suite: latency (echoed) and bandwidth runs at every size from 64 B to
    # 1.5 KiB, each row printed once its run ended. A sweep (label `sweep`): 10 s on a quiet
    # machine, but once one echo is late past udpong's 1 ms resend its extra copies keep
    # circulating (see docs/abi.md), and runs of 25-100 s have been seen.
    sizes = ["64", "128", "192", "256", "384", "512", "768", "1k", r"1\.5k"]
    c["cm_udpong_all"] = cm(["stdbuf", "-oL", "udpong", "-b", "127.0.0.1"],
                              ["udpong", "-s", "127.0.0.1"], login,
                              [rf"(?m)^{z}_{kind}\s" for kind in ("lat", "bw") for z in sizes],
                              server_persists=True)
    c["cm_udpong_async"] = cm(["stdbuf", "-oL", "udpong", "-b", "127.0.0.1", "-T", "a"],
                              ["udpong", "-s", "127.0.0.1", "-S", "2000", "-C", "10000", "-T", "a"],
                              login, [r"(?m)^custom\s+1\.9k\s+\S+\s+\S+\s+[\d.]+s"],
                              server_persists=True)
    # iperf's 64 MiB (-n 64M) leave through vrnic as rsocket data messages: RDMA WRITEs
    # with immediate, 4 KiB packets, from the client's device.
    preload = ["env", "LD_PRELOAD=" + RSPRELOAD, "iperf"]
    c["cm_rspreload_iperf"] = cm(
        [*preload, "-s", "-p", "5201"], [*preload, "-c", "127.0.0.1", "-p", "5201", "-n", "64M"],
        [r"64\.0 MBytes"], [r"connected with 127\.0\.0\.1 port 5201", r"64\.0 MBytes"],
        server_persists=True, stats=True,
        counters=[f"client tx_bytes > {MIB64}", f"client tx_write >= {MIB64 // 4096}",
                  "client cm_tx_req >= 1"])
    # iperf's UDP test (4 MiB of 1470-byte datagrams at 50 Mbit/s) on datagram rsockets: the
    # server's report comes back to the client. The first datagrams go over kernel UDP with
    # rdma-core's resolution header until the server's answer names its QP; the rest (all but
    # a few) leave through the client's device as UD SENDs, and the report comes back as one.
    # (The server then binds its port again for the next client, which two datagram rsockets
    # cannot share: "listener bind failed", and it ends.)
    c["cm_rspreload_iperf_udp"] = cm(
        [*preload, "-s", "-u", "-p", "5202"],
        [*preload, "-c", "127.0.0.1", "-u", "-p", "5202", "-n", "4M", "-b", "50M"],
        [r"connected with 127\.0\.0\.2", r"4\.00 MBytes"],
        [r"Sent 2856 datagrams", r"Server Report:", r"4\.00 MBytes"], stats=True,
        counters=[f"client tx_bytes > {4 << 20}", "client tx_send >= 2800",
                  "client rx_send >= 1"])

"""Fault cases of the RDMA connection manager, run by faults.py: rping connections in a row
under loss and duplication (the seeded injector, and nftables on the CM's MADs across a veth
pair), ucmatose's 20 connections under the same nftables loss, and a survivor told of its
peer's death."""
import time

from faults_common import counters, read_log
from netns import Nft


def case_cm_peer_death(r, name, spec, port, timeout):
    """vrnic_cm_peer_death: an RDMA CM connection; SIGKILL the server while the client
    writes; the client's WRITE must fail with RETRY_EXC and DISCONNECTED must follow."""
    server = r.start(f"{name}.server", ["@vrnic_cm_peer_death", "server", "127.0.0.1", str(port)])
    time.sleep(1)
    client = r.start(f"{name}.client", ["@vrnic_cm_peer_death", "client", "127.0.0.1", str(port)])
    time.sleep(1.5)
    server[1].kill()
    t0 = time.time()
    problems, _ = r.wait_all([client], 30)
    server[1].wait(timeout=5)
    print(f"client exited {time.time() - t0:.2f}s after the server was killed")
    for tag, _, path in (server, client):
        print(f"----- {tag} -----\n{read_log(path).rstrip()}")
    if "client cm_peer_death: PASS" not in read_log(client[2]):
        problems.append("client: no PASS line")
    if "server: connected" not in read_log(server[2]):
        problems.append("server: never connected")
    return problems


def case_cm_rping(r, name, spec, port, timeout):
    """rping -C 10 connections one after another, every process under the seeded injector:
    each must connect, verify its pings, disconnect and exit 0; the CM's counters (both
    sides, all rounds) must show MADs resent."""
    problems, total = [], {}
    # The CM's response timeout at 67 ms (2^14 x 4.096 us) instead of 4.3 s: under 20 % loss
    # the defaults make each round take seconds of waiting, and a DREQ lost at the end of a
    # round is then resent only after the peer's RC retries of its last message ran out.
    r.env["VRNIC_CM_RESPONSE_TIMEOUT"] = "14"
    # The QPs' ACK timeout likewise (the RDMA CM's default is 537 ms): each lost last packet
    # of a message waits for it.
    r.env["VRNIC_CM_ACK_TIMEOUT"] = "14"
    for i in range(spec["rounds"]):
        faults = lambda k: f"{spec['faults']},seed={100 * i + k}"
        server = r.start(f"{name}.{i}.server", ["rping", "-s", "-a", "127.0.0.1", "-C", "10",
                                                "-V", "-p", str(port)], faults=faults(1))
        time.sleep(1)
        client = r.start(f"{name}.{i}.client", ["rping", "-c", "-a", "127.0.0.1", "-C", "10",
                                                "-V", "-v", "-p", str(port)], faults=faults(2))
        round_problems, _ = r.wait_all([server, client], timeout)
        out = read_log(client[2])
        if "ping data: rdma-ping-9: " not in out:
            round_problems.append("client: the 10th ping is missing")
        for tag, _, path in (server, client):
            for k, v in counters(read_log(path)).items():
                total[k] = total.get(k, 0) + v
        print(f"round {i}: {'ok' if not round_problems else round_problems}")
        for tag, _, path in (server, client) if round_problems else ():
            lines = [l[:200] for l in read_log(path).splitlines() if "ping data" not in l]
            print(f"----- {tag} -----\n" + "\n".join(lines[-40:]))
        problems += [f"round {i}: {p}" for p in round_problems]
    shown = " ".join(f"{k}={v}" for k, v in sorted(total.items())
                     if k.startswith("cm_") or k in ("retransmitted_packets", "rx_duplicate"))
    print(f"counters (both sides, {spec['rounds']} rounds): {shown}")
    if total.get("cm_retries", 0) == 0:
        problems.append("no CM MAD was resent: the injector did not reach the CM")
    return problems


# The CM's MADs among the RoCEv2 datagrams: the BTH's destination QP (bits 104..127 from the
# UDP header) is 1, the General Services QP.
CM_MADS = "@th,104,24 1"


def case_cm_nft(r, name, spec, port, timeout):
    """Connection setup across the veth pair with nftables dropping 20 % and duplicating 5 %
    of the CM's MADs on each side's ingress (data packets untouched): rping rounds, or
    ucmatose's 20 connections, all complete; the rules hit and the CM resent MADs."""
    r.env["VRNIC_CM_RESPONSE_TIMEOUT"] = "14"  # as cm_rping: 67 ms, not 4.3 s, per resend
    r.env["VRNIC_CM_ACK_TIMEOUT"] = "14"  # and the QPs' ACK timeout, not 537 ms
    problems, total = [], {}
    with Nft({"loss": 2000, "dup": 500}, match=CM_MADS) as n:
        a, b = n.addr[0], n.addr[1]
        runs = []
        if spec["program"] == "rping":
            for i in range(spec["rounds"]):
                runs.append((["rping", "-s", "-a", a, "-C", "10", "-V", "-p", str(port)],
                             ["rping", "-c", "-a", a, "-C", "10", "-V", "-v", "-p", str(port)],
                             ["ping data: rdma-ping-9: "]))
        else:
            runs.append((["ucmatose", "-b", a, "-c", "20", "-p", str(port)],
                         ["ucmatose", "-s", a, "-c", "20", "-p", str(port)],
                         ["data transfers complete", "return status 0"]))
        for i, (sargv, cargv, want) in enumerate(runs):
            server = r.start(f"{name}.{i}.server", sargv, ip=a, prefix=n.prefix(0))
            time.sleep(1)
            client = r.start(f"{name}.{i}.client", cargv, ip=b, prefix=n.prefix(1))
            round_problems, _ = r.wait_all([server, client], timeout)
            out = read_log(client[2])
            round_problems += [f"client: no '{w}'" for w in want if w not in out]
            for tag, _, path in (server, client):
                for k, v in counters(read_log(path)).items():
                    total[k] = total.get(k, 0) + v
            print(f"run {i}: {'ok' if not round_problems else round_problems}")
            for tag, _, path in (server, client) if round_problems else ():
                lines = [l[:200] for l in read_log(path).splitlines() if "ping data" not in l]
                print(f"----- {tag} -----\n" + "\n".join(lines[-40:]))
            problems += [f"run {i}: {p}" for p in round_problems]
        kernel = n.stats()
    print("kernel (both namespaces): " + " ".join(f"{k}={v}" for k, v in kernel.items()))
    shown = " ".join(f"{k}={v}" for k, v in sorted(total.items()) if k.startswith("cm_"))
    print(f"counters (both sides, all runs): {shown}")
    # The loss rule must have been in effect. The dup rule's 5 % of the fifty-odd MADs that
    # pass the loss rule in ten runs leaves it unhit in about one run of fourteen, so its
    # count is shown, not required.
    if kernel.get("nft_loss", 0) == 0:
        problems.append("kernel: no CM MAD hit the nft loss rule")
    if total.get("cm_retries", 0) == 0:
        problems.append("no CM MAD was resent")
    if total.get("cm_duplicates", 0) == 0:
        problems.append("no duplicate MAD reached the CM")
    return problems

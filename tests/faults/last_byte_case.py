"""Fault case of data placement, run by faults.py: a receiver spinning on the last byte of a
multi-packet WRITE while the injector corrupts, drops and duplicates packets."""
import time

from faults_common import counters, read_log


def case_last_byte(r, name, spec, port, timeout):
    """vrnic_last_byte under the seeded injector on both sides: every time the last byte of
    a 256 KiB WRITE changes, the server compares the whole buffer; no round may be wrong,
    and the counters must show corrupted packets dropped by the ICRC check and resent."""
    argv = ["@vrnic_last_byte"]
    server = r.start(f"{name}.server", [*argv, "server", str(port)],
                     faults=f"{spec['faults']},seed=11")
    time.sleep(1)
    client = r.start(f"{name}.client", [*argv, "client", "127.0.0.1", str(port),
                                        str(spec["rounds"]), str(256 * 1024)],
                     faults=f"{spec['faults']},seed=12")
    problems, _ = r.wait_all([server, client], timeout)
    total = {}
    for tag, _, path in (server, client):
        out = read_log(path)
        print(f"----- {tag} -----\n" + "\n".join(l for l in out.splitlines()
                                                 if not l[:1].islower() or ":" in l))
        for k, v in counters(out).items():
            total[k] = total.get(k, 0) + v
    if "server last_byte: PASS" not in read_log(server[2]):
        problems.append("server: no PASS line")
    shown = {k: total.get(k, 0) for k in ("rx_icrc_errors", "retransmitted_packets",
                                          "udp_rx_fault_dropped", "rx_duplicate")}
    print(f"counters (both sides): {shown}")
    if shown["rx_icrc_errors"] == 0:
        problems.append("no packet failed the ICRC check: the corruption did not reach it")
    if shown["retransmitted_packets"] == 0:
        problems.append("nothing was resent")
    return problems

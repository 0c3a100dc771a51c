// The built-in scenarios run to their documented outcomes, the same seed gives the same
// summary, and bad scenario files are refused with the field named.
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>

#include "sim/simulator.h"

namespace vrnic::sim {
namespace {

Summary run_builtin(const std::string& name, uint64_t seed = 1) {
  const char* text = builtin_text(name);
  EXPECT_NE(text, nullptr) << name;
  Scenario sc = parse_scenario(text);
  sc.seed = seed;
  Simulator sim(sc);
  Summary s = sim.run();
  std::printf("%s", summary_json(s, true).c_str());
  return s;
}

// The second flow joins at 2 ms; over the second half (10..20 ms) the two share the
// 100 Gb/s bottleneck equally and nearly fill it, and the queue stays below Kmax (400 KB).
TEST(SimScenario, dcqcn_fairness) {
  const Summary s = run_builtin("dcqcn-fairness");
  EXPECT_GT(s.cnps_sent, 0u);
  EXPECT_GT(s.ecn_marked, 0u);
  EXPECT_EQ(s.drops, 0u);
  ASSERT_EQ(s.long_flow_gbps.size(), 2u);
  EXPECT_GE(s.jain_fairness, 0.99);
  EXPECT_GT(s.long_flow_gbps[0] + s.long_flow_gbps[1], 85.0);
  EXPECT_LT(s.bottleneck_queue_mean_bytes, 400'000u);
  EXPECT_GT(s.bottleneck_queue_mean_bytes, 0u);
}

// The same scenario without congestion control: the queue holds both windows (2 MB).
TEST(SimScenario, without_dcqcn_the_queue_holds_the_windows) {
  Scenario sc = parse_scenario(builtin_text("dcqcn-fairness"));
  sc.nic.cc = false;
  sc.duration_ns = 5'000'000;
  sc.stats_from_ns = 2'500'000;
  const Summary s = Simulator(sc).run();
  EXPECT_EQ(s.cnps_sent, 0u);
  EXPECT_EQ(s.ecn_marked, 0u);  // Not-ECT: nothing to mark
  EXPECT_GT(s.bottleneck_queue_mean_bytes, 1'500'000u);
}

TEST(SimScenario, incast_pfc_pauses_and_drops_nothing) {
  const Summary s = run_builtin("incast-pfc");
  EXPECT_EQ(s.flows_completed, 32u);
  EXPECT_EQ(s.flows_failed, 0u);
  EXPECT_EQ(s.drops, 0u);
  EXPECT_GT(s.pfc_pause_frames, 0u);
  EXPECT_EQ(s.pfc_pause_frames_by_priority.size(), 1u);  // the one priority in use
  EXPECT_EQ(s.nic_pause_frames, 0u);  // the receiver's NIC keeps up
  EXPECT_EQ(s.retransmitted_packets, 0u);
  // 32 MB through one 100 Gb/s port take 2.6 ms: every flow about 32 times its ideal.
  EXPECT_LT(s.sim_time_ns, 2'800'000u);
  EXPECT_GT(s.fct_slowdown.at("64KiB-1MiB").p50, 20.0);
}

// The receiver's NIC moves data to memory at 25 Gb/s only (its receive buffer, NicRxParams):
// it pauses the switch, which pauses the senders in turn. Nothing is dropped; the incast
// takes the NIC's time (8 MB at 25 Gb/s: 2.7 ms).
TEST(SimScenario, a_slow_receiving_nic_pauses_its_switch) {
  const std::string j = R"({"topology": {"type": "star", "hosts": 9},
    "switch": {"ecn": {"enabled": false}, "pfc": {"enabled": true}},
    "nic": {"cc": false, "rx": {"rate_gbps": 25, "buffer_bytes": 262144, "xoff": 65536,
            "xon": 32768, "pause_quanta": 4096}},
    "flows": [{"src": [0, 7], "dst": 8, "bytes": 1000000}]})";
  const Summary s = Simulator(parse_scenario(j)).run();
  EXPECT_EQ(s.flows_completed, 8u);
  EXPECT_EQ(s.drops, 0u);
  EXPECT_EQ(s.retransmitted_packets, 0u);
  EXPECT_GT(s.nic_pause_frames, 0u);
  EXPECT_GT(s.pfc_pause_frames, s.nic_pause_frames);  // the switch paused the senders too
  EXPECT_GT(s.sim_time_ns, 2'500'000u);
}

TEST(SimScenario, incast_nopfc_drops_and_go_back_n_completes_every_flow) {
  const Summary s = run_builtin("incast-nopfc");
  EXPECT_EQ(s.flows_completed, 32u);
  EXPECT_EQ(s.flows_failed, 0u);
  EXPECT_GT(s.drops, 0u);
  EXPECT_EQ(s.pfc_pause_frames, 0u);
  EXPECT_GE(s.retransmitted_packets, s.drops);
}

// One flow at a time through a 100 -> 25 Gb/s dumbbell with DCQCN on: each finishes within
// 2 % of the ideal FCT (a check of the link timing, the pacing and the ideal's arithmetic;
// the ideal takes the first packet's size for the last's, so it may be a little long).
TEST(SimScenario, a_flow_alone_takes_its_ideal_time) {
  const Scenario sc = parse_scenario(R"({"name": "alone",
    "topology": {"type": "dumbbell", "host_rate_gbps": 100, "core_rate_gbps": 25},
    "flows": [{"src": 0, "dst": 1, "bytes": 4096, "start_ns": 0},
              {"src": 0, "dst": 1, "bytes": 1000000, "start_ns": 1000000},
              {"src": 0, "dst": 1, "bytes": 20000000, "start_ns": 3000000}]})");
  const Summary s = Simulator(sc).run();
  ASSERT_EQ(s.flows_completed, 3u);
  for (const char* bucket : {"0-64KiB", "64KiB-1MiB", "10MiB+"}) {
    EXPECT_GE(s.fct_slowdown.at(bucket).p99, 0.99) << bucket;
    EXPECT_LT(s.fct_slowdown.at(bucket).p99, 1.02) << bucket;
  }
  // 20 MB at 25 Gb/s: 6.4 ms of payload alone.
  EXPECT_GT(s.fct_ns[2], 6'400'000u);
  EXPECT_LT(s.fct_ns[2], 6'700'000u);
}

// ETS 70/30 between two classes, each within 2 % of its share; lossless through PFC.
TEST(SimScenario, ets_shares_the_link_70_30) {
  const Summary s = run_builtin("ets");
  EXPECT_EQ(s.drops, 0u);
  EXPECT_GT(s.pfc_pause_frames, 0u);
  ASSERT_EQ(s.ets_shares.size(), 2u);
  EXPECT_NEAR(s.ets_shares.at(3), 0.70, 0.02);
  EXPECT_NEAR(s.ets_shares.at(1), 0.30, 0.02);
}

// Without the shares (both classes strict) the higher class takes nearly the whole link.
TEST(SimScenario, without_ets_strict_priority_starves_the_lower_class) {
  Scenario sc = parse_scenario(builtin_text("ets"));
  sc.sw.qos.ets_share = {};
  const Summary s = Simulator(sc).run();
  EXPECT_GT(s.ets_shares.at(3), 0.98);
}

TEST(SimScenario, dcbx_mismatch_is_reported_and_its_pauses_ignored) {
  const Summary s = run_builtin("dcbx-mismatch");
  ASSERT_EQ(s.dcbx_mismatches.size(), 9u);  // every host link
  EXPECT_NE(s.dcbx_mismatches[0].find("PFC priorities {} vs {3}"), std::string::npos)
      << s.dcbx_mismatches[0];
  EXPECT_GT(s.pfc_pause_frames, 0u);
  EXPECT_GT(s.pauses_ignored, 0u);
  EXPECT_GT(s.drops, 0u);  // lossless only where both ends agree
  EXPECT_EQ(s.flows_completed, 8u);
}

TEST(SimScenario, dcbx_agreement_reports_nothing) {
  Scenario sc = parse_scenario(builtin_text("dcbx-mismatch"));
  sc.nic.qos.willing = true;  // the NICs take the switch's settings
  const Summary s = Simulator(sc).run();
  EXPECT_TRUE(s.dcbx_mismatches.empty());
  EXPECT_EQ(s.pauses_ignored, 0u);
  EXPECT_EQ(s.drops, 0u);
  EXPECT_EQ(s.flows_completed, 8u);
}

// Without the watchdog the ring deadlocks: no flow completes, every QP ends in error after
// its retries.
TEST(SimScenario, pfc_deadlock_without_the_watchdog_stalls_every_flow) {
  Scenario sc = parse_scenario(builtin_text("pfc-deadlock"));
  sc.sw.watchdog.enabled = false;
  const Summary s = Simulator(sc).run();
  EXPECT_EQ(s.flows_completed, 0u);
  EXPECT_EQ(s.drops, 0u);
  EXPECT_GT(s.pfc_pause_frames, 0u);
}

// The watchdog (action forward) finds the four ring queues paused for 2 ms and sends
// despite the pauses: every flow completes, nothing dropped.
TEST(SimScenario, pfc_deadlock_the_watchdog_recovers_and_every_flow_completes) {
  const Summary s = run_builtin("pfc-deadlock");
  EXPECT_EQ(s.watchdog_storms, 4u);
  EXPECT_EQ(s.watchdog_drops, 0u);
  EXPECT_EQ(s.flows_completed, 4u);
  EXPECT_EQ(s.flows_failed, 0u);
  EXPECT_GT(s.sim_time_ns, 2'000'000u);  // not before the detection time
}

// The drop action breaks each deadlock too (the stormed queues drop, the pauses end), but
// the four flows come back together after each restoration and lock the ring again, their
// ACKs riding the same ring: documented in docs/sim.md.
TEST(SimScenario, pfc_deadlock_the_drop_action_drops_what_the_queues_held) {
  Scenario sc = parse_scenario(builtin_text("pfc-deadlock"));
  sc.sw.watchdog.drop = true;
  const Summary s = Simulator(sc).run();
  EXPECT_GE(s.watchdog_storms, 4u);
  EXPECT_GT(s.watchdog_drops, 0u);
  EXPECT_EQ(s.drops, s.watchdog_drops);  // no buffer ever overflowed
}

// A k = 4 fat-tree (16 hosts, 20 switches): hosts 0..7 write to hosts 8..15 across the
// cores at once with PFC: every flow completes, nothing dropped, and the fabric's ECMP keeps
// the slowest within a few times its ideal (a single core path would take 8 times).
TEST(SimScenario, fat_tree_k4_carries_an_all_to_all_across_the_cores) {
  const Scenario sc = parse_scenario(R"({"name": "ft4",
    "topology": {"type": "fat-tree", "k": 4, "host_rate_gbps": 100},
    "switch": {"pfc": {"enabled": true}, "ecn": {"enabled": false}},
    "nic": {"cc": false},
    "flows": [{"src": [0, 7], "dst": 15, "bytes": 100000, "start_ns": 0},
              {"src": [8, 14], "dst": 0, "bytes": 100000, "start_ns": 0}]})");
  EXPECT_EQ(sc.host_count(), 16u);
  const Summary s = Simulator(sc).run();
  EXPECT_EQ(s.flows_completed, 15u);
  EXPECT_EQ(s.drops, 0u);
}

// The worked example of the DPU atomics paper (Wu, Wang and Gao, 2024; docs/sim.md): the Fetch-and-Add returns the word's original value and adds
// once, though the request came twice (its first ACK dropped): the duplicate is answered
// from the ACK queue. The responder's NIC: 875 ns pipeline + 250 ns read-modify-write the
// first time, 875 + 125 ns (the ACK queue entry's DMA read) for the replay.
TEST(SimScenario, atomic_replay_answers_the_duplicate_from_the_ack_queue) {
  const Summary s = run_builtin("atomic-replay");
  ASSERT_EQ(s.atomics.size(), 1u);
  EXPECT_EQ(s.atomics[0].fetched, 0x7776757473727170ull);
  EXPECT_EQ(s.atomics[0].memory, 0x7AD99E72FBAC83A0ull);  // added once
  EXPECT_EQ(s.drops, 1u);
  EXPECT_EQ(s.retransmitted_packets, 1u);
  EXPECT_EQ(s.atomic_responder_ns, (std::vector<uint64_t>{1125, 1000}));
}

// Without the drop the atomic runs once; a WRITE flow alone with the NIC model on still
// takes its ideal time, which counts the model's costs.
TEST(SimScenario, nic_model_costs_are_in_the_ideal_fct) {
  Scenario sc = parse_scenario(builtin_text("atomic-replay"));
  sc.sw.drop.clear();
  Summary s = Simulator(sc).run();
  EXPECT_EQ(s.atomic_responder_ns, (std::vector<uint64_t>{1125}));
  EXPECT_NEAR(s.fct_slowdown.at("0-64KiB").p50, 1.0, 0.02);
  sc.flows[0].verb = Verb::kWrite;
  sc.flows[0].bytes = 1'000'000;
  s = Simulator(sc).run();
  ASSERT_EQ(s.flows_completed, 1u);
  EXPECT_NEAR(s.fct_slowdown.at("64KiB-1MiB").p50, 1.0, 0.02);
}

// The optimisations "RDMA Networking - Message TX" (2024) measures, in the NIC model, on a 32-byte WRITE alone: inline data saves the
// payload's DMA read, BlueFlame the WQE's as well; the CQE's write is part of every FCT; a
// post of 16 WQEs without doorbell batching pays 16 doorbells before its first packet. Each
// FCT moves by exactly those costs, and the ideal FCT with it (slowdown 1).
TEST(SimScenario, nic_model_inline_blueflame_batching_and_cqe_costs) {
  auto fct = [](uint64_t bytes, auto&& tweak) {
    Scenario sc = parse_scenario(builtin_text("atomic-replay"));
    sc.sw.drop.clear();
    sc.flows[0].verb = Verb::kWrite;
    sc.flows[0].bytes = bytes;
    tweak(sc.nic);
    const Summary s = Simulator(sc).run();
    EXPECT_EQ(s.flows_completed, 1u);
    EXPECT_NEAR(double(s.flows.at(0).fct_ns) / double(s.flows.at(0).ideal_ns), 1.0, 0.01);
    return static_cast<int64_t>(s.flows.at(0).fct_ns);
  };
  const int64_t base = fct(32, [](NicParams&) {});
  EXPECT_EQ(base - fct(32, [](NicParams& n) { n.inline_bytes = 64; }), 125);
  EXPECT_EQ(base - fct(32, [](NicParams& n) { n.inline_bytes = 64, n.blueflame = true; }), 250);
  EXPECT_EQ(base - fct(32, [](NicParams& n) { n.cqe_write_ns = 0; }), 60);
  const int64_t batched = fct(1'000'000, [](NicParams&) {});
  EXPECT_EQ(fct(1'000'000, [](NicParams& n) { n.doorbell_batching = false; }) - batched,
            15 * 150);
}

// Each verb over each transport that carries it, alone on the seed-000 pair with the NIC
// model on, in three sizes: every flow completes in its ideal time (which counts the verb's
// headers, a READ's request leg, an RC flow's last ACK, a UD flow's MTU-sized messages).
TEST(SimScenario, every_verb_and_transport_alone_takes_its_ideal_time) {
  const std::pair<Verb, Transport> kinds[] = {
      {Verb::kWrite, Transport::kRc}, {Verb::kRead, Transport::kRc},
      {Verb::kSend, Transport::kRc},  {Verb::kWrite, Transport::kUc},
      {Verb::kSend, Transport::kUc},  {Verb::kSend, Transport::kUd}};
  for (const auto& [verb, transport] : kinds) {
    for (uint64_t bytes : {uint64_t{3000}, uint64_t{200'000}, uint64_t{3'000'000}}) {
      Scenario sc = parse_scenario(builtin_text("atomic-replay"));
      sc.sw.drop.clear();
      sc.flows[0].verb = verb;
      sc.flows[0].transport = transport;
      sc.flows[0].bytes = bytes;
      const Summary s = Simulator(sc).run();
      const std::string what = std::to_string(static_cast<int>(verb)) + "/" +
                               std::to_string(static_cast<int>(transport)) + " " +
                               std::to_string(bytes);
      ASSERT_EQ(s.flows_completed, 1u) << what;
      ASSERT_EQ(s.flows.size(), 1u) << what;
      const double slowdown = double(s.flows[0].fct_ns) / double(s.flows[0].ideal_ns);
      EXPECT_NEAR(slowdown, 1.0, 0.02) << what;
      EXPECT_EQ(s.retransmitted_packets, 0u) << what;
    }
  }
}

// Poisson traffic of UD SENDs (WebSearch sizes in MTU-sized datagrams) on a lossless star:
// every flow arrives whole at its receiver.
TEST(SimScenario, poisson_ud_sends_on_a_lossless_star_all_arrive) {
  const Scenario sc = parse_scenario(R"({"topology": {"type": "star", "hosts": 8},
    "switch": {"pfc": {"enabled": true}},
    "traffic": [{"cdf": "websearch", "load": 0.3, "end_ns": 1000000,
                 "verb": "send", "transport": "ud"}]})");
  const Summary s = Simulator(sc).run();
  EXPECT_GT(s.flows_total, 10u);
  EXPECT_EQ(s.flows_completed, s.flows_total);
  EXPECT_EQ(s.drops, 0u);
}

// A UD or UC SEND lost on the way is never resent: the receiver is one RECV short and the
// flow stays incomplete (not failed); an RC SEND flow with the same drop completes.
TEST(SimScenario, unreliable_flows_lose_what_the_switch_drops) {
  for (Transport t : {Transport::kUd, Transport::kUc, Transport::kRc}) {
    Scenario sc = parse_scenario(builtin_text("atomic-replay"));
    sc.flows[0].verb = Verb::kSend;
    sc.flows[0].transport = t;
    sc.flows[0].bytes = 100'000;
    // The third UD SEND Only (0x64), UC SEND Middle (0x21) or RC SEND Middle (0x01).
    const uint8_t op = t == Transport::kUd ? 0x64 : t == Transport::kUc ? 0x21 : 0x01;
    sc.sw.drop = {{op, 3}};
    sc.duration_ns = 50'000'000;
    const Summary s = Simulator(sc).run();
    EXPECT_EQ(s.drops, 1u);
    EXPECT_EQ(s.flows_failed, 0u);
    EXPECT_EQ(s.flows_completed, t == Transport::kRc ? 1u : 0u) << static_cast<int>(t);
  }
}

TEST(SimScenario, same_seed_same_summary) {
  const std::string a = summary_json(run_builtin("dcqcn-fairness", 7), false);
  const std::string b = summary_json(run_builtin("dcqcn-fairness", 7), false);
  const std::string c = summary_json(run_builtin("dcqcn-fairness", 8), false);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // RED draws other marks
  EXPECT_EQ(a.find("wall_s"), std::string::npos);
}

TEST(SimScenario, every_builtin_parses) {
  const auto names = builtin_names();
  EXPECT_EQ(names, (std::vector<std::string>{
                       "atomic-replay", "dcbx-mismatch", "dcqcn-fairness", "ets",
                       "fat-tree-websearch-30", "fat-tree-websearch-50", "incast-nopfc",
                       "incast-pfc", "pfc-deadlock"}));
  for (const auto& n : names) EXPECT_EQ(parse_scenario(builtin_text(n)).name, n);
  EXPECT_EQ(builtin_text("nonesuch"), nullptr);
}

TEST(SimScenario, bad_files_are_refused_naming_the_field) {
  const std::string flows = R"("flows": [{"src": 0, "dst": 1, "bytes": 1000}])";
  auto error = [](const std::string& text) {
    try {
      parse_scenario(text);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error("{" + flows + "}"), "accepted");  // the base each case breaks once
  EXPECT_NE(error("{not json").find("not JSON"), std::string::npos);
  EXPECT_NE(error("{}").find("no flows"), std::string::npos);
  EXPECT_NE(error(R"({"nic": {"mtu": 1500}, )" + flows + "}").find("mtu"), std::string::npos);
  EXPECT_NE(error(R"({"topology": {"type": "torus"}, )" + flows + "}").find("topology"),
            std::string::npos);
  EXPECT_NE(error(R"({"switch": {"qos": {"ets_shares": {"1": 70, "2": 40}}}, )" + flows + "}")
                .find("more than 100"),
            std::string::npos);
  EXPECT_NE(error(R"({"switch": {"qos": {"dscp_to_priority": {"x": 1}}}, )" + flows + "}")
                .find("dscp_to_priority"),
            std::string::npos);
  auto flow = [](const std::string& fields) {
    return R"({"flows": [{"src": 0, "dst": 1, "bytes": 1000, )" + fields + "}]}";
  };
  EXPECT_EQ(error(flow(R"("verb": "send", "transport": "ud")")), "accepted");
  EXPECT_NE(error(flow(R"("verb": "put")")).find("verb is"), std::string::npos);
  EXPECT_NE(error(flow(R"("transport": "xrc")")).find("transport is"), std::string::npos);
  EXPECT_NE(error(flow(R"("verb": "read", "transport": "uc")")).find("need transport"),
            std::string::npos);
  EXPECT_NE(error(flow(R"("verb": "write", "transport": "ud")")).find("UD flow's verb"),
            std::string::npos);
  EXPECT_NE(error(flow(R"("verb": "faa")")).find("8 bytes"), std::string::npos);
  EXPECT_NE(error(R"({"switch": {"pfc": {"pause_quanta": 0}}, )" + flows + "}").find("pause_quanta"),
            std::string::npos);
  EXPECT_NE(error(R"({"nic": {"rx": {"xoff": 10, "xon": 20}}, )" + flows + "}").find("nic rx"),
            std::string::npos);
  EXPECT_NE(error(R"({"switch": {"watchdog": {"action": "ignore"}}, )" + flows + "}")
                .find("watchdog action"),
            std::string::npos);
  EXPECT_NE(error(R"({"topology": {"type": "fat-tree", "k": 3}, )" + flows + "}").find("k is even"),
            std::string::npos);
  EXPECT_NE(error(R"({"traffic": [{"cdf": "/nonexistent"}]})").find("no built-in"),
            std::string::npos);
  EXPECT_NE(error(R"({"traffic": [{"load": 1.5}]})").find("load"), std::string::npos);
  EXPECT_NE(error(R"({"flows": [{"src": 1, "dst": 1, "bytes": 5}]})").find("no such pair"),
            std::string::npos);
  EXPECT_NE(error(R"({"duration_ns": "long", )" + flows + "}").find("duration_ns"),
            std::string::npos);
  EXPECT_NE(error(R"({"switch": {"ecn": {"kmin": 9, "kmax": 5}}, )" + flows + "}").find("kmax"),
            std::string::npos);
}

}  // namespace
}  // namespace vrnic::sim

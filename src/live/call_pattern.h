// CallPattern: two predictions from the program's recent calls that decide when the live
// device holds packets back and when it leaves the progress thread asleep.
//
// 1. Replies. An RC responder's ACK may be delayed (IB allows coalescing); if the program
//    answers each message it receives with one of its own (a ping-pong: ib_send_lat,
//    ib_write_lat, an RPC server, UCX am_lat), the ACK can leave in the same sendmmsg as the
//    answer, and the peer, busy-polling for that ACK, receives the answer in the same
//    recvmmsg: one system call each way and no thread hand-off. The engine holds the ACKs
//    (Device::receive with hold_acks_ns) while the last receive that made packets was
//    answered by a post within hold_ns; a hold that runs out unanswered stops holding until
//    a post answers a receive again.
// 2. Coming back. After a poll that returned completions the program may leave the CQ for a
//    while (ib_write_lat spins on memory): the progress thread must then watch the socket.
//    If the program came back (posted or polled) within defer_ns the last time, it is
//    expected to again, and the thread is left in its deferral sleep, which ends defer_ns
//    after the program's last call anyway. One late return is not enough to change that
//    verdict: a busy-polling program that lost its CPU between a completion and its next
//    call returns late once, and waking the thread for it (which then takes the socket and
//    looks again and again as it backs off) took more CPU from the polling programs of a
//    small machine than it saved: two in a row are. A program that has left (ib_write_lat
//    spinning on memory) is found by the thread itself (on_quiet) at the end of its
//    deferral.
//
// Times are the caller's monotonic ns; no clock, no lock (the device lock guards it).
#pragma once

#include <cstdint>

namespace vrnic::live {

class CallPattern {
 public:
  CallPattern(uint64_t hold_ns, uint64_t defer_ns) : hold_ns_(hold_ns), defer_ns_(defer_ns) {}

  // -- replies ------------------------------------------------------------------------------
  // A receive is about to run: should the ACKs it makes be held for the program's answer?
  bool hold_receives() const { return hold_ns_ != 0 && replies_; }
  // A receive at `now` made packets (sent or held).
  void on_receive_made_packets(uint64_t now) { made_ns_ = now; }
  // The program posts sends at `now` (held ACKs leave with them): it answered if a receive
  // made packets less than hold_ns before.
  void on_post_send(uint64_t now) {
    if (made_ns_ != 0 && now - made_ns_ < hold_ns_) replies_ = true;
    made_ns_ = 0;
  }
  // Held ACKs ran out unanswered: the prediction ends until a post answers a receive again.
  void on_hold_expired() { replies_ = false; }
  bool replies() const { return replies_; }

  // -- coming back --------------------------------------------------------------------------
  // A poll at `now` returned completions after packets moved: true if the progress thread
  // can stay in its deferral sleep.
  bool on_completions(uint64_t now) {
    completion_ns_ = now;
    return comes_back_;
  }
  // Any call of the program (post or poll) at `now`.
  void on_call(uint64_t now) {
    if (completion_ns_ == 0) return;
    late_returns_ = now - completion_ns_ < defer_ns_ ? 0 : late_returns_ + 1;
    comes_back_ = late_returns_ < kLateReturnsToLeave;
    completion_ns_ = 0;
  }
  // The progress thread found the program quiet at `now` (past its deferral).
  void on_quiet(uint64_t now) {
    if (completion_ns_ != 0 && now - completion_ns_ >= defer_ns_) {
      comes_back_ = false;
      completion_ns_ = 0;
    }
  }
  bool comes_back() const { return comes_back_; }

 private:
  uint64_t hold_ns_;
  uint64_t defer_ns_;
  bool replies_ = false;
  uint64_t made_ns_ = 0;      // the last receive that made packets (0: answered or none)
  static constexpr int kLateReturnsToLeave = 2;
  bool comes_back_ = false;
  int late_returns_ = 0;  // returns later than defer_ns after completions, in a row
  uint64_t completion_ns_ = 0;  // the last poll with completions, not yet judged
};

}  // namespace vrnic::live

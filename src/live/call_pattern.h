// CallPattern: two predictions from the program's recent calls that decide when the live
// device holds packets back and when it leaves the progress thread asleep.
//
// 1. Replies. An RC responder's ACK may be delayed (IB allows coalescing); if the program
//    answers each message it receives with one of its own (a ping-pong: ib_send_lat,
//    ib_write_lat, an RPC server, UCX am_lat), the ACK can leave in the same sendmmsg as the
//    answer, and the peer, busy-polling for that ACK, receives the answer in the same
//    recvmmsg: one system call each way and no thread hand-off. Held only while the last
//    receive that made packets was answered by a post within hold_ns; a hold that expires
//    unanswered stops holding until a post answers a receive again.
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
  // A receive is about to run: should what it sends (ACKs) be held for the program's answer?
  bool hold_receives() const { return hold_ns_ != 0 && replies_; }
  // A receive at `now` made packets; `held` says they stay queued. Returns the time by which
  // held packets must leave.
  uint64_t on_receive_made_packets(uint64_t now, bool held) {
    made_ns_ = now;
    if (held && held_until_ == 0) held_until_ = now + hold_ns_;
    return held_until_;
  }
  // The program posts sends at `now`; held packets leave with them.
  void on_post_send(uint64_t now) {
    if (made_ns_ != 0 && now - made_ns_ < hold_ns_) replies_ = true;
    made_ns_ = 0;
    held_until_ = 0;
  }
  // Packets are about to leave at `now` without a post (a flush): true if they are held and
  // their time has not come yet (the caller keeps them); otherwise the hold ends, and one
  // that ran out unanswered ends the prediction.
  bool keep_held(uint64_t now) {
    if (held_until_ == 0) return false;
    if (now < held_until_) return true;
    held_until_ = 0;
    replies_ = false;
    return false;
  }
  // Held packets left for another reason (a full queue, a large packet among them).
  void release() { held_until_ = 0; }
  uint64_t held_until() const { return held_until_; }  // 0: nothing held
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
  uint64_t held_until_ = 0;   // held packets leave by then (0: none held)
  static constexpr int kLateReturnsToLeave = 2;
  bool comes_back_ = false;
  int late_returns_ = 0;  // returns later than defer_ns after completions, in a row
  uint64_t completion_ns_ = 0;  // the last poll with completions, not yet judged
};

}  // namespace vrnic::live

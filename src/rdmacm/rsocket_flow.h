// A stream rsocket's flow control as rdma-core v44 runs it, apart from the verbs: the windows
// of the peer's receive buffer this side may write (its target SGL), the message credits,
// the ring of this side's receive buffer and the credit updates that hand it back, and the
// window of control messages. The socket posts what this decides (rsocket_conn.cc).
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "rdmacm/rsocket_wire.h"

namespace vrnic::rdmacm::rs {

// An RDMA WRITE WITH IMMEDIATE to post: `length` bytes (0 for a bare credit update or
// control message) to the peer's `remote_addr` / `rkey`, `imm` in host order.
struct Write {
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;
  uint32_t length = 0;
};

// A credit update: the Write, and when `with_sge` the window it hands over, whose bytes (in
// the peer's byte order) are its payload.
struct Grant {
  Write write;
  bool with_sge = false;
  Sge sge;
  std::array<uint8_t, kSgeSize> bytes{};
};

// What a received immediate meant.
enum class Rx : uint8_t { kData, kCredit, kIomap, kDisconnect, kShutdown, kIgnored, kBad };

// A piece of a buffer: offset and length.
struct Chunk {
  uint32_t offset = 0, length = 0;
};

inline constexpr uint32_t kCtrlWindow = 4;  // control messages in flight (RS_QP_CTRL_SIZE)

class StreamFlow {
 public:
  // This side: its receive buffer (registered for remote writes), its target table (the SGL's
  // two entries, then the I/O map's), and the data messages it lets the peer have unread.
  struct Local {
    uint64_t rbuf_addr = 0;
    uint32_t rbuf_rkey = 0;
    uint32_t rbuf_size = 0;  // even; each half is one window
    uint64_t table_addr = 0;
    uint32_t table_rkey = 0;
    uint32_t iomap_entries = 0;
    uint16_t rq_size = 0;
  };
  explicit StreamFlow(const Local& local, uint8_t* table);

  ConnData conn_data() const;
  // The peer's connection data; false if it cannot be used (fewer than two SGL entries).
  bool start(const ConnData& peer);
  bool started() const { return started_; }

  // Sending. A data message needs a credit and room in the current window (`window()`
  // bytes); `data(len)` takes both (len <= window()).
  bool can_send() const;
  uint32_t window() const;
  Write data(uint32_t len);
  // The I/O map entry `index` of the peer's table (a credit, as rdma-core counts it).
  uint32_t peer_iomap_entries() const { return peer_iomap_.length; }
  Write iomap(uint32_t index, const IomapEntry& e, uint8_t bytes[kIomapEntrySize]);

  // Control messages (credit updates, shutdown / disconnect, keepalive) in flight.
  bool ctrl_avail() const { return ctrl_sent_ - ctrl_done_ < kCtrlWindow; }
  Write ctrl(Ctrl c);
  void ctrl_completed() { ++ctrl_done_; }
  bool ctrl_idle() const { return ctrl_sent_ == ctrl_done_; }
  uint32_t ctrl_posted() const { return ctrl_sent_; }  // control messages so far

  // Receiving: an immediate taken from a receive completion.
  Rx on_imm(uint32_t imm);
  const IomapEntry* find_iomap(uint64_t offset) const;  // the peer's window holding offset

  // Reading: where the next `want` bytes of the stream are in the receive buffer (offset,
  // length; a message may wrap), then `consume` what was copied out.
  bool has_data() const { return !rmsg_.empty(); }
  std::vector<Chunk> chunks(size_t want) const;
  void consume(size_t n);

  // A credit update, if one is due and a control slot is free; `may_send`: connected.
  std::optional<Grant> grant(bool may_send);

 private:
  uint32_t half() const { return local_.rbuf_size / 2; }
  void refresh_windows();

  Local local_;
  uint8_t* table_;  // this side's target table (the peer writes it)
  bool host_be_ = host_big_endian();
  bool peer_be_ = false;
  bool started_ = false;

  // Sending: the peer's windows (a copy of this side's target SGL), credits.
  Sge target_[kTargetSgeCount];
  uint32_t target_index_ = 0;
  uint16_t sseq_no_ = 0, sseq_comp_ = 0;
  Sge peer_sgl_;     // the peer's target SGL (where this side's credit updates go)
  uint32_t peer_sge_ = 1;
  Sge peer_iomap_;   // the peer's I/O map table: address, key, entries
  std::vector<IomapEntry> iomaps_;  // this side's table as the peer filled it

  // Receiving: the ring and the messages in it.
  std::deque<uint32_t> rmsg_;  // bytes left of each message not yet read
  uint32_t rbuf_offset_ = 0, rbuf_free_offset_ = 0, rbuf_avail_ = 0;
  uint16_t rseq_no_ = 0, rseq_comp_ = 0;

  uint32_t ctrl_sent_ = 0, ctrl_done_ = 0;
};

// The send buffer: each message posted is copied into a contiguous piece of it, held until
// its completion; completions come in the order of posting, so pieces are freed oldest first.
class SendRing {
 public:
  explicit SendRing(uint32_t size) : size_(size) {}
  // A piece of up to `want` bytes, and at least min(want, low) (0 length: none now); `place`
  // only says where it would be.
  Chunk place(uint32_t want, uint32_t low) const;
  Chunk take(uint32_t want, uint32_t low);
  void release_oldest();
  bool empty() const { return pieces_.empty(); }

 private:
  uint32_t size_;
  uint32_t head_ = 0, tail_ = 0;  // the oldest piece's start, the next free byte
  bool wrapped_ = false;          // tail_ has gone round to before head_
  std::deque<Chunk> pieces_;
};

}  // namespace vrnic::rdmacm::rs

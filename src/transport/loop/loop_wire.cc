// The loop wire: routing by destination address, fault injection, explicit delivery.
#include "transport/loop/loop_wire.h"

#include <cstring>

namespace vrnic::transport {

LoopPort::LoopPort(LoopWire& wire, size_t index, const std::array<uint8_t, 16>& addr, bool ipv6)
    : wire_(wire), index_(index), addr_(addr), ipv6_(ipv6) {}

void LoopPort::send(std::span<const engine::WirePacket> batch) {
  for (const engine::WirePacket& p : batch) wire_.enqueue(p);
}

uint16_t LoopPort::source_port_for(uint32_t qpn) {
  uint32_t h = qpn * 0x9E3779B1u;
  return static_cast<uint16_t>(0xC000 | ((h >> 16) & 0x3fff));
}

LoopWire::LoopWire(uint64_t seed) : rng_(seed) {}

LoopPort& LoopWire::add_port(const std::array<uint8_t, 16>& addr, bool ipv6) {
  ports_.push_back(std::make_unique<LoopPort>(*this, ports_.size(), addr, ipv6));
  return *ports_.back();
}

uint64_t LoopWire::next_u64() {  // splitmix64: the same sequence on every platform
  uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double LoopWire::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

LoopPort* LoopWire::route(const wire::IpUdpInfo& ip) {
  size_t n = ip.ipv6 ? 16 : 4;
  for (auto& p : ports_)
    if (p->ipv6_ == ip.ipv6 && std::memcmp(p->addr_.data(), ip.dst.data(), n) == 0)
      return p.get();
  return nullptr;
}

void LoopWire::enqueue(const engine::WirePacket& pkt) {
  ++stats_.sent;
  LoopPort* to = route(pkt.ip);
  if (to == nullptr) {
    ++stats_.unroutable;
    return;
  }
  if ((drop_ && drop_(pkt)) || chance(faults_.loss)) {
    ++stats_.lost;
    return;
  }
  Frame f;
  f.to = to->index_;
  f.ip = pkt.ip;
  f.tos = pkt.tos;
  if ((f.tos & 0x3) != 0 && ce_ && ce_(pkt)) {
    f.tos |= 0x3;
    ++stats_.ce_marked;
  }
  f.bytes.assign(pkt.data.begin(), pkt.data.end());
  f.due = clock_.now_ns();
  if (chance(faults_.corrupt) && !f.bytes.empty()) {
    size_t bit = next_u64() % (f.bytes.size() * 8);
    f.bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ++stats_.corrupted;
  }
  if (chance(faults_.delay)) {
    f.due += faults_.delay_ns;
    ++stats_.delayed;
  }
  int copies = 1;
  if (chance(faults_.dup)) {
    copies = 2;
    ++stats_.duplicated;
  }
  for (int i = 0; i < copies; ++i) {
    if (chance(faults_.reorder) && !queue_.empty()) {
      // Overtakes up to 4 packets queued before it.
      size_t back = 1 + next_u64() % 4;
      if (back > queue_.size()) back = queue_.size();
      queue_.insert(queue_.end() - static_cast<std::ptrdiff_t>(back), f);
      ++stats_.reordered;
    } else {
      queue_.push_back(f);
    }
  }
}

uint64_t LoopWire::next_due_ns() const {
  uint64_t t = UINT64_MAX;
  for (const Frame& f : queue_)
    if (f.due < t) t = f.due;
  return t;
}

bool LoopWire::step() {
  uint64_t now = clock_.now_ns();
  size_t i = 0;
  while (i < queue_.size() && queue_[i].due > now) ++i;
  if (i == queue_.size()) return false;
  size_t to = queue_[i].to;
  constexpr size_t kBatch = 32;
  std::vector<Frame> batch;
  while (i < queue_.size() && batch.size() < kBatch && queue_[i].to == to &&
         queue_[i].due <= now) {
    batch.push_back(std::move(queue_[i]));
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  std::vector<engine::WirePacket> pkts(batch.size());
  for (size_t k = 0; k < batch.size(); ++k) {
    pkts[k].ip = batch[k].ip;
    pkts[k].tos = batch[k].tos;
    pkts[k].data = {batch[k].bytes.data(), batch[k].bytes.size()};
    if (tap_) tap_(pkts[k]);
  }
  stats_.delivered += pkts.size();
  LoopPort& port = *ports_[to];
  if (port.receiver_) port.receiver_(pkts);
  return true;
}

size_t LoopWire::deliver_all(size_t max_batches) {
  size_t n = 0;
  while (n < max_batches && step()) ++n;
  return n;
}

}  // namespace vrnic::transport

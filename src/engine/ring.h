// A FIFO over a power-of-two array that grows (doubling) when full and never shrinks: the
// send and receive queues of a QP. Slots are reused, so once a queue has reached its
// working depth, posting and retiring WQEs allocate nothing (std::deque allocates a node
// every few WQEs of this size).
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace vrnic::engine {

template <typename T>
class Ring {
 public:
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  T& operator[](size_t i) { return slots_[(head_ + i) & mask_]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & mask_]; }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  T& back() { return (*this)[count_ - 1]; }

  void push_back(T&& v) {
    if (count_ == slots_.size()) grow();
    slots_[(head_ + count_) & mask_] = std::move(v);
    ++count_;
  }
  void push_back(const T& v) {
    T copy = v;
    push_back(std::move(copy));
  }
  void pop_front() {
    head_ = (head_ + 1) & mask_;
    --count_;
  }
  void clear() {
    head_ = 0;
    count_ = 0;
  }

 private:
  // Out of line: it runs a handful of times per ring, and push_back stays small enough to
  // inline where a ring is filled per packet.
  [[gnu::noinline]] void grow() {
    std::vector<T> bigger(slots_.empty() ? 8 : slots_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
    mask_ = slots_.size() - 1;
  }

  std::vector<T> slots_;
  size_t head_ = 0, count_ = 0, mask_ = 0;
};

}  // namespace vrnic::engine

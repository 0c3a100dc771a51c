// A vector that keeps up to N elements inside itself and moves to the heap only beyond N:
// the SGE lists and inline data of WQEs, so posting a typical WR allocates nothing.
// For trivially copyable element types only.
#pragma once
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace vrnic::engine {

template <typename T, size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallVec() = default;
  // Copies move only the elements in use (the inline array is not cleared or copied whole).
  SmallVec(const SmallVec& o) { *this = o; }
  SmallVec(SmallVec&& o) noexcept { *this = std::move(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this == &o) return *this;
    if (o.n_ > N) {
      heap_ = std::move(o.heap_);
    } else {
      heap_.clear();
      if (o.n_ != 0) std::memcpy(local_.data(), o.local_.data(), o.n_ * sizeof(T));
    }
    n_ = o.n_;
    o.n_ = 0;
    o.heap_.clear();
    return *this;
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* data() { return n_ <= N ? local_.data() : heap_.data(); }
  const T* data() const { return n_ <= N ? local_.data() : heap_.data(); }
  T* begin() { return data(); }
  T* end() { return data() + n_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + n_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

  void clear() { resize(0); }
  // New elements are value-initialised; kept ones keep their values.
  void resize(size_t n) {
    if (n > N) {
      if (n_ <= N) heap_.assign(local_.begin(), local_.begin() + n_);
      heap_.resize(n);
    } else if (n_ > N) {
      std::memcpy(local_.data(), heap_.data(), n * sizeof(T));
      heap_.clear();
    } else if (n > n_) {
      std::fill(local_.begin() + n_, local_.begin() + n, T{});
    }
    n_ = n;
  }
  void assign(const T* first, const T* last) {
    n_ = 0;
    heap_.clear();
    resize(static_cast<size_t>(last - first));
    if (n_ != 0) std::memcpy(data(), first, n_ * sizeof(T));
  }
  void push_back(const T& v) {
    resize(n_ + 1);
    data()[n_ - 1] = v;
  }

 private:
  size_t n_ = 0;
  std::array<T, N> local_;  // only [0, n_) is meaningful while n_ <= N
  std::vector<T> heap_;
};

}  // namespace vrnic::engine

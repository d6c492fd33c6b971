// IntArrayRef: a non-owning view of a list of int64 (sizes, strides, dims),
// constructible from a vector, a braced list or a single integer, like
// libtorch's. It must not outlive what it views.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace tandem {

using Shape = std::vector<int64_t>;

class IntArrayRef {
 public:
  constexpr IntArrayRef() = default;
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  // The list lives until the end of the full expression, as long as a call's
  // arguments; an IntArrayRef is never stored.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  constexpr IntArrayRef(std::initializer_list<int64_t> l) : data_(l.begin()), size_(l.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  constexpr IntArrayRef(const int64_t& one) : data_(&one), size_(1) {}
  constexpr IntArrayRef(const int64_t* data, size_t size) : data_(data), size_(size) {}

  constexpr const int64_t* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr int64_t operator[](size_t i) const { return data_[i]; }
  constexpr int64_t front() const { return data_[0]; }
  constexpr int64_t back() const { return data_[size_ - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }

  friend bool operator==(IntArrayRef a, IntArrayRef b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

// "[2, 3]" as PyTorch prints sizes.
std::string shape_str(IntArrayRef shape);
std::ostream& operator<<(std::ostream& os, IntArrayRef shape);

}  // namespace tandem

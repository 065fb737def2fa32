// Views of the memory a collective reads and writes. A phantom view has a size and a dtype and no
// bytes: it flows through the engine (and across a simulated network) with no data work at all.
#pragma once

#include <cassert>
#include <cstddef>
#include <span>
#include <vector>

#include "runtime/dtype.h"

namespace kf {

template <typename Byte>
class BasicBufferView {
 public:
  BasicBufferView() = default;
  BasicBufferView(Byte* data, std::size_t count, DType dtype)
      : data_(data), count_(count), dtype_(dtype) {}
  template <typename T>
  static BasicBufferView of(std::span<T> elems, DType dtype) {
    assert(sizeof(T) == dtype_size(dtype));
    return BasicBufferView(reinterpret_cast<Byte*>(elems.data()), elems.size(), dtype);
  }
  static BasicBufferView phantom(std::size_t count, DType dtype) {
    BasicBufferView v(nullptr, count, dtype);
    v.phantom_ = true;
    return v;
  }

  Byte* data() const { return data_; }
  std::size_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  bool is_phantom() const { return phantom_; }
  std::size_t size_bytes() const { return count_ * dtype_size(dtype_); }
  std::size_t elem_size() const { return dtype_size(dtype_); }

  // Elements [first, first + n): phantom in, phantom out.
  BasicBufferView slice(std::size_t first, std::size_t n) const {
    assert(first + n <= count_);
    BasicBufferView v = *this;
    v.count_ = n;
    if (!phantom_ && data_ != nullptr) v.data_ = data_ + first * elem_size();
    return v;
  }

  operator BasicBufferView<const std::byte>() const  // NOLINT: a mutable view is a const view
      requires(!std::is_const_v<Byte>) {
    BasicBufferView<const std::byte> v(data_, count_, dtype_);
    return phantom_ ? BasicBufferView<const std::byte>::phantom(count_, dtype_) : v;
  }

 private:
  Byte* data_ = nullptr;
  std::size_t count_ = 0;
  DType dtype_ = DType::u8;
  bool phantom_ = false;
};

using BufferView = BasicBufferView<std::byte>;
using ConstBufferView = BasicBufferView<const std::byte>;

// An owning buffer (or an owning phantom, which owns nothing).
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::size_t count, DType dtype)
      : bytes_(count * dtype_size(dtype)), count_(count), dtype_(dtype) {}
  static Buffer phantom(std::size_t count, DType dtype) {
    Buffer b;
    b.count_ = count;
    b.dtype_ = dtype;
    b.phantom_ = true;
    return b;
  }

  BufferView view() {
    return phantom_ ? BufferView::phantom(count_, dtype_)
                    : BufferView(bytes_.data(), count_, dtype_);
  }
  ConstBufferView view() const {
    return phantom_ ? ConstBufferView::phantom(count_, dtype_)
                    : ConstBufferView(bytes_.data(), count_, dtype_);
  }
  template <typename T>
  std::span<T> as() {
    assert(sizeof(T) == dtype_size(dtype_) && !phantom_);
    return {reinterpret_cast<T*>(bytes_.data()), count_};
  }
  template <typename T>
  std::span<const T> as() const {
    assert(sizeof(T) == dtype_size(dtype_) && !phantom_);
    return {reinterpret_cast<const T*>(bytes_.data()), count_};
  }
  std::size_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  bool is_phantom() const { return phantom_; }
  std::size_t size_bytes() const { return count_ * dtype_size(dtype_); }

 private:
  std::vector<std::byte> bytes_;
  std::size_t count_ = 0;
  DType dtype_ = DType::u8;
  bool phantom_ = false;
};

}  // namespace kf

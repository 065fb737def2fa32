// RingSlice: a received payload left where it arrived, in a peer's shared-memory ring, so that
// the operation taking it folds or copies it straight from there (one pass over the bytes where a
// copy out of the ring and then the fold took two).
//
// The ring's bytes are given back (ShmRing::consume) only after their round is delivered. Before
// that, the transport detaches every slice that someone still holds (a message kept for a later
// step, or for an operation not started yet): detach() copies the bytes out, and the holders read
// the copy from then on. The slice keeps the ring's mapping alive while it points into it.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "real/shm_ring.h"
#include "runtime/message.h"

namespace kf {

class RingSlice final : public PayloadSource {
 public:
  RingSlice(std::shared_ptr<const ShmRing> ring, const std::byte* bytes, std::size_t size)
      : ring_(std::move(ring)), bytes_(bytes), size_(size) {}

  bool read(std::size_t offset, std::byte* into, std::size_t size) override {
    if (offset > size_ || size > size_ - offset) return false;
    std::memcpy(into, bytes_ + offset, size);
    return true;
  }
  bool verify() override { return true; }
  std::string error() const override { return "read past the end of a received payload"; }
  const std::byte* bytes_here() const override { return bytes_; }

  // Copies the bytes out of the ring, which may take them back from then on.
  void detach() {
    if (!ring_) return;
    copy_.resize(size_);
    if (size_ > 0) std::memcpy(copy_.data(), bytes_, size_);
    bytes_ = copy_.data();
    ring_.reset();
  }

 private:
  std::shared_ptr<const ShmRing> ring_;  // null once detached
  const std::byte* bytes_;
  std::size_t size_;
  PayloadBytes copy_;
};

}  // namespace kf

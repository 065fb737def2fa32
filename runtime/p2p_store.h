// BlobStore: the versioned named blobs a peer offers to others (pair averaging fetches a random
// peer's latest model from here). Keeps the last kKeepVersions versions of each name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kf {

struct Blob {
  std::uint64_t version = 0;
  std::shared_ptr<const std::vector<std::byte>> bytes;
};

class BlobStore {
 public:
  static constexpr std::size_t kKeepVersions = 3;

  // Stores a new version (1, 2, ... per name, or `version` when given; it must grow) and drops
  // the oldest beyond kKeepVersions. Returns the version stored.
  std::uint64_t save(const std::string& name, std::vector<std::byte> bytes,
                     std::optional<std::uint64_t> version = std::nullopt);
  // version 0 = the latest.
  std::optional<Blob> get(const std::string& name, std::uint64_t version = 0) const;
  std::vector<std::uint64_t> versions(const std::string& name) const;

 private:
  std::map<std::string, std::deque<Blob>> blobs_;
};

}  // namespace kf

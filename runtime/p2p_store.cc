#include "runtime/p2p_store.h"

#include <stdexcept>

namespace kf {

std::uint64_t BlobStore::save(const std::string& name, std::vector<std::byte> bytes,
                              std::optional<std::uint64_t> version) {
  auto& versions = blobs_[name];
  const std::uint64_t latest = versions.empty() ? 0 : versions.back().version;
  const std::uint64_t v = version.value_or(latest + 1);
  if (v <= latest) {
    throw std::invalid_argument("blob '" + name + "': version " + std::to_string(v) +
                                " is not newer than " + std::to_string(latest));
  }
  versions.push_back({v, std::make_shared<const std::vector<std::byte>>(std::move(bytes))});
  while (versions.size() > kKeepVersions)
    versions.pop_front();
  return v;
}

std::optional<Blob> BlobStore::get(const std::string& name, std::uint64_t version) const {
  const auto it = blobs_.find(name);
  if (it == blobs_.end() || it->second.empty()) return std::nullopt;
  if (version == 0) return it->second.back();
  for (const auto& blob : it->second) {
    if (blob.version == version) return blob;
  }
  return std::nullopt;
}

std::vector<std::uint64_t> BlobStore::versions(const std::string& name) const {
  std::vector<std::uint64_t> out;
  if (const auto it = blobs_.find(name); it != blobs_.end()) {
    for (const auto& blob : it->second)
      out.push_back(blob.version);
  }
  return out;
}

}  // namespace kf

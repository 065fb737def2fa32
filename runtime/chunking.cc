#include "runtime/chunking.h"

#include <algorithm>

namespace kf {

std::vector<Range> split_by_bytes(std::size_t count, std::size_t elem_size,
                                  std::size_t chunk_bytes) {
  const std::size_t per_chunk = std::max<std::size_t>(1, chunk_bytes / elem_size);
  std::vector<Range> out;
  out.reserve((count + per_chunk - 1) / per_chunk);
  for (std::size_t first = 0; first < count; first += per_chunk) {
    out.push_back({first, std::min(per_chunk, count - first)});
  }
  return out;
}

std::vector<Range> split_even(std::size_t offset, std::size_t count, int parts) {
  std::vector<Range> out(static_cast<std::size_t>(parts));
  for (int i = 0; i < parts; ++i)
    out[static_cast<std::size_t>(i)] = even_part(offset, count, parts, i);
  return out;
}

}  // namespace kf

#include "workloads/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <stdexcept>

namespace kf {

std::pair<Dataset, Dataset> gaussian_mixture(const GaussianMixtureOptions& o) {
  if (o.features < 1 || o.classes < 2 || o.train < 1 || o.noise < 0) {
    throw std::invalid_argument("gaussian_mixture: needs features >= 1, classes >= 2, samples, noise >= 0");
  }
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> means(static_cast<std::size_t>(o.classes * o.features));
  for (auto& m : means)
    m = o.separation * normal(rng);
  const auto draw = [&](std::size_t n) {
    Dataset d{.features = o.features, .classes = o.classes};
    d.x.resize(n * static_cast<std::size_t>(o.features));
    d.y.resize(n);
    std::uniform_int_distribution<int> pick(0, o.classes - 1);
    for (std::size_t i = 0; i < n; ++i) {
      const int c = pick(rng);
      d.y[i] = c;
      for (int f = 0; f < o.features; ++f) {
        d.x[i * static_cast<std::size_t>(o.features) + static_cast<std::size_t>(f)] = static_cast<float>(
            means[static_cast<std::size_t>(c * o.features + f)] + o.noise * normal(rng));
      }
    }
    return d;
  };
  Dataset train = draw(o.train);
  Dataset test = draw(o.test);
  return {std::move(train), std::move(test)};
}

namespace {

std::vector<unsigned char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

std::uint32_t big_endian(const std::vector<unsigned char>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) |
         (std::uint32_t{b[at + 2]} << 8) | std::uint32_t{b[at + 3]};
}

}  // namespace

Dataset load_mnist(const std::string& images_file, const std::string& labels_file) {
  const auto images = read_all(images_file);
  const auto labels = read_all(labels_file);
  if (images.size() < 16 || big_endian(images, 0) != 0x00000803) {
    throw std::runtime_error(images_file + ": not an IDX image file (magic 0x00000803)");
  }
  if (labels.size() < 8 || big_endian(labels, 0) != 0x00000801) {
    throw std::runtime_error(labels_file + ": not an IDX label file (magic 0x00000801)");
  }
  const std::size_t n = big_endian(images, 4), rows = big_endian(images, 8),
                    cols = big_endian(images, 12);
  if (big_endian(labels, 4) != n) {
    throw std::runtime_error(fmt::format("{}: {} labels for {} images in {}", labels_file,
                                         big_endian(labels, 4), n, images_file));
  }
  if (images.size() != 16 + n * rows * cols || labels.size() != 8 + n) {
    throw std::runtime_error(fmt::format("{} / {}: truncated (expected {} images of {}x{})",
                                         images_file, labels_file, n, rows, cols));
  }
  Dataset d{.features = static_cast<int>(rows * cols), .classes = 10};
  d.x.resize(n * rows * cols);
  for (std::size_t i = 0; i < d.x.size(); ++i)
    d.x[i] = static_cast<float>(images[16 + i]) / 255.0f;
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (labels[8 + i] > 9) throw std::runtime_error(fmt::format("{}: label {} at {}", labels_file, labels[8 + i], i));
    d.y[i] = labels[8 + i];
  }
  return d;
}

Dataset load_cifar10(const std::vector<std::string>& batch_files) {
  constexpr std::size_t kImage = 3072, kRecord = 1 + kImage;
  Dataset d{.features = static_cast<int>(kImage), .classes = 10};
  for (const auto& file : batch_files) {
    const auto bytes = read_all(file);
    if (bytes.empty() || bytes.size() % kRecord != 0) {
      throw std::runtime_error(fmt::format("{}: {} bytes is not a whole number of CIFAR-10 records "
                                           "({} bytes each)",
                                           file, bytes.size(), kRecord));
    }
    for (std::size_t at = 0; at < bytes.size(); at += kRecord) {
      if (bytes[at] > 9) throw std::runtime_error(fmt::format("{}: label {} at byte {}", file, bytes[at], at));
      d.y.push_back(bytes[at]);
      for (std::size_t i = 0; i < kImage; ++i)
        d.x.push_back(static_cast<float>(bytes[at + 1 + i]) / 255.0f);
    }
  }
  return d;
}

std::pair<Dataset, Dataset> load_dataset(const std::string& kind, const std::string& path,
                                         const GaussianMixtureOptions& mixture) {
  if (kind == "gaussian_mixture") return gaussian_mixture(mixture);
  if (kind == "mnist") {
    return {load_mnist(path + "/train-images-idx3-ubyte", path + "/train-labels-idx1-ubyte"),
            load_mnist(path + "/t10k-images-idx3-ubyte", path + "/t10k-labels-idx1-ubyte")};
  }
  if (kind == "cifar10") {
    std::vector<std::string> batches;
    for (int i = 1; i <= 5; ++i)
      batches.push_back(fmt::format("{}/data_batch_{}.bin", path, i));
    return {load_cifar10(batches), load_cifar10({path + "/test_batch.bin"})};
  }
  throw std::invalid_argument("unknown dataset '" + kind +
                              "' (known: gaussian_mixture, mnist, cifar10)");
}

ShardSampler::ShardSampler(std::size_t dataset_size, int rank, int size, std::uint64_t seed,
                           std::uint64_t cursor)
    : n_(dataset_size), rank_(rank), size_(size), seed_(seed), cursor_(cursor) {
  if (size < 1 || rank < 0 || rank >= size) throw std::invalid_argument("sampler: bad rank/size");
  if (shard_size() == 0) {
    throw std::invalid_argument(
        fmt::format("sampler: {} samples leave rank {} of {} nothing", n_, rank, size));
  }
}

std::size_t ShardSampler::shard_size() const {
  const auto r = static_cast<std::size_t>(rank_), s = static_cast<std::size_t>(size_);
  return n_ / s + (r < n_ % s ? 1 : 0);
}

std::int64_t ShardSampler::epoch() const {
  return static_cast<std::int64_t>(cursor_ / shard_size());
}

std::vector<std::size_t> ShardSampler::order(std::int64_t epoch) const {
  std::vector<std::size_t> all(n_);
  std::iota(all.begin(), all.end(), std::size_t{0});
  std::mt19937_64 rng(seed_ * 1000003u + static_cast<std::uint64_t>(epoch));
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::size_t> mine;
  for (std::size_t i = static_cast<std::size_t>(rank_); i < n_; i += static_cast<std::size_t>(size_))
    mine.push_back(all[i]);
  return mine;
}

std::vector<std::size_t> ShardSampler::next_batch(int batch_size) {
  std::vector<std::size_t> out;
  out.reserve(static_cast<std::size_t>(batch_size));
  const std::size_t shard = shard_size();
  for (int i = 0; i < batch_size; ++i) {
    const auto e = static_cast<std::int64_t>(cursor_ / shard);
    if (e != cached_epoch_) {
      cached_ = order(e);
      cached_epoch_ = e;
    }
    out.push_back(cached_[cursor_ % shard]);
    ++cursor_;
  }
  return out;
}

}  // namespace kf

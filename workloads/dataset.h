// Datasets for the numeric reference models: deterministic synthetic classification tasks made
// from a seed (Gaussian mixtures with a controllable noise level), and readers for the real MNIST
// (IDX) and CIFAR-10 (binary batches) files when a user points at them. Samples are rows of
// float features in [roughly] unit scale; labels are class indices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kf {

struct Dataset {
  int features = 0;
  int classes = 0;
  std::vector<float> x;         // size() x features, row-major
  std::vector<std::int32_t> y;  // size() labels in [0, classes)
  std::size_t size() const { return y.size(); }
  std::span<const float> row(std::size_t i) const {
    return {x.data() + i * static_cast<std::size_t>(features), static_cast<std::size_t>(features)};
  }
};

struct GaussianMixtureOptions {
  int features = 32;
  int classes = 8;
  std::size_t train = 16384;
  std::size_t test = 4096;
  double separation = 2.0;  // class means drawn with this standard deviation per feature
  double noise = 1.0;       // within-class standard deviation: the task's difficulty
  std::uint64_t seed = 1;
};
// (train, test), both drawn from the same mixture.
std::pair<Dataset, Dataset> gaussian_mixture(const GaussianMixtureOptions& options);

// MNIST's IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte); pixels scaled to [0, 1].
// Throws std::runtime_error naming the file on a missing file or a bad header.
Dataset load_mnist(const std::string& images_file, const std::string& labels_file);
// CIFAR-10 binary batches (data_batch_1.bin ...: 1 label byte + 3072 pixel bytes per image).
Dataset load_cifar10(const std::vector<std::string>& batch_files);

// A dataset by kind: "gaussian_mixture" (made from `mixture`), "mnist" (the four IDX files under
// `path`, as distributed: train-images-idx3-ubyte, ..., t10k-labels-idx1-ubyte) or "cifar10"
// (data_batch_1..5.bin and test_batch.bin under `path`). Returns (train, test).
std::pair<Dataset, Dataset> load_dataset(const std::string& kind, const std::string& path,
                                         const GaussianMixtureOptions& mixture);

// Which samples a worker trains on: every epoch a fresh permutation of the whole set (seeded by
// seed and epoch, the same on every worker), of which rank r takes positions r, r + n, r + 2n...
// A batch continues where the last one ended; the epoch turns when the shard is used up.
class ShardSampler {
 public:
  ShardSampler(std::size_t dataset_size, int rank, int size, std::uint64_t seed,
               std::uint64_t cursor = 0);
  std::vector<std::size_t> next_batch(int batch_size);
  std::uint64_t cursor() const { return cursor_; }  // samples of this shard taken so far
  std::int64_t epoch() const;
  std::size_t shard_size() const;

 private:
  std::vector<std::size_t> order(std::int64_t epoch) const;
  std::size_t n_;
  int rank_;
  int size_;
  std::uint64_t seed_;
  std::uint64_t cursor_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::size_t> cached_;
};

}  // namespace kf

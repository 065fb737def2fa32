#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/model.h"

namespace kf {
namespace {

TEST(Workloads, ExactParameterCounts) {
  EXPECT_EQ(model_profile("resnet50").parameter_count(), 25'557'032u);
  EXPECT_EQ(model_profile("vgg16").parameter_count(), 138'357'544u);
  // torchvision Inception3 (27,161,264) minus its AuxLogits head (3,326,696).
  EXPECT_EQ(model_profile("inception_v3").parameter_count(), 23'834'568u);
  EXPECT_EQ(model_profile("mobilenet_v2").parameter_count(), 3'504'872u);
  // bert-base-uncased incl. pooler (109,482,240) + qa_outputs 768x2+2.
  EXPECT_EQ(model_profile("bert_base").parameter_count(), 109'483'778u);
  EXPECT_EQ(model_profile("resnet56").parameter_count(), 853'018u);
}

TEST(Workloads, SelectedLayerShapes) {
  const auto find = [](const ModelProfile& p, const std::string& name) -> std::size_t {
    for (const auto& t : p.tensors)
      if (t.name == name) return t.count;
    ADD_FAILURE() << "no tensor " << name << " in " << p.name;
    return 0;
  };
  const auto& r = model_profile("resnet50");
  EXPECT_EQ(find(r, "conv1/kernel"), 64u * 3 * 7 * 7);
  EXPECT_EQ(find(r, "layer2.1.conv2/kernel"), 128u * 128 * 9);
  EXPECT_EQ(find(r, "layer2.1.bn2/gamma"), 128u);
  EXPECT_EQ(find(r, "layer4.0.downsample.0/kernel"), 1024u * 2048);
  EXPECT_EQ(find(r, "fc/bias"), 1000u);
  EXPECT_EQ(r.tensors.front().name, "conv1/kernel");
  EXPECT_EQ(r.tensors.back().name, "fc/bias");
  EXPECT_EQ(find(model_profile("vgg16"), "fc6/kernel"), 25088u * 4096);
  EXPECT_EQ(find(model_profile("inception_v3"), "Mixed_6e.branch7x7_2.conv/kernel"),
            192u * 192 * 7);
  EXPECT_EQ(find(model_profile("mobilenet_v2"), "features.17.depthwise/kernel"), 960u * 9);
  EXPECT_EQ(find(model_profile("bert_base"), "embeddings.word_embeddings/embedding"), 30522u * 768);
  EXPECT_EQ(find(model_profile("resnet56"), "layer3.8.conv2/kernel"), 64u * 64 * 9);
}

TEST(Workloads, TensorsNonEmptyAndNamesUnique) {
  for (const auto& name : model_names()) {
    const auto& p = model_profile(name);
    EXPECT_EQ(p.name, name);
    EXPECT_FALSE(p.tensors.empty());
    std::set<std::string> seen;
    for (const auto& t : p.tensors) {
      EXPECT_GT(t.count, 0u) << name << " " << t.name;
      EXPECT_TRUE(seen.insert(t.name).second) << "duplicate " << t.name << " in " << name;
    }
  }
}

TEST(Workloads, ForwardFlopsMatchPublishedFigures) {
  // 2 x GMACs; published GMACs: torchvision docs (4.09, 15.47, 5.71, 0.30), ResNet-56 ~0.125.
  EXPECT_NEAR(model_profile("resnet50").forward_gflops, 2 * 4.09, 0.05);
  EXPECT_NEAR(model_profile("vgg16").forward_gflops, 2 * 15.47, 0.05);
  EXPECT_NEAR(model_profile("inception_v3").forward_gflops, 2 * 5.71, 0.05);
  EXPECT_NEAR(model_profile("mobilenet_v2").forward_gflops, 2 * 0.30, 0.01);
  EXPECT_NEAR(model_profile("resnet56").forward_gflops, 2 * 0.125, 0.005);
  // 12 x 384 x (4 x 768^2 + 2 x 768 x 3072) + 12 x 2 x 384^2 x 768 + head: ~35.3 GMACs.
  EXPECT_NEAR(model_profile("bert_base").forward_gflops, 2 * 35.33, 0.05);
}

TEST(Workloads, ComputeTimeOrdering) {
  for (const auto& name : model_names()) {
    const auto& p = model_profile(name);
    const auto k80 = compute_time_per_sample(p, "k80");
    const auto v100 = compute_time_per_sample(p, "v100");
    const auto h100 = compute_time_per_sample(p, "h100");
    EXPECT_GT(h100.count(), 0) << name;
    EXPECT_LT(h100, v100) << name;
    EXPECT_LT(v100, k80) << name;
  }
  for (const auto& dev : device_names()) {
    const auto vgg = compute_time_per_sample(model_profile("vgg16"), dev);
    const auto rn50 = compute_time_per_sample(model_profile("resnet50"), dev);
    const auto mnv2 = compute_time_per_sample(model_profile("mobilenet_v2"), dev);
    EXPECT_GT(vgg, rn50) << dev;
    EXPECT_GT(rn50, mnv2) << dev;
  }
}

TEST(Workloads, ResNet50OnK80MatchesPublishedThroughput) {
  const double ms = compute_time_per_sample(model_profile("resnet50"), "k80").count() / 1e6;
  EXPECT_GE(ms, 15.0);
  EXPECT_LE(ms, 25.0);  // ~52 img/s (tf_cnn_benchmarks), ~50 img/s in the KungFu paper
}

void ExpectEveryTensorOnce(const ModelProfile& p, const std::vector<std::vector<int>>& buckets) {
  std::vector<int> flat;
  for (const auto& b : buckets) {
    EXPECT_FALSE(b.empty());
    flat.insert(flat.end(), b.begin(), b.end());
  }
  ASSERT_EQ(flat.size(), p.tensors.size());
  // Backprop order: strictly descending indices across and within buckets.
  for (std::size_t i = 0; i < flat.size(); ++i)
    EXPECT_EQ(flat[i], static_cast<int>(p.tensors.size() - 1 - i));
}

TEST(Workloads, FusionZeroIsOneTensorPerBucketInReverseOrder) {
  for (const auto& name : model_names()) {
    const auto& p = model_profile(name);
    const auto buckets = fuse_gradients(p, 0);
    ASSERT_EQ(buckets.size(), p.tensors.size());
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      ASSERT_EQ(buckets[i].size(), 1u);
      EXPECT_EQ(buckets[i][0], static_cast<int>(p.tensors.size() - 1 - i));
    }
  }
}

TEST(Workloads, FusionRespectsLimit) {
  for (const auto& name : model_names()) {
    const auto& p = model_profile(name);
    for (std::size_t limit : {std::size_t{1}, std::size_t{4096}, std::size_t{1} << 20,
                              std::size_t{25} << 20, std::size_t{1} << 40}) {
      for (std::size_t bpe : {std::size_t{2}, std::size_t{4}}) {
        const auto buckets = fuse_gradients(p, limit, bpe);
        ExpectEveryTensorOnce(p, buckets);
        for (std::size_t b = 0; b < buckets.size(); ++b) {
          std::size_t bytes = 0;
          for (int i : buckets[b])
            bytes += p.tensors[static_cast<std::size_t>(i)].count * bpe;
          if (buckets[b].size() > 1) {
            EXPECT_LE(bytes, limit) << name;
          }
          // Greedy: a bucket closes only when the next tensor would not fit.
          if (b + 1 < buckets.size()) {
            const auto next = p.tensors[static_cast<std::size_t>(buckets[b + 1][0])].count * bpe;
            EXPECT_GT(bytes + next, limit) << name;
          }
        }
        if (limit == (std::size_t{1} << 40)) {
          EXPECT_EQ(buckets.size(), 1u);
        }
      }
    }
  }
}

TEST(Workloads, UnknownNamesThrowWithKnownList) {
  try {
    model_profile("resnet51");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("resnet51"), std::string::npos);
    for (const auto& n : model_names())
      EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
  try {
    compute_time_per_sample(model_profile("resnet50"), "a100");
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("a100"), std::string::npos);
    for (const auto& d : device_names())
      EXPECT_NE(msg.find(d), std::string::npos) << msg;
  }
  EXPECT_EQ(model_names().size(), 6u);
  EXPECT_EQ(device_names(), (std::vector<std::string>{"k80", "v100", "h100"}));
}

}  // namespace
}  // namespace kf

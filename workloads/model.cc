// Workload profiles: per-layer gradient tensors built by walking each architecture, forward
// FLOPs counted by the same walk, and a per-device compute-time calibration (sources below).
#include "workloads/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace kf {

std::size_t ModelProfile::parameter_count() const {
  std::size_t n = 0;
  for (const auto& t : tensors)
    n += t.count;
  return n;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Architecture walker. Every layer appends its trainable tensors (in forward order) and adds its
// multiply-accumulates (MACs) at the given output size. MACs count convolutions and dense layers
// (plus attention matmuls for BERT), the usual convention of torchvision's "GFLOPS" column and of
// the papers; batch norm, activations, pooling and residual adds are not counted.
// ---------------------------------------------------------------------------------------------
class Builder {
 public:
  explicit Builder(std::string name) { p_.name = std::move(name); }

  // A layer named `layer` whose tensors are those added until the next layer starts.
  void layer(std::string layer) {
    p_.layers.push_back({.name = std::move(layer),
                         .first_tensor = p_.tensors.size(),
                         .tensor_count = 0,
                         .forward_gflops = 0});
  }
  void add(std::string name, std::size_t count) {
    p_.tensors.push_back({std::move(name), count});
    ++p_.layers.back().tensor_count;
  }
  // Multiply-accumulates of the current layer.
  void macs(double m) {
    macs_ += m;
    p_.layers.back().forward_gflops += 2.0 * m / 1e9;
  }

  // kh x kw convolution cin -> cout (grouped when groups > 1), output out_h x out_w.
  void conv(const std::string& name, std::size_t cin, std::size_t cout, std::size_t kh,
            std::size_t kw, std::size_t out_h, std::size_t out_w, std::size_t groups = 1,
            bool bias = false) {
    const std::size_t weights = kh * kw * (cin / groups) * cout;
    layer(name);
    add(name + "/kernel", weights);
    if (bias) add(name + "/bias", cout);
    macs(static_cast<double>(weights) * static_cast<double>(out_h * out_w));
  }
  void norm(const std::string& name, std::size_t c) {  // BatchNorm or LayerNorm: gamma, beta
    layer(name);
    add(name + "/gamma", c);
    add(name + "/beta", c);
  }
  // Dense in -> out applied to `rows` vectors (tokens) per sample.
  void dense(const std::string& name, std::size_t in, std::size_t out, std::size_t rows = 1,
             bool bias = true) {
    layer(name);
    add(name + "/kernel", in * out);
    if (bias) add(name + "/bias", out);
    macs(static_cast<double>(in * out) * static_cast<double>(rows));
  }
  void embedding(const std::string& name, std::size_t rows, std::size_t dim) {
    layer(name);
    add(name + "/embedding", rows * dim);  // a lookup: no MACs
  }
  // MACs of a step with no parameters of its own (attention's matmuls), charged to the layer
  // before it.
  void extra_macs(double m) { macs(m); }

  ModelProfile finish() {
    p_.forward_gflops = 2.0 * macs_ / 1e9;
    return std::move(p_);
  }

 private:
  ModelProfile p_;
  double macs_ = 0;
};

std::size_t conv_out(std::size_t in, std::size_t k, std::size_t stride, std::size_t pad) {
  return (in + 2 * pad - k) / stride + 1;
}

std::string idx(const std::string& a, std::size_t i) {
  return a + "." + std::to_string(i);
}

// torchvision resnet50 (ResNet v1.5: the stride sits on the 3x3 conv), 224x224 input.
ModelProfile build_resnet50() {
  Builder b("resnet50");
  std::size_t hw = conv_out(224, 7, 2, 3);  // 112
  b.conv("conv1", 3, 64, 7, 7, hw, hw);
  b.norm("bn1", 64);
  hw = conv_out(hw, 3, 2, 1);  // max pool -> 56
  const std::array<std::size_t, 4> widths{64, 128, 256, 512};
  const std::array<std::size_t, 4> blocks{3, 4, 6, 3};
  std::size_t in = 64;
  for (std::size_t s = 0; s < 4; ++s) {
    const std::size_t w = widths[s], out = 4 * w;
    for (std::size_t i = 0; i < blocks[s]; ++i) {
      const std::size_t stride = (i == 0 && s > 0) ? 2 : 1;
      const std::string p = idx("layer" + std::to_string(s + 1), i);
      const std::size_t ohw = conv_out(hw, 3, stride, 1);
      b.conv(p + ".conv1", in, w, 1, 1, hw, hw);
      b.norm(p + ".bn1", w);
      b.conv(p + ".conv2", w, w, 3, 3, ohw, ohw);
      b.norm(p + ".bn2", w);
      b.conv(p + ".conv3", w, out, 1, 1, ohw, ohw);
      b.norm(p + ".bn3", out);
      if (i == 0) {
        b.conv(p + ".downsample.0", in, out, 1, 1, ohw, ohw);
        b.norm(p + ".downsample.1", out);
      }
      in = out;
      hw = ohw;
    }
  }
  b.dense("fc", 2048, 1000);
  return b.finish();
}

// VGG-16 (configuration D, no batch norm), 224x224 input.
ModelProfile build_vgg16() {
  Builder b("vgg16");
  const std::array<std::array<std::size_t, 3>, 5> cfg{
      {{64, 64, 0}, {128, 128, 0}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}}};
  std::size_t hw = 224, in = 3;
  for (std::size_t blk = 0; blk < cfg.size(); ++blk) {
    for (std::size_t j = 0; j < 3 && cfg[blk][j] != 0; ++j) {
      const std::string name = "conv" + std::to_string(blk + 1) + "_" + std::to_string(j + 1);
      b.conv(name, in, cfg[blk][j], 3, 3, hw, hw, 1, /*bias=*/true);
      in = cfg[blk][j];
    }
    hw /= 2;  // 2x2 max pool
  }
  b.dense("fc6", 512 * hw * hw, 4096);  // 512 x 7 x 7 = 25088
  b.dense("fc7", 4096, 4096);
  b.dense("fc8", 4096, 1000);
  return b.finish();
}

// torchvision Inception3 without the auxiliary classifier (aux_logits=False), 299x299 input.
// BasicConv2d = conv (no bias) + BatchNorm (gamma, beta).
class InceptionBuilder {
 public:
  Builder b{"inception_v3"};
  void basic(const std::string& name, std::size_t cin, std::size_t cout, std::size_t kh,
             std::size_t kw, std::size_t out_h, std::size_t out_w) {
    b.conv(name + ".conv", cin, cout, kh, kw, out_h, out_w);
    b.norm(name + ".bn", cout);
  }
  void same(const std::string& name, std::size_t cin, std::size_t cout, std::size_t kh,
            std::size_t kw, std::size_t hw) {
    basic(name, cin, cout, kh, kw, hw, hw);
  }
  // InceptionA(in, pool_features) at hw x hw; out = 224 + pool.
  void a(const std::string& p, std::size_t in, std::size_t pool, std::size_t hw) {
    same(p + ".branch1x1", in, 64, 1, 1, hw);
    same(p + ".branch5x5_1", in, 48, 1, 1, hw);
    same(p + ".branch5x5_2", 48, 64, 5, 5, hw);
    same(p + ".branch3x3dbl_1", in, 64, 1, 1, hw);
    same(p + ".branch3x3dbl_2", 64, 96, 3, 3, hw);
    same(p + ".branch3x3dbl_3", 96, 96, 3, 3, hw);
    same(p + ".branch_pool", in, pool, 1, 1, hw);
  }
  // InceptionB(in): 35 -> 17; out = 384 + 96 + in.
  void bb(const std::string& p, std::size_t in, std::size_t hw) {
    const std::size_t o = conv_out(hw, 3, 2, 0);
    same(p + ".branch3x3", in, 384, 3, 3, o);
    same(p + ".branch3x3dbl_1", in, 64, 1, 1, hw);
    same(p + ".branch3x3dbl_2", 64, 96, 3, 3, hw);
    same(p + ".branch3x3dbl_3", 96, 96, 3, 3, o);
  }
  // InceptionC(in, c7) at hw; out = 768.
  void c(const std::string& p, std::size_t in, std::size_t c7, std::size_t hw) {
    same(p + ".branch1x1", in, 192, 1, 1, hw);
    same(p + ".branch7x7_1", in, c7, 1, 1, hw);
    same(p + ".branch7x7_2", c7, c7, 1, 7, hw);
    same(p + ".branch7x7_3", c7, 192, 7, 1, hw);
    same(p + ".branch7x7dbl_1", in, c7, 1, 1, hw);
    same(p + ".branch7x7dbl_2", c7, c7, 7, 1, hw);
    same(p + ".branch7x7dbl_3", c7, c7, 1, 7, hw);
    same(p + ".branch7x7dbl_4", c7, c7, 7, 1, hw);
    same(p + ".branch7x7dbl_5", c7, 192, 1, 7, hw);
    same(p + ".branch_pool", in, 192, 1, 1, hw);
  }
  // InceptionD(in): 17 -> 8; out = 320 + 192 + in.
  void d(const std::string& p, std::size_t in, std::size_t hw) {
    const std::size_t o = conv_out(hw, 3, 2, 0);
    same(p + ".branch3x3_1", in, 192, 1, 1, hw);
    same(p + ".branch3x3_2", 192, 320, 3, 3, o);
    same(p + ".branch7x7x3_1", in, 192, 1, 1, hw);
    same(p + ".branch7x7x3_2", 192, 192, 1, 7, hw);
    same(p + ".branch7x7x3_3", 192, 192, 7, 1, hw);
    same(p + ".branch7x7x3_4", 192, 192, 3, 3, o);
  }
  // InceptionE(in) at hw; out = 320 + 768 + 768 + 192 = 2048.
  void e(const std::string& p, std::size_t in, std::size_t hw) {
    same(p + ".branch1x1", in, 320, 1, 1, hw);
    same(p + ".branch3x3_1", in, 384, 1, 1, hw);
    same(p + ".branch3x3_2a", 384, 384, 1, 3, hw);
    same(p + ".branch3x3_2b", 384, 384, 3, 1, hw);
    same(p + ".branch3x3dbl_1", in, 448, 1, 1, hw);
    same(p + ".branch3x3dbl_2", 448, 384, 3, 3, hw);
    same(p + ".branch3x3dbl_3a", 384, 384, 1, 3, hw);
    same(p + ".branch3x3dbl_3b", 384, 384, 3, 1, hw);
    same(p + ".branch_pool", in, 192, 1, 1, hw);
  }
};

ModelProfile build_inception_v3() {
  InceptionBuilder n;
  std::size_t hw = conv_out(299, 3, 2, 0);  // 149
  n.same("Conv2d_1a_3x3", 3, 32, 3, 3, hw);
  hw = conv_out(hw, 3, 1, 0);  // 147
  n.same("Conv2d_2a_3x3", 32, 32, 3, 3, hw);
  n.same("Conv2d_2b_3x3", 32, 64, 3, 3, hw);  // padding 1
  hw = conv_out(hw, 3, 2, 0);                 // max pool -> 73
  n.same("Conv2d_3b_1x1", 64, 80, 1, 1, hw);
  hw = conv_out(hw, 3, 1, 0);  // 71
  n.same("Conv2d_4a_3x3", 80, 192, 3, 3, hw);
  hw = conv_out(hw, 3, 2, 0);  // max pool -> 35
  n.a("Mixed_5b", 192, 32, hw);
  n.a("Mixed_5c", 256, 64, hw);
  n.a("Mixed_5d", 288, 64, hw);
  n.bb("Mixed_6a", 288, hw);
  hw = conv_out(hw, 3, 2, 0);  // 17
  n.c("Mixed_6b", 768, 128, hw);
  n.c("Mixed_6c", 768, 160, hw);
  n.c("Mixed_6d", 768, 160, hw);
  n.c("Mixed_6e", 768, 192, hw);
  n.d("Mixed_7a", 768, hw);
  hw = conv_out(hw, 3, 2, 0);  // 8
  n.e("Mixed_7b", 1280, hw);
  n.e("Mixed_7c", 2048, hw);
  n.b.dense("fc", 2048, 1000);
  return n.b.finish();
}

// torchvision mobilenet_v2 (width 1.0), 224x224 input. No conv biases.
ModelProfile build_mobilenet_v2() {
  Builder b("mobilenet_v2");
  std::size_t hw = conv_out(224, 3, 2, 1);  // 112
  b.conv("features.0.conv", 3, 32, 3, 3, hw, hw);
  b.norm("features.0.bn", 32);
  struct Setting {
    std::size_t t, c, n, s;
  };
  const std::array<Setting, 7> settings{{{1, 16, 1, 1},
                                         {6, 24, 2, 2},
                                         {6, 32, 3, 2},
                                         {6, 64, 4, 2},
                                         {6, 96, 3, 1},
                                         {6, 160, 3, 2},
                                         {6, 320, 1, 1}}};
  std::size_t in = 32, feature = 1;
  for (const auto& st : settings) {
    for (std::size_t i = 0; i < st.n; ++i, ++feature) {
      const std::size_t stride = i == 0 ? st.s : 1;
      const std::size_t hidden = in * st.t;
      const std::string p = idx("features", feature);
      if (st.t != 1) {
        b.conv(p + ".expand", in, hidden, 1, 1, hw, hw);
        b.norm(p + ".expand_bn", hidden);
      }
      const std::size_t ohw = conv_out(hw, 3, stride, 1);
      b.conv(p + ".depthwise", hidden, hidden, 3, 3, ohw, ohw, /*groups=*/hidden);
      b.norm(p + ".depthwise_bn", hidden);
      b.conv(p + ".project", hidden, st.c, 1, 1, ohw, ohw);
      b.norm(p + ".project_bn", st.c);
      in = st.c;
      hw = ohw;
    }
  }
  b.conv(idx("features", feature) + ".conv", in, 1280, 1, 1, hw, hw);  // features.18
  b.norm(idx("features", feature) + ".bn", 1280);
  b.dense("classifier", 1280, 1000);
  return b.finish();
}

// bert-base-uncased + SQuAD span head, sequence length 384. The pooler is included (the Google
// TF BERT graph always builds it; HF BertForQuestionAnswering omits it: 590,592 fewer).
ModelProfile build_bert_base() {
  constexpr std::size_t kHidden = 768, kFfn = 3072, kLayers = 12, kSeq = 384;
  Builder b("bert_base");
  b.embedding("embeddings.word_embeddings", 30522, kHidden);
  b.embedding("embeddings.position_embeddings", 512, kHidden);
  b.embedding("embeddings.token_type_embeddings", 2, kHidden);
  b.norm("embeddings.LayerNorm", kHidden);
  for (std::size_t l = 0; l < kLayers; ++l) {
    const std::string p = idx("encoder.layer", l);
    b.dense(p + ".attention.self.query", kHidden, kHidden, kSeq);
    b.dense(p + ".attention.self.key", kHidden, kHidden, kSeq);
    b.dense(p + ".attention.self.value", kHidden, kHidden, kSeq);
    // Q K^T and softmax(QK^T) V over all heads: 2 x seq x seq x hidden MACs.
    b.extra_macs(2.0 * kSeq * kSeq * kHidden);
    b.dense(p + ".attention.output.dense", kHidden, kHidden, kSeq);
    b.norm(p + ".attention.output.LayerNorm", kHidden);
    b.dense(p + ".intermediate.dense", kHidden, kFfn, kSeq);
    b.dense(p + ".output.dense", kFfn, kHidden, kSeq);
    b.norm(p + ".output.LayerNorm", kHidden);
  }
  b.dense("pooler.dense", kHidden, kHidden, 1);
  b.dense("qa_outputs", kHidden, 2, kSeq);
  return b.finish();
}

// CIFAR ResNet-56 (He et al. 2016, sec. 4.2): 6n+2 layers with n = 9, option-A (parameter-free)
// shortcuts, 32x32 input.
ModelProfile build_resnet56() {
  Builder b("resnet56");
  std::size_t hw = 32;
  b.conv("conv1", 3, 16, 3, 3, hw, hw);
  b.norm("bn1", 16);
  std::size_t in = 16;
  const std::array<std::size_t, 3> widths{16, 32, 64};
  for (std::size_t s = 0; s < 3; ++s) {
    for (std::size_t i = 0; i < 9; ++i) {
      const std::size_t stride = (i == 0 && s > 0) ? 2 : 1;
      const std::size_t ohw = conv_out(hw, 3, stride, 1);
      const std::string p = idx("layer" + std::to_string(s + 1), i);
      b.conv(p + ".conv1", in, widths[s], 3, 3, ohw, ohw);
      b.norm(p + ".bn1", widths[s]);
      b.conv(p + ".conv2", widths[s], widths[s], 3, 3, ohw, ohw);
      b.norm(p + ".bn2", widths[s]);
      in = widths[s];
      hw = ohw;
    }
  }
  b.dense("fc", 64, 10);
  return b.finish();
}

const std::map<std::string, ModelProfile, std::less<>>& registry() {
  static const std::map<std::string, ModelProfile, std::less<>> models = [] {
    std::map<std::string, ModelProfile, std::less<>> m;
    for (auto build : {build_resnet50, build_vgg16, build_inception_v3, build_mobilenet_v2,
                       build_bert_base, build_resnet56}) {
      ModelProfile p = build();
      std::string name = p.name;
      m.emplace(std::move(name), std::move(p));
    }
    return m;
  }();
  return models;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names)
    s += (s.empty() ? "" : ", ") + n;
  return s;
}

// =============================================================================================
// Compute-time calibration
// =============================================================================================
// time_per_sample(model, device) = (1 / R_dev) * (F_model / F_resnet50) / eff_model
//
//   R_dev     ResNet-50 training throughput of one device (images/s), from a public measurement.
//   F_x       forward GFLOPs per sample counted by the walks above. For reference, the walks give
//             ResNet-50 4.09 GMACs (torchvision docs: 4.09), VGG-16 15.47 (15.47), Inception-v3
//             at 299 5.71 (5.71), MobileNet-v2 0.30 (0.30; paper: 300M MAdds), ResNet-56 0.125
//             (the commonly quoted 125M), BERT-base at 384 tokens 35.3 GMACs = 12 layers x 384
//             tokens x (4x768^2 + 2x768x3072) plus 12 x 2 x 384^2 x 768 for the attention matmuls
//             (i.e. ~ params_without_embeddings x tokens + attention).
//   eff_model how much better (>1) or worse (<1) than ResNet-50 the model turns FLOPs into time.
//
// Anchors R_dev:
//   k80   51.9 img/s. TensorFlow "Benchmarks" page (tensorflow.org/performance/benchmarks, May
//         2017, tf_cnn_benchmarks), Google Compute Engine K80, 1 GPU, synthetic data, batch 64.
//         (A "GPU" is one GK210 die of the K80 board.) The KungFu artifact guide sees 49-50 img/s
//         per K80 for ResNet-50 (Figures 8 and 9), so this anchor matches the paper's testbed.
//   v100  367 img/s. NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5
//         README, "Training performance: NVIDIA DGX-1 16GB", 1 GPU, FP32.
//   h100  3000 img/s, MIXED PRECISION (not FP32: nobody trains FP32 on an H100). Approximately
//         NVIDIA's published ResNet-50 v1.5 mixed-precision training throughput per H100 SXM on its
//         "Data Center Deep Learning Product Performance" page; not re-checked against that page
//         here. Sanity bound from a checked figure: the same DeepLearningExamples README gives
//         2470 img/s (1x A100 80GB, AMP), and H100 is faster than A100.
//
// eff_model (device independent; a simplification: tensor cores on h100 favour large GEMMs even
// more, so there BERT is if anything faster and MobileNet-v2 slower than modelled):
//   resnet50      1 by definition.
//   vgg16         measured: eff = (R_vgg / R_rn50) x (F_vgg / F_rn50), mean of two rows of the
//                 same TF Benchmarks page at batch 32, synthetic: K80 (GCE) VGG16 35.4 vs
//                 ResNet-50 49.5 img/s; P100 (DGX-1) VGG16 144 vs ResNet-50 195 img/s. ~2.7: its
//                 wide 3x3 convs run at high utilisation (cuDNN Winograd cuts the real arithmetic).
//   inception_v3  measured the same way at batch 64: K80 InceptionV3 30.5 vs ResNet-50 51.9;
//                 P100 142 vs 219. ~0.86.
//   bert_base     derived: Hugging Face transformers' question-answering example README says
//                 fine-tuning BERT-base on SQuAD 1.1 (seq 384, stride 128, 2 epochs; ~88.6k
//                 features per epoch) takes 24 min on one V100 16GB: ~123 seq/s. That needs
//                 ~26 TFLOP/s, above V100's 15.7 FP32 peak, so it was mixed precision; compared
//                 with the AMP ResNet-50 figure of the same GPU (1200 img/s, DeepLearningExamples
//                 README above): eff = (123 / 1200) x (F_bert / F_rn50) ~ 0.89. BERT's GEMMs are
//                 large, but softmax/LayerNorm/GELU are memory bound, so ~0.9 is plausible.
//   mobilenet_v2  ESTIMATE 0.22: depthwise 3x3 convs do 9 MACs per activation read and are memory
//                 bound, and the 1x1 expand/project layers are thin; in practice MobileNet-v2
//                 trains at ~3x ResNet-50's images/s although it has 13.6x fewer FLOPs
//                 (3 / 13.6 = 0.22). Engineering estimate, not a single cited measurement.
//   resnet56      ESTIMATE 0.35: 16-64 channel 3x3 convs on 32x32..8x8 maps are too small to fill
//                 a GPU, so it runs well below ResNet-50's utilisation. Engineering estimate.
//   other names   (custom profiles) 1.0: plain FLOP scaling.
struct Anchor {
  const char* device;
  double resnet50_images_per_s;
};
constexpr std::array<Anchor, 3> kAnchors{{{"k80", 51.9}, {"v100", 367.0}, {"h100", 3000.0}}};

double measured_eff(double r_model_a, double r_rn50_a, double r_model_b, double r_rn50_b,
                    double flops_ratio) {
  return 0.5 * (r_model_a / r_rn50_a + r_model_b / r_rn50_b) * flops_ratio;
}

double efficiency(const ModelProfile& model) {
  const auto& reg = registry();
  const double f_rn50 = reg.find("resnet50")->second.forward_gflops;
  const auto ratio = [&](const char* name) {
    return reg.find(name)->second.forward_gflops / f_rn50;
  };
  if (model.name == "resnet50") return 1.0;
  if (model.name == "vgg16") return measured_eff(35.4, 49.5, 144.0, 195.0, ratio("vgg16"));
  if (model.name == "inception_v3")
    return measured_eff(30.5, 51.9, 142.0, 219.0, ratio("inception_v3"));
  if (model.name == "bert_base") return (123.0 / 1200.0) * ratio("bert_base");
  if (model.name == "mobilenet_v2") return 0.22;
  if (model.name == "resnet56") return 0.35;
  return 1.0;
}

}  // namespace

const ModelProfile& model_profile(std::string_view name) {
  const auto& reg = registry();
  const auto it = reg.find(name);
  if (it == reg.end())
    throw std::invalid_argument("unknown model '" + std::string(name) +
                                "'; known models: " + join(model_names()));
  return it->second;
}

std::vector<std::string> model_names() {
  return {"resnet50", "vgg16", "inception_v3", "mobilenet_v2", "bert_base", "resnet56"};
}

std::vector<std::string> device_names() {
  std::vector<std::string> names;
  for (const auto& a : kAnchors)
    names.emplace_back(a.device);
  return names;
}

std::chrono::nanoseconds compute_time_per_sample(const ModelProfile& model,
                                                 std::string_view device) {
  // A profile's measured times for this device, when every layer has them.
  const bool timed = !model.layers.empty() &&
                     std::all_of(model.layers.begin(), model.layers.end(), [&](const auto& l) {
                       return l.times.find(device) != l.times.end();
                     });
  if (timed) {
    std::chrono::nanoseconds sum{0};
    for (const auto& l : model.layers) {
      const auto& t = l.times.find(device)->second;
      sum += t.forward + t.backward;
    }
    return sum;
  }
  if (!model.layers.empty() && !model.layers.front().times.empty() && model.forward_gflops <= 0) {
    std::vector<std::string> timed_devices;
    for (const auto& [name, times] : model.layers.front().times)
      timed_devices.push_back(name);
    throw std::invalid_argument("model '" + model.name + "' has no times for device '" +
                                std::string(device) +
                                "' and no FLOPs to scale; its devices: " + join(timed_devices));
  }
  const auto it = std::find_if(kAnchors.begin(), kAnchors.end(),
                               [&](const Anchor& a) { return device == a.device; });
  if (it == kAnchors.end())
    throw std::invalid_argument("unknown device '" + std::string(device) +
                                "'; known devices: " + join(device_names()));
  const double f_rn50 = model_profile("resnet50").forward_gflops;
  const double seconds =
      (1.0 / it->resnet50_images_per_s) * (model.forward_gflops / f_rn50) / efficiency(model);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
}

std::vector<std::vector<int>> fuse_gradients(const ModelProfile& model, std::size_t bucket_bytes,
                                             std::size_t bytes_per_element) {
  std::vector<std::vector<int>> buckets;
  std::vector<int> current;
  std::size_t current_bytes = 0;
  for (int i = static_cast<int>(model.tensors.size()) - 1; i >= 0; --i) {
    const std::size_t bytes = model.tensors[static_cast<std::size_t>(i)].count * bytes_per_element;
    if (!current.empty() && (bucket_bytes == 0 || current_bytes + bytes > bucket_bytes)) {
      buckets.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace kf

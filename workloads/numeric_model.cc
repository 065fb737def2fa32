#include "workloads/numeric_model.h"

#include <fmt/format.h>
#include <Eigen/Dense>

#include <cmath>
#include <mutex>
#include <random>
#include <stdexcept>

namespace kf {

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<Matrix>;
using ConstMatrixMap = Eigen::Map<const Matrix>;
using Vector = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using VectorMap = Eigen::Map<Vector>;
using ConstVectorMap = Eigen::Map<const Vector>;

Matrix gather_rows(const Dataset& data, std::span<const std::size_t> rows) {
  Matrix x(static_cast<Eigen::Index>(rows.size()), data.features);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = data.row(rows[i]);
    x.row(static_cast<Eigen::Index>(i)) = ConstVectorMap(r.data(), data.features);
  }
  return x;
}

// Softmax of each row of `z` in place; returns the summed cross-entropy against `labels` and
// leaves (p - onehot) in z: the gradient of the summed loss w.r.t. the logits.
double softmax_cross_entropy(Matrix& z, std::span<const std::int32_t> labels) {
  double loss = 0;
  for (Eigen::Index i = 0; i < z.rows(); ++i) {
    auto row = z.row(i);
    row.array() -= row.maxCoeff();
    row = row.array().exp().matrix();
    row /= row.sum();
    const auto y = static_cast<Eigen::Index>(labels[static_cast<std::size_t>(i)]);
    loss -= std::log(std::max(row(y), 1e-30f));
    row(y) -= 1.0f;
  }
  return loss;
}

std::vector<std::int32_t> labels_of(const Dataset& data, std::span<const std::size_t> rows) {
  std::vector<std::int32_t> out(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    out[i] = data.y[rows[i]];
  return out;
}

std::vector<std::size_t> all_rows(const Dataset& data) {
  std::vector<std::size_t> rows(data.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i] = i;
  return rows;
}

// Eigen blocks its matrix products by the host's cache sizes, and the blocking decides the order
// in which a product sums: the same run gave other losses on a CPU with a 48 KiB L1 than on one
// with 32 KiB. Fixed sizes make the numeric models, and the records of every simulation that
// trains one, the same on every host.
void fix_product_blocking() {
  static std::once_flag once;
  std::call_once(once, [] { Eigen::setCpuCacheSizes(32 << 10, 1 << 20, 32 << 20); });
}

void he_init(std::span<float> w, int fan_in, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / static_cast<float>(fan_in)));
  for (float& v : w)
    v = normal(rng);
}

// softmax(x W^T + b): W is classes x features.
class Softmax final : public NumericModel {
 public:
  Softmax(int features, int classes) : f_(features), c_(classes) {
    tensors_ = {{"dense/kernel", static_cast<std::size_t>(c_ * f_)},
                {"dense/bias", static_cast<std::size_t>(c_)}};
  }
  std::string name() const override { return "softmax"; }

  std::vector<float> initial_parameters(std::uint64_t seed) const override {
    std::vector<float> p(parameter_count(), 0.0f);
    std::mt19937_64 rng(seed);
    he_init(std::span<float>(p).first(static_cast<std::size_t>(c_ * f_)), f_, rng);
    return p;
  }

  double loss_and_gradient(std::span<const float> p, const Dataset& data,
                           std::span<const std::size_t> batch, std::span<float> g) const override {
    const Matrix x = gather_rows(data, batch);
    const ConstMatrixMap w(p.data(), c_, f_);
    const ConstVectorMap b(p.data() + c_ * f_, c_);
    Matrix z = x * w.transpose();
    z.rowwise() += b;
    const auto labels = labels_of(data, batch);
    const double loss = softmax_cross_entropy(z, labels);
    const float scale = 1.0f / static_cast<float>(batch.size());
    MatrixMap(g.data(), c_, f_) = scale * (z.transpose() * x);
    VectorMap(g.data() + c_ * f_, c_) = scale * z.colwise().sum();
    return loss / static_cast<double>(batch.size());
  }

  Evaluation evaluate(std::span<const float> p, const Dataset& data) const override {
    const auto rows = all_rows(data);
    const Matrix x = gather_rows(data, rows);
    const ConstMatrixMap w(p.data(), c_, f_);
    const ConstVectorMap b(p.data() + c_ * f_, c_);
    Matrix z = x * w.transpose();
    z.rowwise() += b;
    return score(z, data);
  }

  static Evaluation score(Matrix& z, const Dataset& data) {
    std::size_t right = 0;
    for (Eigen::Index i = 0; i < z.rows(); ++i) {
      Eigen::Index best = 0;
      z.row(i).maxCoeff(&best);
      right += best == data.y[static_cast<std::size_t>(i)];
    }
    const double loss = softmax_cross_entropy(z, data.y);
    return {.loss = loss / static_cast<double>(data.size()),
            .accuracy = static_cast<double>(right) / static_cast<double>(data.size())};
  }

 private:
  int f_, c_;
};

// softmax(relu(x W1^T + b1) W2^T + b2).
class Mlp final : public NumericModel {
 public:
  Mlp(int features, int classes, int hidden) : f_(features), c_(classes), h_(hidden) {
    tensors_ = {{"hidden/kernel", static_cast<std::size_t>(h_ * f_)},
                {"hidden/bias", static_cast<std::size_t>(h_)},
                {"output/kernel", static_cast<std::size_t>(c_ * h_)},
                {"output/bias", static_cast<std::size_t>(c_)}};
  }
  std::string name() const override { return "mlp"; }

  std::vector<float> initial_parameters(std::uint64_t seed) const override {
    std::vector<float> p(parameter_count(), 0.0f);
    std::mt19937_64 rng(seed);
    he_init(std::span<float>(p).subspan(0, static_cast<std::size_t>(h_ * f_)), f_, rng);
    he_init(std::span<float>(p).subspan(static_cast<std::size_t>(h_ * f_ + h_),
                                        static_cast<std::size_t>(c_ * h_)),
            h_, rng);
    return p;
  }

  struct Views {
    ConstMatrixMap w1;
    ConstVectorMap b1;
    ConstMatrixMap w2;
    ConstVectorMap b2;
  };
  Views views(std::span<const float> p) const {
    const float* at = p.data();
    return {ConstMatrixMap(at, h_, f_), ConstVectorMap(at + h_ * f_, h_),
            ConstMatrixMap(at + h_ * f_ + h_, c_, h_),
            ConstVectorMap(at + h_ * f_ + h_ + c_ * h_, c_)};
  }

  double loss_and_gradient(std::span<const float> p, const Dataset& data,
                           std::span<const std::size_t> batch, std::span<float> g) const override {
    const Views v = views(p);
    const Matrix x = gather_rows(data, batch);
    Matrix hidden = x * v.w1.transpose();
    hidden.rowwise() += v.b1;
    hidden = hidden.cwiseMax(0.0f);
    Matrix z = hidden * v.w2.transpose();
    z.rowwise() += v.b2;
    const auto labels = labels_of(data, batch);
    const double loss = softmax_cross_entropy(z, labels);
    const float scale = 1.0f / static_cast<float>(batch.size());
    float* at = g.data();
    Matrix dh = z * v.w2;
    dh = (hidden.array() > 0.0f).select(dh, 0.0f);
    MatrixMap(at, h_, f_) = scale * (dh.transpose() * x);
    VectorMap(at + h_ * f_, h_) = scale * dh.colwise().sum();
    MatrixMap(at + h_ * f_ + h_, c_, h_) = scale * (z.transpose() * hidden);
    VectorMap(at + h_ * f_ + h_ + c_ * h_, c_) = scale * z.colwise().sum();
    return loss / static_cast<double>(batch.size());
  }

  Evaluation evaluate(std::span<const float> p, const Dataset& data) const override {
    const Views v = views(p);
    const Matrix x = gather_rows(data, all_rows(data));
    Matrix hidden = x * v.w1.transpose();
    hidden.rowwise() += v.b1;
    hidden = hidden.cwiseMax(0.0f);
    Matrix z = hidden * v.w2.transpose();
    z.rowwise() += v.b2;
    return Softmax::score(z, data);
  }

 private:
  int f_, c_, h_;
};

}  // namespace

std::size_t NumericModel::parameter_count() const {
  std::size_t n = 0;
  for (const auto& [name, count] : tensors_)
    n += count;
  return n;
}

std::unique_ptr<NumericModel> make_numeric_model(const std::string& name, int features, int classes,
                                                 int hidden) {
  if (features < 1 || classes < 2) {
    throw std::invalid_argument(
        fmt::format("numeric model: {} features, {} classes", features, classes));
  }
  fix_product_blocking();
  if (name == "softmax") return std::make_unique<Softmax>(features, classes);
  if (name == "mlp") {
    if (hidden < 1) throw std::invalid_argument("numeric model mlp: hidden must be >= 1");
    return std::make_unique<Mlp>(features, classes, hidden);
  }
  throw std::invalid_argument("unknown numeric model '" + name + "' (known: softmax, mlp)");
}

std::vector<std::string> numeric_model_names() {
  return {"softmax", "mlp"};
}

}  // namespace kf

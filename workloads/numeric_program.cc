#include "workloads/numeric_program.h"

#include <fmt/format.h>

#include <stdexcept>

#include "runtime/collectives.h"

namespace kf {

namespace {

BufferView view_of(std::vector<float>& v) {
  return BufferView::of(std::span<float>(v), DType::f32);
}

void scale(std::vector<float>& v, float by) {
  for (float& x : v)
    x *= by;
}

}  // namespace

void validate(const NumericOptions& o) {
  if (!o.model || !o.train || !o.test)
    throw std::invalid_argument("numeric: model and data needed");
  if (o.sync != "ssgd" && o.sync != "sma" && o.sync != "pair_avg" && o.sync != "ada_sgd") {
    throw std::invalid_argument("unknown optimizer '" + o.sync +
                                "' (known: ssgd, sma, pair_avg, ada_sgd)");
  }
  if (!(o.sma_alpha > 0 && o.sma_alpha <= 1))
    throw std::invalid_argument("sma alpha must be in (0, 1]");
  if (o.train->features != o.test->features)
    throw std::invalid_argument("train and test differ in features");
}

NumericProgram::NumericProgram(NumericOptions options, int rank, int size)
    : options_(std::move(options)),
      rank_(rank),
      size_(size),
      sampler_((validate(options_), options_.train->size()), rank, size, options_.seed),
      peers_(options_.seed * 7919u + static_cast<std::uint64_t>(rank)),
      gns_(options_.gns_ema) {
  if (auto own = options_.model->replica()) options_.model = std::move(own);
  params_ = options_.model->initial_parameters(options_.seed);
  grad_.assign(params_.size(), 0.0f);
  const std::size_t own = params_.size() * sizeof(float);
  if (options_.cost_bytes > own)
    padding_ = Buffer::phantom((options_.cost_bytes - own) / sizeof(float), DType::f32);
  optimizer_ = make_local_optimizer(options_.optimizer, params_.size());
}

void NumericProgram::start(Engine& engine, DoneCallback done) {
  // Everyone starts from rank 0's model.
  const auto v = view_of(params_);
  broadcast(engine, {.name = "model/init", .input = v, .output = v}, std::move(done));
}

bool NumericProgram::variance_step(std::int64_t step) const {
  return options_.variance_every > 0 && step % options_.variance_every == 0;
}

std::function<void()> NumericProgram::compute(std::int64_t step, int batch_per_worker) {
  batch_ = sampler_.next_batch(batch_per_worker);
  return [this, squares = variance_step(step)] {
    loss_ = options_.model->loss_and_gradient(params_, *options_.train, batch_, grad_);
    small_norm2_ = squared_norm(grad_);
    if (squares) {
      local_sq_.resize(grad_.size());
      for (std::size_t i = 0; i < grad_.size(); ++i)
        local_sq_[i] = grad_[i] * grad_[i];
    }
  };
}

void NumericProgram::communicate(const StepContext& ctx, DoneCallback done) {
  if (padding_.count() == 0) {
    synchronize(ctx, std::move(done));
    return;
  }
  // The stand-in's extra bytes travel beside the real ones; the step ends when both have.
  struct Join {
    int pending = 2;
    Status error;
    DoneCallback done;
  };
  auto join = std::make_shared<Join>(Join{.done = std::move(done)});
  const auto arrive = [join](Status s) {
    if (!s.ok() && join->error.ok()) join->error = s;
    if (--join->pending == 0) join->done(join->error);
  };
  const TimePoint begin = ctx.engine.executor().now();
  const BufferView pad = padding_.view();
  allreduce(ctx.engine, {.name = "grad/cost", .input = pad, .output = pad},
            [this, ctx, begin, arrive](Status s) {
              ctx.report("grad/cost", padding_.size_bytes(), begin, ctx.engine.executor().now());
              arrive(s);
            });
  synchronize(ctx, arrive);
}

void NumericProgram::synchronize(const StepContext& ctx, DoneCallback done) {
  evaluation_.reset();
  variance_.reset();
  const bool sma_phase =
      options_.sync == "sma" || (options_.sync == "ada_sgd" && ctx.step < options_.ada_switch_step);
  auto apply = [this, ctx, done](bool averaged) {
    return [this, ctx, done, averaged](Status s) {
      if (!s.ok()) {
        done(s);
        return;
      }
      monitors(ctx, averaged, [this, ctx, done](Status ms) {
        if (ms.ok()) finish_step(ctx);
        done(ms);
      });
    };
  };
  if (options_.sync == "pair_avg") {
    pair_average(ctx, apply(false));
  } else if (sma_phase) {
    average_models(ctx, apply(false));
  } else if (options_.sync == "ada_sgd" && ctx.step == options_.ada_switch_step) {
    // The switch: everyone takes rank 0's model, then synchronous SGD from here on.
    const auto v = view_of(params_);
    const TimePoint begin = ctx.engine.executor().now();
    broadcast(ctx.engine, {.name = "model/switch", .input = v, .output = v},
              [this, ctx, begin, next = apply(true)](Status s) {
                ctx.report("model/switch", params_.size() * 4, begin, ctx.engine.executor().now());
                if (!s.ok()) {
                  next(s);
                  return;
                }
                average_gradients(ctx, next);
              });
  } else {
    average_gradients(ctx, apply(true));
  }
}

void NumericProgram::average_gradients(const StepContext& ctx, Next next) {
  const auto v = view_of(grad_);
  const TimePoint begin = ctx.engine.executor().now();
  allreduce(ctx.engine, {.name = "grad/all", .input = v, .output = v},
            [this, ctx, begin, next](Status s) {
              ctx.report("grad/all", grad_.size() * 4, begin, ctx.engine.executor().now());
              if (s.ok()) scale(grad_, 1.0f / static_cast<float>(ctx.engine.size()));
              next(s);
            });
}

void NumericProgram::average_models(const StepContext& ctx, Next next) {
  scratch_ = params_;
  const auto v = view_of(scratch_);
  const TimePoint begin = ctx.engine.executor().now();
  allreduce(ctx.engine, {.name = "model/avg", .input = v, .output = v},
            [this, ctx, begin, next](Status s) {
              ctx.report("model/avg", scratch_.size() * 4, begin, ctx.engine.executor().now());
              if (s.ok()) {
                const auto a = static_cast<float>(options_.sma_alpha);
                const float inv = 1.0f / static_cast<float>(ctx.engine.size());
                for (std::size_t i = 0; i < params_.size(); ++i)
                  params_[i] = (1 - a) * params_[i] + a * scratch_[i] * inv;
              }
              next(s);
            });
}

void NumericProgram::pair_average(const StepContext& ctx, Next next) {
  const int n = ctx.engine.size();
  if (n == 1) {
    next(Status{});
    return;
  }
  std::uniform_int_distribution<int> pick(0, n - 2);
  int peer = pick(peers_);
  if (peer >= ctx.engine.rank()) ++peer;
  const TimePoint begin = ctx.engine.executor().now();
  request_blob(ctx.engine, {.peer = peer, .name = "model"},
               [this, ctx, begin, next](Status s, Blob blob) {
                 ctx.report("model/request", blob.bytes ? blob.bytes->size() : 0, begin,
                            ctx.engine.executor().now());
                 if (s.code() == ErrorCode::not_found) {
                   next(Status{});  // the peer has saved nothing yet: train alone this step
                   return;
                 }
                 if (s.ok() && blob.bytes->size() != params_.size() * 4) {
                   s = Status(ErrorCode::protocol,
                              fmt::format("pair averaging: the peer's model has {} bytes, ours {}",
                                          blob.bytes->size(), params_.size() * 4));
                 }
                 if (s.ok()) {
                   const auto* theirs = reinterpret_cast<const float*>(blob.bytes->data());
                   for (std::size_t i = 0; i < params_.size(); ++i)
                     params_[i] = 0.5f * (params_[i] + theirs[i]);
                 }
                 next(s);
               });
}

// The gradient noise scale needs the averaged gradient and the variance the sums of g and of
// g^2 over the workers: one extra allreduce carries what the optimizer did not already make.
void NumericProgram::monitors(const StepContext& ctx, bool gradients_averaged, Next next) {
  const int n = ctx.engine.size();
  const bool gns = options_.gns_every > 0 && ctx.step % options_.gns_every == 0 && n > 1;
  const bool variance = variance_step(ctx.step);
  if (!gns && !variance) {
    next(Status{});
    return;
  }
  const std::size_t p = grad_.size();
  const bool send_g = !gradients_averaged;
  scratch2_.clear();
  if (send_g) scratch2_.insert(scratch2_.end(), grad_.begin(), grad_.end());
  if (variance) scratch2_.insert(scratch2_.end(), local_sq_.begin(), local_sq_.end());
  const auto v = BufferView::of(std::span<float>(scratch2_), DType::f32);
  const TimePoint begin = ctx.engine.executor().now();
  allreduce(ctx.engine, {.name = "monitor/grad", .input = v, .output = v},
            [this, ctx, begin, next, gns, variance, send_g, n, p](Status s) {
              ctx.report("monitor/grad", scratch2_.size() * 4, begin, ctx.engine.executor().now());
              if (!s.ok()) {
                next(s);
                return;
              }
              // The sum of the workers' gradients.
              std::vector<float> sum;
              if (send_g) {
                sum.assign(scratch2_.begin(), scratch2_.begin() + static_cast<std::ptrdiff_t>(p));
              } else {
                sum = grad_;
                scale(sum, static_cast<float>(n));
              }
              if (gns) {
                std::vector<float> average = sum;
                scale(average, 1.0f / static_cast<float>(n));
                const double b_small = static_cast<double>(ctx.batch_per_worker);
                gns_.observe(small_norm2_, squared_norm(average), b_small, b_small * n);
              }
              if (variance) {
                const std::span<const float> squares(scratch2_.data() + (send_g ? p : 0), p);
                variance_ = gradient_variance(sum, squares, n);
              }
              next(Status{});
            });
}

void NumericProgram::finish_step(const StepContext& ctx) {
  optimizer_->step(params_, grad_, ctx.learning_rate);
  if (options_.sync == "pair_avg") {
    save_blob(ctx.engine, "model",
              ConstBufferView::of(std::span<const float>(params_), DType::f32));
  }
  if (options_.eval_every > 0 && (ctx.step + 1) % options_.eval_every == 0)
    evaluation_ = options_.model->evaluate(params_, *options_.test);
}

std::vector<BufferView> NumericProgram::state() {
  return {view_of(params_), BufferView::of(optimizer_->state(), DType::f32)};
}

void NumericProgram::resized(int rank, int size) {
  rank_ = rank;
  size_ = size;
  // A new shard of the same data, from the start of the epoch this worker was in.
  const std::int64_t epoch = sampler_.epoch();
  const ShardSampler fresh(options_.train->size(), rank, size, options_.seed);
  sampler_ = ShardSampler(options_.train->size(), rank, size, options_.seed,
                          static_cast<std::uint64_t>(epoch) * fresh.shard_size());
  peers_.seed(options_.seed * 7919u + static_cast<std::uint64_t>(rank) +
              1000003u * static_cast<std::uint64_t>(size));
}

void NumericProgram::values(std::map<std::string, double>& out) const {
  out["loss"] = loss_;
  if (evaluation_) {
    out["accuracy"] = evaluation_->accuracy;
    out["test_loss"] = evaluation_->loss;
  }
  if (const auto g = gns_.noise_scale()) out["gns"] = *g;
  if (variance_) out["grad_variance"] = *variance_;
}

}  // namespace kf

// Test harness for the in-process world: run one start function on every peer's loop and wait
// (bounded) for every completion; deterministic per-rank input values and serial references.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "real/inproc_world.h"
#include "runtime/buffer.h"
#include "runtime/collectives.h"
#include "runtime/half.h"

namespace kf::testing {

// Starts `start(engine, done)` on every live peer and waits for every `done`. A peer whose done
// never comes within `limit` yields a status with message "no completion" (the test fails on it).
inline std::vector<Status> run_on_all(InprocWorld& world,
                                      const std::function<void(Engine&, DoneCallback)>& start,
                                      std::chrono::seconds limit = std::chrono::seconds(120)) {
  const int n = world.size();
  std::vector<std::shared_ptr<std::promise<Status>>> promises;
  std::vector<std::future<Status>> futures;
  for (int r = 0; r < n; ++r) {
    promises.push_back(std::make_shared<std::promise<Status>>());
    futures.push_back(promises.back()->get_future());
  }
  for (int r = 0; r < n; ++r) {
    if (!world.alive(r)) continue;
    world.post(r, [p = promises[static_cast<std::size_t>(r)], &start](Engine& e) {
      start(e, [p](Status s) { p->set_value(std::move(s)); });
    });
  }
  std::vector<Status> out(static_cast<std::size_t>(n));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int r = 0; r < n; ++r) {
    if (!world.alive(r)) continue;
    auto& f = futures[static_cast<std::size_t>(r)];
    if (f.wait_until(deadline) == std::future_status::ready) {
      out[static_cast<std::size_t>(r)] = f.get();
    } else {
      out[static_cast<std::size_t>(r)] = Status(ErrorCode::timeout, "no completion (hang)");
    }
  }
  return out;
}

inline void expect_all_ok(const std::vector<Status>& statuses) {
  for (std::size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].to_string();
  }
}

// ---- values ----

// Input element i of rank r for a given op. Chosen so every result is exact in every dtype except
// avg's final division: small positive integers, and powers of two for prod.
inline double input_value(int r, std::size_t i, ReduceOp op, DType t) {
  if (op == ReduceOp::prod && is_floating(t)) {
    return std::ldexp(1.0, static_cast<int>((static_cast<std::size_t>(r) + i) % 3) - 1);
  }
  return 1.0 + static_cast<double>((static_cast<std::size_t>(r) * 5 + i * 3) % 7);
}

inline void store(BufferView b, std::size_t i, double v) {
  std::byte* p = b.data() + i * b.elem_size();
  switch (b.dtype()) {
    case DType::u8: {
      auto x = static_cast<std::uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DType::u16: {
      auto x = static_cast<std::uint16_t>(v);
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::u32: {
      auto x = static_cast<std::uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::u64: {
      auto x = static_cast<std::uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DType::i8: {
      auto x = static_cast<std::int8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DType::i16: {
      auto x = static_cast<std::int16_t>(v);
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::i32: {
      auto x = static_cast<std::int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::i64: {
      auto x = static_cast<std::int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DType::f16: {
      auto x = float_to_f16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::bf16: {
      auto x = float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::f32: {
      auto x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::f64:
      std::memcpy(p, &v, 8);
      break;
  }
}

// Floating types as double; integer types as their bit pattern zero-extended (compared exactly).
inline double load(ConstBufferView b, std::size_t i) {
  const std::byte* p = b.data() + i * b.elem_size();
  switch (b.dtype()) {
    case DType::f16: {
      std::uint16_t x;
      std::memcpy(&x, p, 2);
      return f16_to_float(x);
    }
    case DType::bf16: {
      std::uint16_t x;
      std::memcpy(&x, p, 2);
      return bf16_to_float(x);
    }
    case DType::f32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::f64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    default: {
      std::uint64_t x = 0;
      std::memcpy(&x, p, b.elem_size());
      return static_cast<double>(x);
    }
  }
}

// The serial reference of reducing input_value over `ranks` for element i, in the dtype's own
// arithmetic: integers wrap (computed mod 2^64, then truncated), floats in double.
inline double reference(const std::vector<int>& ranks, std::size_t i, ReduceOp op, DType t) {
  if (!is_floating(t)) {
    std::uint64_t acc = static_cast<std::uint64_t>(input_value(ranks[0], i, op, t));
    for (std::size_t k = 1; k < ranks.size(); ++k) {
      const auto v = static_cast<std::uint64_t>(input_value(ranks[k], i, op, t));
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg:
          acc += v;
          break;
        case ReduceOp::prod:
          acc *= v;
          break;
        case ReduceOp::min:
          acc = std::min(acc, v);
          break;
        case ReduceOp::max:
          acc = std::max(acc, v);
          break;
      }
    }
    const std::size_t bits = dtype_size(t) * 8;
    if (bits < 64) acc &= (std::uint64_t{1} << bits) - 1;
    return static_cast<double>(acc);
  }
  double acc = input_value(ranks[0], i, op, t);
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    const double v = input_value(ranks[k], i, op, t);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::avg) acc /= static_cast<double>(ranks.size());
  return acc;
}

inline double tolerance(DType t, ReduceOp op) {
  if (op != ReduceOp::avg) return 0.0;  // inputs are chosen so everything else is exact
  switch (t) {
    case DType::f16:
      return 1e-3;
    case DType::bf16:
      return 8e-3;
    case DType::f32:
      return 1e-6;
    default:
      return 1e-12;
  }
}

inline Buffer make_input(int rank, std::size_t count, DType t, ReduceOp op) {
  Buffer b(count, t);
  for (std::size_t i = 0; i < count; ++i)
    store(b.view(), i, input_value(rank, i, op, t));
  return b;
}

inline std::vector<int> all_ranks(int n) {
  std::vector<int> r(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    r[static_cast<std::size_t>(i)] = i;
  return r;
}

// The reference of every element, computed once and shared by all ranks' checks.
inline std::vector<double> reference_values(const std::vector<int>& ranks, std::size_t count,
                                            ReduceOp op, DType t) {
  std::vector<double> ref(count);
  for (std::size_t i = 0; i < count; ++i)
    ref[i] = reference(ranks, i, op, t);
  return ref;
}

// Compares `out` against precomputed reference values; reports the first mismatch.
inline ::testing::AssertionResult matches_values(ConstBufferView out,
                                                 const std::vector<double>& want, ReduceOp op) {
  if (out.count() != want.size()) {
    return ::testing::AssertionFailure() << "count " << out.count() << ", want " << want.size();
  }
  std::size_t bad = 0;
  std::string first;
  const double tol = tolerance(out.dtype(), op);
  for (std::size_t i = 0; i < out.count(); ++i) {
    const double got = load(out, i);
    const bool ok =
        tol == 0.0 ? got == want[i] : std::abs(got - want[i]) <= tol * std::abs(want[i]);
    if (!ok && bad++ == 0) {
      first = "element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " +
              std::to_string(want[i]);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << out.count() << " elements differ; first " << first;
}

inline ::testing::AssertionResult matches_reference(ConstBufferView out,
                                                    const std::vector<int>& ranks, ReduceOp op) {
  return matches_values(out, reference_values(ranks, out.count(), op, out.dtype()), op);
}

}  // namespace kf::testing

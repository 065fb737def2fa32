// Receives posted by operations (Operation::landing, Transport::Handlers::landing): an engine
// says where a ring's all-gather part belongs, takes it placed there without a copy, and drops
// one placed under the lease of an operation that has ended.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <mutex>
#include <vector>

#include "real/event_loop.h"
#include "runtime/collectives.h"
#include "runtime/engine.h"

namespace kf {
namespace {

// Keeps the engine's handlers and what it sends, for the test to play rank 1.
class RecordingTransport final : public Transport {
 public:
  void set_handlers(Handlers handlers) override { handlers_ = std::move(handlers); }
  void send(int destination, Message&& message) override {
    (void)destination;
    const std::lock_guard lock(mu_);
    sent_.push_back(std::move(message));
  }
  Handlers& handlers() { return handlers_; }
  std::vector<float> sent_values(std::uint32_t step) {
    const std::lock_guard lock(mu_);
    for (const Message& m : sent_) {
      if (m.header.step != step) continue;
      std::vector<float> v(m.payload.size() / sizeof(float));
      std::memcpy(v.data(), m.payload.data(), m.payload.size());
      return v;
    }
    return {};
  }

 private:
  Handlers handlers_;
  std::mutex mu_;
  std::vector<Message> sent_;
};

constexpr std::size_t kCount = 1u << 16;  // floats: one slice of two 128 KiB parts
constexpr std::size_t kPartBytes = kCount / 2 * sizeof(float);

MessageHeader piece(const std::string& name, std::uint32_t step) {
  MessageHeader h;
  h.kind = MessageKind::collective;
  h.name = name;
  h.chunk = 0;
  h.step = step;
  return h;
}

Message with_floats(MessageHeader header, float value) {
  std::vector<float> v(kCount / 2, value);
  Message m;
  m.header = std::move(header);
  m.payload = Payload::copy_of(reinterpret_cast<const std::byte*>(v.data()), kPartBytes);
  return m;
}

struct Rank0 {
  explicit Rank0(Duration timeout = std::chrono::seconds(30)) {
    EngineOptions options;
    options.strategy = StrategyName::ring_rs_ag;
    options.chunk_bytes = 1u << 20;
    options.timeout = timeout;
    loop.call([&] {
      // No sockets: the ports only name the workers.
      engine = std::make_unique<Engine>(ClusterSpec::local(2, 20000), 0, loop, transport, options);
    });
  }
  ~Rank0() {
    loop.call([&] { engine.reset(); });
  }
  // Starts "x" (rank 0's input all 1) and hands it rank 1's reduce-scatter part (all 2).
  std::future<Status> start_and_fold(std::vector<float>& in, std::vector<float>& out) {
    auto result = std::make_shared<std::promise<Status>>();
    auto future = result->get_future();
    loop.call([&] {
      allreduce(*engine,
                {.name = "x",
                 .input = ConstBufferView::of(std::span<const float>(in), DType::f32),
                 .output = BufferView::of(std::span<float>(out), DType::f32),
                 .op = ReduceOp::sum},
                [result](Status s) { result->set_value(std::move(s)); });
      // The reduce-scatter's arrival is folded with the input: it has no landing.
      EXPECT_EQ(transport.handlers().landing(1, piece("x", 0), kPartBytes).size, 0u);
      transport.handlers().on_message(1, with_floats(piece("x", 0), 2.0f));
    });
    return future;
  }

  EventLoop loop;
  RecordingTransport transport;
  std::unique_ptr<Engine> engine;
};

TEST(Landing, ARingsAllGatherPartIsTakenWhereItLanded) {
  Rank0 r;
  std::vector<float> in(kCount, 1.0f), out(kCount, 0.0f);
  auto done = r.start_and_fold(in, out);
  EXPECT_EQ(r.transport.sent_values(1), std::vector<float>(kCount / 2, 3.0f));  // part 1, summed
  r.loop.call([&] {
    // Another name, a step not due, a size that does not fit: nowhere.
    EXPECT_EQ(r.transport.handlers().landing(1, piece("y", 1), kPartBytes).size, 0u);
    EXPECT_EQ(r.transport.handlers().landing(1, piece("x", 0), kPartBytes).size, 0u);
    EXPECT_EQ(r.transport.handlers().landing(1, piece("x", 1), kPartBytes - 4).size, 0u);
    Landing l = r.transport.handlers().landing(1, piece("x", 1), kPartBytes);
    ASSERT_EQ(l.size, kPartBytes);
    EXPECT_EQ(l.at, reinterpret_cast<std::byte*>(out.data()));  // part 0 of the output
    const std::vector<float> part0(kCount / 2, 3.0f);
    std::memcpy(l.at, part0.data(), kPartBytes);
    Message m;
    m.header = piece("x", 1);
    m.payload = Payload::placed(l.at, kPartBytes, l.lease);
    r.transport.handlers().on_message(1, std::move(m));
    EXPECT_FALSE(l.lease->open);  // the operation finished with it
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
  EXPECT_EQ(out, std::vector<float>(kCount, 3.0f));
  EXPECT_EQ(r.loop.call([&] { return r.engine->late_placed_messages(); }), 0u);
}

TEST(Landing, APartPlacedForAnOperationThatTimedOutIsDropped) {
  Rank0 r(std::chrono::milliseconds(200));
  std::vector<float> in(kCount, 1.0f), out(kCount, 0.0f);
  auto done = r.start_and_fold(in, out);
  const Landing l =
      r.loop.call([&] { return r.transport.handlers().landing(1, piece("x", 1), kPartBytes); });
  ASSERT_EQ(l.size, kPartBytes);
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(done.get().code(), ErrorCode::timeout);
  EXPECT_FALSE(l.lease->open);  // a transport writes nothing more there
  r.loop.call([&] {
    // A new operation of the same name is not handed the old one's part either.
    allreduce(*r.engine,
              {.name = "x",
               .input = ConstBufferView::of(std::span<const float>(in), DType::f32),
               .output = BufferView::of(std::span<float>(out), DType::f32),
               .op = ReduceOp::sum},
              [](Status) {});
    Message m;
    m.header = piece("x", 1);
    m.payload = Payload::placed(l.at, kPartBytes, l.lease);
    r.transport.handlers().on_message(1, std::move(m));
    EXPECT_EQ(r.engine->late_placed_messages(), 1u);
    EXPECT_EQ(r.engine->mailbox_size(), 0u);
  });
}

}  // namespace
}  // namespace kf

// Gather: every rank's buffer lands, in rank order, in the root's output. Non-roots send their
// chunks straight to the root; the root copies each where it belongs.
#pragma once

#include <vector>

#include "runtime/buffer.h"
#include "runtime/chunking.h"
#include "runtime/operation.h"

namespace kf {

class Gather final : public Operation {
 public:
  // At the root, output holds n blocks of input.count() elements; elsewhere it is not touched.
  Gather(Engine& engine, std::string name, ConstBufferView input, BufferView output, int root,
         DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;
  // Every block: only copied into the output.
  std::span<std::byte> landing(int source, const MessageHeader& header) override;

 private:
  BufferView block(int source, std::size_t chunk) const;  // where `source`'s chunk goes
  int n_;
  int rank_;
  int root_;
  ConstBufferView input_;
  BufferView output_;
  std::vector<Range> chunks_;
  std::vector<bool> arrived_;  // root: [source * chunks + chunk]
  std::size_t remaining_ = 0;
};

}  // namespace kf

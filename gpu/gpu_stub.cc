// The GPU world in a build without CUDA (KF_WITH_CUDA=OFF): every entry point says so.
#include <stdexcept>

#include "gpu/gpu.h"
#include "gpu/gpu_step_backend.h"

namespace kf {

namespace {
constexpr const char* kNoCuda =
    "built without CUDA (KF_WITH_CUDA=OFF): reconfigure on a machine with nvcc, cuBLAS and NCCL";
}

bool gpu_built_with_cuda() {
  return false;
}
std::optional<std::string> gpu_unavailable() {
  return std::string(kNoCuda);
}
int gpu_device_count() {
  return 0;
}
int gpu_default_device(int) {
  return 0;
}
Status gpu_stream_synchronize(int, std::uintptr_t) {
  return Status(ErrorCode::device, kNoCuda);
}

std::unique_ptr<GpuContext> GpuContext::open(int, GpuOptions) {
  throw std::runtime_error(kNoCuda);
}

std::unique_ptr<StepProgram> make_gpu_gradient_program(const GpuProgramOptions&, int, int) {
  throw std::runtime_error(kNoCuda);
}

}  // namespace kf

// A stand-in worker for kfrun -w tests (kfrun_elastic_test.cc): no training, only the elastic
// protocol's steps, driven through the config server like a real worker. It prints what kfrun
// gave it, leaves a marker file DIR/HOST_PORT.started, and then, by MODE:
//   grow-shrink  rank 0 of version 0 PUTs a cluster of 4; once all 4 have started, one of 3.
//                Every worker waits for version 2: dropped -> "detached", exit 0; else exit 0.
//   stubborn     as grow-shrink, but the dropped worker ignores the drop (sleeps until killed).
//   grow-fail    rank 0 of version 0 PUTs a cluster of 4; the 4th exits 5; others wait.
//   fail         rank 1 exits 3; the others wait.
//   put-and-exit rank 0 of version 0 PUTs a cluster of 4 and exits 0 at once, as does everyone
//                (so kfrun may see the new version only after its workers are gone).
//   wait         everyone waits (until kfrun stops them).
//   drop-readd   2 workers on 2 hosts: rank 0 of version 0 PUTs a cluster of 1 and at once one
//                of 2 again (the dropped worker back), then leaves DIR/go; the other worker
//                exits 0 as soon as DIR/go exists, as one told to leave at version 1 would
//                (so that its runner sees it gone before its watcher may have seen either
//                version); started again for version 2 it leaves DIR/HOST_PORT.rejoined and
//                exits 0; rank 0 waits for that marker.
//   drop-readd-later  as drop-readd, but DIR/go comes after version 1 and version 2 1 s later
//                (the runner sees its host left out of the latest cluster for a while).
// Waits are bounded (exit 4 when the expected version never comes).
//   elastic_fake_worker MODE DIR
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "launch/config_client.h"
#include "launch/launch_plan.h"
#include "launch/worker_env.h"
#include "runtime/cluster_spec.h"

namespace {

using namespace std::chrono_literals;

std::string env(const char* key) {
  const char* v = std::getenv(key);
  return v != nullptr ? v : "";
}

std::string marker(const std::string& dir, const kf::PeerID& id) {
  return fmt::format("{}/{}_{}.started", dir, id.host, id.port);
}

int slots_on(const std::string& host_slots, const std::string& host) {
  for (const auto& h : kf::parse_host_list(host_slots))
    if (h.ip == host) return h.slots;
  return 0;
}

// Waits (20 s at most) for `path` to exist, looking every `every`.
bool wait_for_file(const std::string& path,
                   std::chrono::milliseconds every = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

int drop_readd(const kf::ConfigClient& client, const kf::WorkerConfig& config,
               const std::string& dir, bool joining, bool later) {
  const auto self = config.cluster.worker(config.rank);
  if (joining) {
    if (std::FILE* f = std::fopen((marker(dir, self) + ".rejoined").c_str(), "w"); f != nullptr)
      std::fclose(f);
    std::printf("rejoined at version %llu\n",
                static_cast<unsigned long long>(config.cluster.version()));
    return 0;
  }
  if (config.rank != 0) {
    if (!wait_for_file(dir + "/go", 1ms)) return 4;
    std::printf("told to leave: exiting\n");
    return 0;
  }
  for (const auto& id : config.cluster.workers())
    if (!wait_for_file(marker(dir, id))) return 4;
  const auto port_begin = kf::parse_port_range(env("KUNGFU_PORT_RANGE")).begin;
  const auto go = [&dir] {
    if (std::FILE* f = std::fopen((dir + "/go").c_str(), "w"); f != nullptr) std::fclose(f);
  };
  const auto v1 = client.put(config.cluster.resized(1, port_begin, 1));
  if (later) {
    go();
    std::this_thread::sleep_for(1s);
  }
  const auto v2 = client.put(v1.resized(2, port_begin, 1));
  if (!later) go();
  std::printf("put versions %llu and %llu: %s\n", static_cast<unsigned long long>(v1.version()),
              static_cast<unsigned long long>(v2.version()), kf::join_peers(v2.workers()).c_str());
  std::fflush(stdout);
  if (!wait_for_file(marker(dir, v2.worker(1)) + ".rejoined")) {
    std::printf("%s was never started again\n", v2.worker(1).to_string().c_str());
    return 4;
  }
  std::printf("the re-added worker started again\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: elastic_fake_worker MODE DIR\n");
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  try {
    const auto config = kf::worker_config_from(kf::current_environment());
    const auto self = config.cluster.worker(config.rank);
    const std::string peers = env("KUNGFU_INIT_PEERS");
    const auto version = config.cluster.version();
    const bool joining = env("KUNGFU_JOINING") == "1";
    std::printf(
        "start self=%s version=%llu joining=%d elastic=%s host_slots=%s port_range=%s "
        "peers=%s\n",
        self.to_string().c_str(), static_cast<unsigned long long>(version), joining ? 1 : 0,
        env("KUNGFU_ELASTIC").c_str(), env("KUNGFU_HOST_SLOTS").c_str(),
        env("KUNGFU_PORT_RANGE").c_str(), peers.c_str());
    std::fflush(stdout);
    if (std::FILE* f = std::fopen(marker(dir, self).c_str(), "w"); f != nullptr) std::fclose(f);

    const kf::ConfigClient client(env("KUNGFU_CONFIG_SERVER"), env("KUNGFU_SECRET"), 2s);
    const bool rank0 = config.rank == 0;
    const auto port_begin = kf::parse_port_range(env("KUNGFU_PORT_RANGE")).begin;
    const int slots = slots_on(env("KUNGFU_HOST_SLOTS"), self.host);
    const bool grow = mode == "grow-shrink" || mode == "stubborn" || mode == "grow-fail" ||
                      mode == "put-and-exit";

    if (mode == "drop-readd" || mode == "drop-readd-later")
      return drop_readd(client, config, dir, joining, mode == "drop-readd-later");
    if (mode == "fail" && config.rank == 1) {
      std::printf("rank 1 failing on purpose\n");
      return 3;
    }
    if (grow && rank0 && version == 0) {
      const auto v1 =
          client.put(kf::wait_for_version(client, 0, 10s).resized(4, port_begin, slots));
      std::printf("put version %llu: %s\n", static_cast<unsigned long long>(v1.version()),
                  kf::join_peers(v1.workers()).c_str());
      std::fflush(stdout);
      if (mode == "grow-shrink" || mode == "stubborn") {
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        for (const auto& id : v1.workers()) {
          while (!std::filesystem::exists(marker(dir, id))) {
            if (std::chrono::steady_clock::now() > deadline) {
              std::printf("%s never started\n", id.to_string().c_str());
              return 4;
            }
            std::this_thread::sleep_for(20ms);
          }
        }
        const auto v2 = client.put(v1.resized(3, port_begin, slots));
        std::printf("put version %llu: %s\n", static_cast<unsigned long long>(v2.version()),
                    kf::join_peers(v2.workers()).c_str());
        std::fflush(stdout);
      }
    }
    if (mode == "grow-fail" && joining && config.rank == config.cluster.size() - 1) {
      std::printf("joined worker failing on purpose\n");
      return 5;
    }
    if (mode == "put-and-exit") return 0;
    // Wait for the final version (2 when growing and shrinking; none otherwise: wait until
    // kfrun stops us).
    const std::uint64_t final_version = mode == "grow-shrink" || mode == "stubborn" ? 2 : 1000;
    const auto last = kf::wait_for_version(client, final_version, 30s);
    if (!last.rank_of(self)) {
      if (mode == "stubborn") {
        std::printf("dropped at version %llu, staying anyway\n",
                    static_cast<unsigned long long>(last.version()));
        std::fflush(stdout);
        std::this_thread::sleep_for(60s);
        return 6;
      }
      std::printf("detached at version %llu\n", static_cast<unsigned long long>(last.version()));
      return 0;
    }
    std::printf("done at version %llu as rank %d of %d\n",
                static_cast<unsigned long long>(last.version()), *last.rank_of(self), last.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "elastic_fake_worker: %s\n", e.what());
    return 4;
  }
}

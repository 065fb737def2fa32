// Fuzzes the scenario reader (sim/scenario/: parse_scenario, the strict YAML reader under it):
// what kfsim reads from a user's file and --set overrides. Input: YAML text; each leading line
// "#set KEY.PATH=VALUE" (a comment to YAML) is also passed as an override, as kfsim's --set would.
//
// Contract checked (beyond no crash, no sanitizer report, no hang):
//   - a bad file or override is refused with kf::ScenarioError, and nothing else, whose text
//     starts with the file's name ("fuzz.yaml:LINE:COL: ..." or "fuzz.yaml: ...") or, for an
//     override, with "--set"; its line is 0 (unknown) or within the text;
//   - a scenario it accepts is usable: its topology builds (checked for up to 256 worker slots,
//     to keep each run short), and each variant is itself a validated scenario.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/scenario.h"
#include "tests/fuzz/fuzz_check.h"

namespace kf::fuzz {
namespace {

const std::string kFile = "fuzz.yaml";
constexpr std::string_view kSet = "#set ";

std::vector<std::string> overrides_of(std::string_view text) {
  std::vector<std::string> out;
  while (text.starts_with(kSet)) {
    const auto end = text.find('\n');
    out.emplace_back(
        text.substr(kSet.size(), end == std::string_view::npos ? text.npos : end - kSet.size()));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

std::int64_t lines_in(std::string_view text) {
  std::int64_t n = 1;
  for (const char c : text)
    n += c == '\n' || c == '\r';  // YAML counts a lone CR as a line break too
  return n;
}

void check_error(const ScenarioError& e, std::string_view text, bool has_overrides) {
  const std::string_view what = e.what();
  const bool names_file = what.starts_with(kFile + ":") || what.starts_with(kFile + " ");
  const bool names_set = has_overrides && what.starts_with("--set");
  KF_FUZZ_CHECK(names_file || names_set,
                std::string("error names neither the file nor --set: ") + e.what());
  KF_FUZZ_CHECK(e.line() >= 0 && e.line() <= lines_in(text) && e.column() >= 0,
                "error points outside the text (line " + std::to_string(e.line()) + " of " +
                    std::to_string(lines_in(text)) + "): " + e.what());
}

void check_usable(const Scenario& sc) {
  const auto& t = sc.topology;
  const std::int64_t hosts =
      t.kind == TopologyConfig::Kind::star ? t.hosts : std::int64_t{t.leaves} * t.hosts_per_leaf;
  if (hosts * t.workers_per_host <= 256) {
    try {
      (void)build_topology(t);
    } catch (const std::exception& e) {
      broken(std::string("a validated scenario's topology does not build: ") + e.what());
    }
  }
  for (const auto& v : sc.variants) {
    KF_FUZZ_CHECK(v.scenario != nullptr, "variant " + v.name + " has no scenario");
    KF_FUZZ_CHECK(v.scenario->variants.empty(), "variant " + v.name + " has variants itself");
  }
}

}  // namespace
}  // namespace kf::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kf::fuzz;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto overrides = overrides_of(text);
  try {
    const kf::Scenario sc = kf::parse_scenario(text, kFile, overrides);
    check_usable(sc);
  } catch (const kf::ScenarioError& e) {
    check_error(e, text, !overrides.empty());
  } catch (const std::exception& e) {
    unexpected(e);  // parse_scenario promises ScenarioError only
  }
  return 0;
}

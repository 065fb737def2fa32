// What every fuzz target shares: how a broken contract is reported. A target checks the contract
// of the code it drives (what it may throw, what a result must satisfy) and aborts on a breach,
// so libFuzzer saves the input as a reproducer; crashes and sanitizer reports need no check.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

namespace kf::fuzz {

// Reports `what` and aborts (libFuzzer catches the abort and writes the input out).
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz contract broken: %s\n", what.c_str());
  std::abort();
}

// For the catch-all after the exceptions a contract allows: names the unexpected one.
[[noreturn]] inline void unexpected(const std::exception& e) {
  broken(std::string("unexpected exception ") + typeid(e).name() + ": " + e.what());
}

}  // namespace kf::fuzz

// Checks a contract; `what` (a std::string expression) is only built on failure.
#define KF_FUZZ_CHECK(cond, what)        \
  do {                                   \
    if (!(cond)) kf::fuzz::broken(what); \
  } while (0)

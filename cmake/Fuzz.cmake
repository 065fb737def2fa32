# KF_FUZZ=ON builds the libFuzzer targets under tests/fuzz (docs/testing.md, Fuzzing). Clang only:
# the targets link -fsanitize=fuzzer (libFuzzer's main and its coverage callbacks), and everything
# they link is compiled with -fsanitize=fuzzer-no-link so that coverage of the project's own code
# guides the fuzzer. It implies KF_SANITIZE=address,undefined (cmake/Sanitizers.cmake applies it
# to every target), so a fuzz build is a sanitizer build: no Python package, no mimalloc. Only the
# targets `fuzz_*` (and the libraries they need) are meant to be built in such a tree.
option(KF_FUZZ "Build the libFuzzer targets under tests/fuzz (clang; implies ASan + UBSan)" OFF)
if(KF_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KF_FUZZ=ON needs clang (CXX=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(NOT KF_SANITIZE)
    set(KF_SANITIZE "address,undefined")
  elseif(NOT KF_SANITIZE MATCHES "address")
    message(FATAL_ERROR "KF_FUZZ=ON runs with ASan; KF_SANITIZE=${KF_SANITIZE} cannot go with it")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>)
  message(STATUS "libFuzzer targets (KF_FUZZ): ON")
endif()

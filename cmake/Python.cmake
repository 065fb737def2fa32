# The Python package. Python is Debian's /usr/bin/python3 (the one that sees Debian's
# python3-numpy and python3-torch), unless Python3_EXECUTABLE says otherwise. The extension
# modules share one runtime (libkungfu_runtime.so), built from the same static libraries as the
# programs, so those are compiled as position-independent code when the package is built.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the kungfu package is built for")
endif()
find_package(Python3 3.9 QUIET COMPONENTS Interpreter Development.Module)
set(_kf_python_found OFF)
if(Python3_FOUND)
  find_package(pybind11 2.6 CONFIG QUIET)
  if(pybind11_FOUND)
    set(_kf_python_found ON)
  endif()
endif()
# Not in sanitizer builds: an instrumented extension cannot load into an uninstrumented Python.
if(KF_SANITIZE)
  set(_kf_python_found OFF)
endif()
option(KF_WITH_PYTHON "Build the kungfu Python package" ${_kf_python_found})
if(KF_WITH_PYTHON AND NOT _kf_python_found)
  message(FATAL_ERROR "KF_WITH_PYTHON=ON but Python 3 (${Python3_EXECUTABLE}) with its headers or "
                      "pybind11 was not found (apt-get install python3-dev pybind11-dev)")
endif()

if(KF_WITH_PYTHON)
  # libtorch for kungfu.torch's torch.distributed backend: Debian's libtorch-dev, or the one a pip
  # torch ships (Torch_DIR=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch).
  if(NOT DEFINED Torch_DIR)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c
                            "import torch.utils; print(torch.utils.cmake_prefix_path)"
                    OUTPUT_VARIABLE _kf_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET RESULT_VARIABLE _kf_torch_rc)
    if(_kf_torch_rc EQUAL 0 AND EXISTS "${_kf_torch_prefix}/Torch")
      set(Torch_DIR "${_kf_torch_prefix}/Torch")
    endif()
  endif()
  find_package(Torch QUIET)
  set(_kf_torch_default ${Torch_FOUND})
  option(KF_WITH_TORCH "Build kungfu.torch's torch.distributed backend (libtorch)" ${_kf_torch_default})
  if(KF_WITH_TORCH AND NOT Torch_FOUND)
    message(FATAL_ERROR "KF_WITH_TORCH=ON but libtorch was not found (apt-get install libtorch-dev)")
  endif()
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  # Position-independent code may not assume its own functions are the ones called; this lets the
  # compiler inline them as in a plain build (the programs link the same static libraries).
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition>)
  message(STATUS "Python package (KF_WITH_PYTHON): ON (${Python3_EXECUTABLE}, "
                 "Python ${Python3_VERSION}, pybind11 ${pybind11_VERSION}); "
                 "kungfu.torch backend (KF_WITH_TORCH): ${KF_WITH_TORCH}")
else()
  message(STATUS "Python package (KF_WITH_PYTHON): OFF")
endif()

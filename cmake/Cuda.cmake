# The GPU world: CUDA kernels, NCCL and cuBLAS under gpu/. KF_WITH_CUDA is on
# when nvcc, the CUDA toolkit (cudart, cuBLAS) and NCCL are found; /usr/local/cuda is looked at
# first. Without a GPU everything still builds and links; GPU tests skip at run time.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
endif()
include(CheckLanguage)
check_language(CUDA)
set(_kf_cuda_found OFF)
if(CMAKE_CUDA_COMPILER)
  get_filename_component(_kf_cuda_bin "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  get_filename_component(_kf_cuda_root "${_kf_cuda_bin}" DIRECTORY)
  set(CUDAToolkit_ROOT "${_kf_cuda_root}")
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} "${_kf_cuda_root}/include")
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} "${_kf_cuda_root}/lib64")
  if(CUDAToolkit_FOUND AND TARGET CUDA::cublas AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_kf_cuda_found ON)
  endif()
endif()
option(KF_WITH_CUDA "Build the GPU world (CUDA kernels, NCCL, cuBLAS)" ${_kf_cuda_found})
if(KF_WITH_CUDA AND NOT _kf_cuda_found)
  message(FATAL_ERROR "KF_WITH_CUDA=ON but nvcc, the CUDA toolkit (cudart, cuBLAS) or NCCL was not "
                      "found (CMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER}, NCCL_LIBRARY=${NCCL_LIBRARY})")
endif()
if(KF_WITH_CUDA)
  # Ampere and Hopper machine code, plus Hopper PTX for anything newer: two device passes keep CI's
  # compile time modest.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
  endif()
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
  endif()
  enable_language(CUDA)
  # The kernels are C++17 (CMake 3.25 knows no C++20 flag for nvcc 13); they include only
  # runtime/dtype.h and runtime/reduce.h, which are C++17-clean.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  message(STATUS "GPU world (KF_WITH_CUDA): ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${NCCL_LIBRARY})")
else()
  message(STATUS "GPU world (KF_WITH_CUDA): OFF")
endif()

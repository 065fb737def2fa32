# KF_SANITIZE=address,undefined -> ASan + UBSan; KF_SANITIZE=thread -> TSan. Applied to everything.
if(KF_SANITIZE)
  set(_kf_san_flags -fsanitize=${KF_SANITIZE} -fno-omit-frame-pointer -g)
  if(KF_SANITIZE MATCHES "undefined")
    list(APPEND _kf_san_flags -fno-sanitize-recover=undefined)
  endif()
  # C/C++ only: nvcc (the GPU kernels) takes no -fsanitize.
  foreach(_kf_flag IN LISTS _kf_san_flags)
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:${_kf_flag}>)
  endforeach()
  add_link_options(-fsanitize=${KF_SANITIZE})
  message(STATUS "Sanitizers: ${KF_SANITIZE}")
endif()

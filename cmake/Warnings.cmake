# Warnings are errors in our own code. Generated code (protobuf) opts out per target.
function(kf_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor
    # Options structs are meant to be filled with designated initializers, leaving defaults out.
    -Wno-missing-field-initializers)
endfunction()

# Warnings and code generation shared by every ringtrain target: call ringtrain_target_options(t).
set(RINGTRAIN_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
                       -Wcast-align -Wimplicit-fallthrough -Wmissing-declarations)
# GCC 12 reports false -Wrestrict warnings inside libstdc++'s std::string at -O3 (GCC bugs 105329
# and 105651, fixed in 13); they would fail -Werror builds on Debian 12's compiler.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND RINGTRAIN_WARNINGS -Wno-restrict)
endif()
if(RINGTRAIN_WERROR)
  list(APPEND RINGTRAIN_WARNINGS -Werror)
endif()

# The flags above are the C++ compiler's: they reach C++ sources only, never nvcc (CUDA sources
# get RINGTRAIN_CUDA_FLAGS through ringtrain_cuda_target_options).
function(ringtrain_target_options target)
  target_compile_options(${target} PRIVATE
                         "$<$<COMPILE_LANGUAGE:CXX>:${RINGTRAIN_WARNINGS}>"
                         # `#pragma omp simd` without the OpenMP runtime.
                         $<$<COMPILE_LANGUAGE:CXX>:-fopenmp-simd>)
  if(RINGTRAIN_ARCH)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=${RINGTRAIN_ARCH}>)
  endif()
  # Whole-repository includes: #include "collectives/communicator.h".
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
endfunction()

# nvcc's flags for the .cu files of a target (GPU builds only): the host compiler's warnings
# through -Xcompiler, nvcc's own warnings, and both as errors with RINGTRAIN_WERROR.
set(RINGTRAIN_CUDA_FLAGS -Xcompiler=-Wall,-Wextra)
if(RINGTRAIN_WERROR)
  list(APPEND RINGTRAIN_CUDA_FLAGS -Werror=all-warnings -Xcompiler=-Werror)
endif()

function(ringtrain_cuda_target_options target)
  ringtrain_target_options(${target})
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${RINGTRAIN_CUDA_FLAGS}>")
endfunction()

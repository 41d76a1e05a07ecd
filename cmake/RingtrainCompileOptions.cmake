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

function(ringtrain_target_options target)
  target_compile_options(${target} PRIVATE ${RINGTRAIN_WARNINGS}
                                           # `#pragma omp simd` without the OpenMP runtime.
                                           -fopenmp-simd)
  if(RINGTRAIN_ARCH)
    target_compile_options(${target} PRIVATE -march=${RINGTRAIN_ARCH})
  endif()
  # Whole-repository includes: #include "collectives/communicator.h".
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# Finds every library ringtrain uses and records what was found for the configure summary.
# Required: MPI, Boost.Program_options, fmt, nlohmann_json (and GoogleTest with the tests).
# Eigen, HDF5, zlib and PCRE2 are required by models/ and data/, protobuf by storage/, which
# check for them.
# CUDA and NCCL are optional (RINGTRAIN_CUDA).

# Only the MPI C API is used; skip the deprecated C++ bindings.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI REQUIRED COMPONENTS CXX)
set(RINGTRAIN_MPI_LIBRARY "unknown MPI")
if(MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpi_version_text
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX MATCH "^[^\n]*" _mpi_first_line "${_mpi_version_text}")
  if(_mpi_first_line MATCHES "\\((Open MPI|OpenRTE)\\) ([0-9.]+)")
    set(RINGTRAIN_MPI_LIBRARY "Open MPI ${CMAKE_MATCH_2}")
    set(RINGTRAIN_MPI_IS_OPENMPI ON)
  elseif(_mpi_version_text MATCHES "HYDRA.*Version: +([0-9.a-z]+)")
    set(RINGTRAIN_MPI_LIBRARY "MPICH (Hydra ${CMAKE_MATCH_1})")
  elseif(_mpi_first_line)
    set(RINGTRAIN_MPI_LIBRARY "${_mpi_first_line}")
  endif()
endif()

find_package(Boost 1.71 REQUIRED COMPONENTS program_options)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Eigen3 3.3 QUIET NO_MODULE)
find_package(ZLIB QUIET)
find_package(HDF5 QUIET COMPONENTS C)
find_package(Protobuf QUIET)
# PCRE2 (8-bit) for the GPT-2 tokenizer's pre-tokenisation pattern, found through pkg-config
# (Debian's libpcre2-dev ships no CMake package): PkgConfig::PCRE2.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
endif()
if(RINGTRAIN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# ---- BLAS for Eigen's matrix products (RINGTRAIN_BLAS) ---------------------------------------
set(RINGTRAIN_BLAS_LIBRARY "")
if(RINGTRAIN_BLAS STREQUAL "AUTO" OR RINGTRAIN_BLAS STREQUAL "openblas")
  # The serial build only: the pthread one would start threads of its own in every rank.
  find_library(RINGTRAIN_OPENBLAS_SERIAL NAMES openblas
               PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-serial NO_DEFAULT_PATH)
  if(RINGTRAIN_OPENBLAS_SERIAL)
    set(RINGTRAIN_BLAS_LIBRARY "${RINGTRAIN_OPENBLAS_SERIAL}")
  elseif(RINGTRAIN_BLAS STREQUAL "openblas")
    message(FATAL_ERROR "RINGTRAIN_BLAS=openblas but no serial OpenBLAS found "
                        "(Debian: apt-get install libopenblas-serial-dev)")
  endif()
elseif(NOT RINGTRAIN_BLAS STREQUAL "OFF")
  message(FATAL_ERROR "RINGTRAIN_BLAS='${RINGTRAIN_BLAS}': expected AUTO, openblas or OFF")
endif()

# ---- CUDA and NCCL --------------------------------------------------------------------------
set(RINGTRAIN_HAVE_CUDA OFF)
set(RINGTRAIN_CUDA_STATUS "")
if(RINGTRAIN_CUDA STREQUAL "OFF")
  set(RINGTRAIN_CUDA_STATUS "skipped: RINGTRAIN_CUDA=OFF")
else()
  find_package(CUDAToolkit QUIET)
  find_package(NCCL QUIET)
  if(CUDAToolkit_FOUND AND NCCL_FOUND)
    set(RINGTRAIN_HAVE_CUDA ON)
    set(RINGTRAIN_CUDA_STATUS "CUDA ${CUDAToolkit_VERSION} and NCCL ${NCCL_VERSION} found")
  else()
    set(_missing "")
    if(NOT CUDAToolkit_FOUND)
      list(APPEND _missing "CUDA toolkit (set CUDAToolkit_ROOT)")
    endif()
    if(NOT NCCL_FOUND)
      list(APPEND _missing "NCCL (set NCCL_ROOT)")
    endif()
    list(JOIN _missing " and " _missing)
    set(RINGTRAIN_CUDA_STATUS "skipped: ${_missing} not found")
    if(RINGTRAIN_CUDA STREQUAL "ON")
      message(FATAL_ERROR "RINGTRAIN_CUDA=ON but ${_missing} not found")
    endif()
  endif()
endif()
message(STATUS "ringtrain GPU path: ${RINGTRAIN_CUDA_STATUS}")

# The model kernels (models/cuda/*.cu) need the CUDA language: nvcc from the toolkit that was
# found, with the C++ compiler as its host compiler. The architectures: RINGTRAIN_CUDA_ARCHITECTURES
# ("80;90", "native" for the build machine's GPUs), else CMAKE_CUDA_ARCHITECTURES, else every one
# the nvcc lists from 7.0 up (cmake/RingtrainCudaArchitectures.cmake). Enabled here, at the top
# level, because it must be enabled in the directory common to every target that compiles or
# links CUDA code.
set(RINGTRAIN_CUDA_ARCHITECTURES "" CACHE STRING
    "GPU architectures of the CUDA kernels (empty: every one the found nvcc supports from 7.0 up)")
if(RINGTRAIN_HAVE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
  endif()
  if(NOT CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
  endif()
  if(RINGTRAIN_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "${RINGTRAIN_CUDA_ARCHITECTURES}" CACHE STRING
        "GPU architectures of the CUDA kernels" FORCE)
  elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    include(RingtrainCudaArchitectures)
    ringtrain_default_cuda_architectures("${CMAKE_CUDA_COMPILER}" _ringtrain_cuda_architectures)
    set(CMAKE_CUDA_ARCHITECTURES "${_ringtrain_cuda_architectures}" CACHE STRING
        "GPU architectures of the CUDA kernels")
  endif()
  enable_language(CUDA)
  # C++17: CMake 3.25 knows no C++20 flag for nvcc, and the kernels need nothing newer.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
endif()

function(_ringtrain_found_line label found version)
  if(found)
    message(STATUS "  ${label}${version}")
  else()
    message(STATUS "  ${label}not found")
  endif()
endfunction()

function(ringtrain_print_summary)
  message(STATUS "")
  message(STATUS "ringtrain ${PROJECT_VERSION} configuration")
  message(STATUS "  build type     : ${CMAKE_BUILD_TYPE}, -march=${RINGTRAIN_ARCH}, warnings as errors: ${RINGTRAIN_WERROR}")
  message(STATUS "  compiler       : ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
  message(STATUS "  MPI            : ${RINGTRAIN_MPI_LIBRARY} (MPI standard ${MPI_CXX_VERSION}), launcher ${MPIEXEC_EXECUTABLE}")
  _ringtrain_found_line("CUDA           : " "${CUDAToolkit_FOUND}" "${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR})")
  _ringtrain_found_line("NCCL           : " "${NCCL_FOUND}" "${NCCL_VERSION} (${NCCL_LIBRARY})")
  message(STATUS "  GPU path       : ${RINGTRAIN_CUDA_STATUS}")
  if(RINGTRAIN_HAVE_CUDA)
    message(STATUS "  CUDA kernels   : nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  endif()
  _ringtrain_found_line("Eigen          : " "${Eigen3_FOUND}" "${Eigen3_VERSION}")
  if(RINGTRAIN_BLAS_LIBRARY)
    message(STATUS "  matrix products: OpenBLAS, serial (${RINGTRAIN_BLAS_LIBRARY})")
  else()
    message(STATUS "  matrix products: Eigen's own kernels (RINGTRAIN_BLAS=${RINGTRAIN_BLAS})")
  endif()
  _ringtrain_found_line("HDF5           : " "${HDF5_FOUND}" "${HDF5_VERSION}")
  _ringtrain_found_line("zlib           : " "${ZLIB_FOUND}" "${ZLIB_VERSION_STRING}")
  _ringtrain_found_line("PCRE2          : " "${PCRE2_FOUND}" "${PCRE2_VERSION}")
  _ringtrain_found_line("protobuf       : " "${Protobuf_FOUND}" "${Protobuf_VERSION} (${Protobuf_PROTOC_EXECUTABLE})")
  message(STATUS "  Boost          : ${Boost_VERSION} (program_options)")
  message(STATUS "  fmt            : ${fmt_VERSION}, nlohmann_json ${nlohmann_json_VERSION}")
  if(RINGTRAIN_BUILD_TESTS)
    message(STATUS "  GoogleTest     : ${GTest_VERSION}")
  endif()
  message(STATUS "")
endfunction()

# The default CUDA architectures (cmake/RingtrainCudaArchitectures.cmake) from what nvcc 12.6 and
# nvcc 13.0 list, and from the nvcc of this machine where there is one: every one from 7.0 up, in
# order, so the image runs on V100 (where the nvcc still has it), T4, A10, L4, A100 and H100.
#   cmake -DSOURCE_DIR=... [-DNVCC=/usr/local/cuda/bin/nvcc] -P cuda_architectures_test.cmake
cmake_minimum_required(VERSION 3.22)
list(APPEND CMAKE_MODULE_PATH "${SOURCE_DIR}/cmake")
include(RingtrainCudaArchitectures)

set(failures 0)
function(expect name got want)
  if(got STREQUAL want)
    message("ok   ${name}: ${got}")
  else()
    message("FAIL ${name}: ${got}, want ${want}")
    math(EXPR failures "${failures} + 1")
    set(failures ${failures} PARENT_SCOPE)
  endif()
endfunction()

set(nvcc_12_6 "compute_50\ncompute_52\ncompute_53\ncompute_60\ncompute_61\ncompute_62\ncompute_70\n"
              "compute_72\ncompute_75\ncompute_80\ncompute_86\ncompute_87\ncompute_89\ncompute_90\n")
ringtrain_cuda_architectures_from_list("${nvcc_12_6}" got)
expect("nvcc 12.6's list" "${got}" "70;72;75;80;86;87;89;90")
# nvcc 13.0 dropped Volta and lists in an order of its own.
set(nvcc_13_0 "compute_75\ncompute_80\ncompute_86\ncompute_87\ncompute_88\ncompute_89\ncompute_90\n"
              "compute_100\ncompute_110\ncompute_103\ncompute_120\ncompute_121\n")
ringtrain_cuda_architectures_from_list("${nvcc_13_0}" got)
expect("nvcc 13.0's list" "${got}" "75;80;86;87;88;89;90;100;103;110;120;121")
ringtrain_cuda_architectures_from_list("compute_50\ncompute_60\n" got)
expect("a list below 7.0" "${got}" "")

if(NVCC AND EXISTS "${NVCC}")
  ringtrain_default_cuda_architectures("${NVCC}" got)
  set(clusters_gpus 75 80 86 89 90)  # T4, A100, A10, L4, H100: in every nvcc from CUDA 11.8 to 13
  set(missing)
  foreach(architecture IN LISTS clusters_gpus)
    if(NOT architecture IN_LIST got)
      list(APPEND missing ${architecture})
    endif()
  endforeach()
  expect("${NVCC}'s default lacks none of 75;80;86;89;90" "${missing}" "")
else()
  message("skip the real nvcc: none at '${NVCC}'")
endif()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} check(s) failed")
endif()

# The GPU architectures the CUDA kernels are built for, by default: every one the found nvcc
# lists (`nvcc --list-gpu-arch`) from 7.0 up, so that one build runs on the GPUs clusters have:
# V100 (70), T4 (75), A100 (80), A10 (86), L4 (89), H100/H200 (90) and newer, as far as that nvcc
# knows them (nvcc 13 starts at 75: it dropped Volta). RINGTRAIN_CUDA_ARCHITECTURES (or
# CMAKE_CUDA_ARCHITECTURES) chooses others, e.g. "80;90" for a quicker build, "native" for the
# build machine's GPUs.

# The architectures from 7.0 up in `listed`, the text `nvcc --list-gpu-arch` prints
# ("compute_75\ncompute_80\n..."), in ascending order.
function(ringtrain_cuda_architectures_from_list listed out)
  string(REGEX MATCHALL "compute_[0-9]+" names "${listed}")
  set(architectures)
  foreach(name IN LISTS names)
    string(REPLACE "compute_" "" architecture "${name}")
    if(architecture GREATER_EQUAL 70)
      list(APPEND architectures ${architecture})
    endif()
  endforeach()
  if(architectures)
    list(REMOVE_DUPLICATES architectures)
    list(SORT architectures COMPARE NATURAL)
  endif()
  set(${out} "${architectures}" PARENT_SCOPE)
endfunction()

# The default for `nvcc`: what it lists from 7.0 up; 80;90, with a warning, when it lists none
# (an nvcc without --list-gpu-arch, before CUDA 11).
function(ringtrain_default_cuda_architectures nvcc out)
  execute_process(COMMAND "${nvcc}" --list-gpu-arch OUTPUT_VARIABLE listed
                  RESULT_VARIABLE status ERROR_QUIET)
  set(architectures)
  if(status EQUAL 0)
    ringtrain_cuda_architectures_from_list("${listed}" architectures)
  endif()
  if(NOT architectures)
    set(architectures 80 90)
    message(WARNING "${nvcc} --list-gpu-arch names no architecture from 7.0 up: building the "
                    "CUDA kernels for 80;90 (set RINGTRAIN_CUDA_ARCHITECTURES for others)")
  endif()
  set(${out} "${architectures}" PARENT_SCOPE)
endfunction()

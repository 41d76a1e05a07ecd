# Finds cuDNN: honours CUDNN_ROOT (variable or environment; also the nvidia.cudnn folder of a pip
# wheel), then the CUDA toolkit's folders. Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_INCLUDE_DIR,
# CUDNN_LIBRARY and the target CUDNN::cudnn. A wheel ships libcudnn.so.9 without the plain name.
set(_cudnn_hints ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_ROOT}
    $ENV{CUDA_HOME} /usr/local/cuda)
find_path(CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${_cudnn_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cudnn_hints}
             ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_version_lines
       REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${_part} +([0-9]+)" _ "${_cudnn_version_lines}")
    set(_cudnn_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
                                  VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)

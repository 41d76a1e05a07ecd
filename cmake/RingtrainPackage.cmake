# The installed library for programs that bring their own model (docs/api.md):
#   PREFIX/include/ringtrain/ringtrain.h       the public header (it includes nothing of ours);
#   PREFIX/lib/libringtrain_*.a                the facade and what is under it: the option values (the
#                                              exchange's RINGTRAIN_* variables), engine, collectives, base;
#   PREFIX/lib/cmake/ringtrain/                ringtrainConfig.cmake and its targets, so that
#     find_package(ringtrain CONFIG REQUIRED) gives ringtrain::ringtrain.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(_ringtrain_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/ringtrain)
set_target_properties(ringtrain_api PROPERTIES EXPORT_NAME ringtrain)
set_target_properties(ringtrain_option_values PROPERTIES EXPORT_NAME option_values)
set_target_properties(ringtrain_engine PROPERTIES EXPORT_NAME engine)
set_target_properties(ringtrain_collectives PROPERTIES EXPORT_NAME collectives)
set_target_properties(ringtrain_base PROPERTIES EXPORT_NAME base)
install(TARGETS ringtrain_api ringtrain_option_values ringtrain_engine ringtrain_collectives ringtrain_base
        EXPORT ringtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/ringtrain/ringtrain.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringtrain)
install(EXPORT ringtrainTargets NAMESPACE ringtrain:: DESTINATION ${_ringtrain_cmake_dir})
configure_package_config_file(cmake/ringtrainConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfig.cmake
                              INSTALL_DESTINATION ${_ringtrain_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
set(_ringtrain_package_files ${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfig.cmake
                             ${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfigVersion.cmake)
if(RINGTRAIN_HAVE_CUDA)
  list(APPEND _ringtrain_package_files cmake/FindNCCL.cmake)
endif()
install(FILES ${_ringtrain_package_files} DESTINATION ${_ringtrain_cmake_dir})

# Test registration. ringtrain_add_mpi_test(NAME n TARGET t RANKS 1 2 3 4 [ARGS ...] [TIMEOUT s])
# registers one CTest test per rank count, "n.np<k>", each run under the MPI launcher with k ranks.
# More ranks than cores is the normal case in CI (2 cores, 4 ranks), hence --oversubscribe.
# Running as root is allowed by scripts/test.sh (it exports Open MPI's two root variables),
# not here, so a developer's own ctest run as an ordinary user changes nothing.
set(RINGTRAIN_MPIEXEC_FLAGS ${MPIEXEC_PREFLAGS})
if(RINGTRAIN_MPI_IS_OPENMPI)
  list(APPEND RINGTRAIN_MPIEXEC_FLAGS --oversubscribe)
endif()

function(ringtrain_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;TARGET;TIMEOUT" "RANKS;ARGS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  foreach(np ${T_RANKS})
    set(test_name ${T_NAME}.np${np})
    add_test(NAME ${test_name}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${RINGTRAIN_MPIEXEC_FLAGS}
                     $<TARGET_FILE:${T_TARGET}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    set_tests_properties(${test_name} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${np}
                                                 LABELS "mpi;${T_LABELS}")
  endforeach()
endfunction()

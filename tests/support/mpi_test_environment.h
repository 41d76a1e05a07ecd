// Access to the MPI environment from tests linked with mpi_gtest_main.
#pragma once

#include "collectives/environment.h"

namespace ringtrain::testing {

// The process's MpiEnvironment, created by mpi_gtest_main before any test runs.
const collectives::MpiEnvironment& mpiEnvironment();

}  // namespace ringtrain::testing

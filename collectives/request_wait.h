// Waiting for MPI requests, by spinning or politely.
//
// Open MPI's MPI_Wait polls its progress engine without pause. That is right when the waiting
// thread has a core to itself, and wrong for the gradient engine's communication thread, which
// shares the core with backward: spinning there takes half the core from the computation while
// nothing arrives. The polite wait tests the request and yields the processor between tests.
#pragma once

#include <mpi.h>

namespace ringtrain::collectives {

enum class WaitMode { kSpin, kYield };

void waitFor(MPI_Request* request, MPI_Status* status, WaitMode mode);
void waitForAll(int count, MPI_Request* requests, WaitMode mode);

}  // namespace ringtrain::collectives

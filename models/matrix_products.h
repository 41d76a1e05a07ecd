// Which library computes the models' matrix products: Eigen's own kernels, or OpenBLAS when the
// build hands them over (RINGTRAIN_BLAS, EIGEN_USE_BLAS). Only the serial build of OpenBLAS is
// linked, so that a rank keeps to one thread.
#pragma once

#include <string>

namespace ringtrain::models {

struct MatrixProducts {
  bool blas = false;       // the products go to a BLAS library (EIGEN_USE_BLAS)
  bool sequential = true;  // that library runs them on the calling thread only
  std::string name;        // e.g. "OpenBLAS 0.3.21 (serial, Zen)" or "Eigen 3.4.0"
};

// What this build links, asked of the library itself where it can tell.
MatrixProducts matrixProducts();

// Keeps the products on the calling thread even where the loader found a threaded OpenBLAS in
// place of the serial one (the alternatives of a Debian system can do that when the binary has
// lost its run path); nothing to do for Eigen's own kernels or the serial build.
void keepMatrixProductsOnOneThread();

}  // namespace ringtrain::models

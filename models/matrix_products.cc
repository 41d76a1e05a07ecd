#include "models/matrix_products.h"

#include <Eigen/Core>

#ifdef EIGEN_USE_BLAS
// OpenBLAS's own queries (cblas.h of the serial build declares them; declared here so that no
// include path of one Debian variant is needed).
extern "C" {
int openblas_get_parallel(void);  // 0: sequential, 1: pthreads, 2: OpenMP
char* openblas_get_config(void);  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen SINGLE_THREADED"
char* openblas_get_corename(void);
void openblas_set_num_threads(int);
}
#endif

namespace ringtrain::models {

namespace {
Precision precision = Precision::kFloat32;
}  // namespace

void setMatrixPrecision(Precision p) {
  precision = p;
}
Precision matrixPrecision() {
  return precision;
}

MatrixProducts matrixProducts() {
  MatrixProducts m;
#ifdef EIGEN_USE_BLAS
  m.blas = true;
  m.sequential = openblas_get_parallel() == 0;
  // The configuration string's first two words: "OpenBLAS 0.3.21".
  const std::string config = openblas_get_config();
  m.name = config.substr(0, config.find(' ', config.find(' ') + 1)) + " (" +
           (m.sequential ? "serial" : "threaded") + ", " + openblas_get_corename() + ")";
#else
  m.name = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
           std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION);
#endif
  return m;
}

void keepMatrixProductsOnOneThread() {
#ifdef EIGEN_USE_BLAS
  if (openblas_get_parallel() != 0) openblas_set_num_threads(1);
#endif
}

}  // namespace ringtrain::models

#include "models/matrix_products.h"

#include <strings.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "base/vector_dispatch.h"

#ifdef EIGEN_USE_BLAS
// OpenBLAS's own queries (cblas.h of the serial build declares them; declared here so that no
// include path of one Debian variant is needed).
extern "C" {
int openblas_get_parallel(void);  // 0: sequential, 1: pthreads, 2: OpenMP
char* openblas_get_config(void);  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen SINGLE_THREADED"
char* openblas_get_corename(void);
void openblas_set_num_threads(int);
// A DYNAMIC_ARCH build's choice of kernels (driver/others/dynamic.c): quit forgets it, init
// makes it again from OPENBLAS_CORETYPE or the CPU. Weak: builds for one CPU have neither.
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}
#endif

namespace ringtrain::models {

namespace {
Precision precision = Precision::kFloat32;

bool oneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(), [&](std::string_view n) {
    return n.size() == name.size() && strncasecmp(n.data(), name.data(), n.size()) == 0;
  });
}

// At load, before any product: OpenBLAS's kernels for the CPU's widest vectors, unless the
// user chose some with OPENBLAS_CORETYPE. The name of the ones it had taken, else "".
std::string matchBlasKernelsToCpu() {
#ifdef EIGEN_USE_BLAS
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  const std::string chosen = openblas_get_corename();
  const std::string wider = widerBlasKernels(chosen, cpuVectorWidth());
  if (!wider.empty() && useBlasKernels(wider)) return chosen;
#endif
  return "";
}
const std::string rechosenAtLoad = matchBlasKernelsToCpu();
}  // namespace

VectorWidth cpuVectorWidth() {
  using base::CpuFeature;
  base::initCpuFeatures();  // rechosenAtLoad asks during static initialisation
  if (base::cpuHas(CpuFeature::kAvx512Core)) return VectorWidth::kAvx512;
  if (base::cpuHas(CpuFeature::kAvx2) && base::cpuHas(CpuFeature::kFma)) return VectorWidth::kAvx2;
  return VectorWidth::kNarrow;
}

std::string widerBlasKernels(std::string_view chosen, VectorWidth cpu) {
  const bool avx512 = oneOf(chosen, {"SkylakeX", "Cooperlake", "SapphireRapids"});
  if (cpu == VectorWidth::kAvx512 && !avx512) return "SkylakeX";
  if (cpu == VectorWidth::kAvx2 && !avx512 && !oneOf(chosen, {"Haswell", "Zen"})) return "Haswell";
  return "";
}

bool useBlasKernels(std::string_view core) {
#ifdef EIGEN_USE_BLAS
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return false;
  const std::string before = openblas_get_corename();
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = set != nullptr ? set : "";
  const auto chooseAs = [](const std::string& name) {
    setenv("OPENBLAS_CORETYPE", name.c_str(), 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
  };
  chooseAs(std::string(core));
  const bool ok = oneOf(openblas_get_corename(), {core});
  if (!ok) chooseAs(before);  // an unknown name leaves OpenBLAS on its fallback kernels
  if (set != nullptr) {
    setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
  return ok;
#else
  (void)core;
  return false;
#endif
}

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
           (m.sequential ? "serial" : "threaded") + ", " + openblas_get_corename() +
           (rechosenAtLoad.empty() ? "" : "; OpenBLAS had chosen " + rechosenAtLoad) + ")";
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

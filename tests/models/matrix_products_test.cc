// The models' matrix products, whichever library computes them (Eigen's own kernels or OpenBLAS,
// RINGTRAIN_BLAS): the shapes and forms the layers use give what a sum in double gives, and
// they run on the calling thread only (a rank is one thread).
#include "models/matrix_products.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <strings.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ringtrain::models {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// The reference: every element summed in double.
Matrix product(const Matrix& a, const Matrix& b) {
  Matrix c(a.rows(), b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < b.cols(); ++j) {
      double sum = 0;
      for (Eigen::Index k = 0; k < a.cols(); ++k)
        sum += double(a(i, k)) * double(b(k, j));
      c(i, j) = static_cast<float>(sum);
    }
  return c;
}

void expectNear(const Matrix& got, const Matrix& want, Eigen::Index depth) {
  ASSERT_EQ(got.rows(), want.rows());
  ASSERT_EQ(got.cols(), want.cols());
  // Inputs in [-1, 1]: a float sum of `depth` products is off by a few ulps of sqrt(depth).
  const float tolerance = 1e-5f * static_cast<float>(depth);
  for (Eigen::Index i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got.data()[i], want.data()[i], tolerance) << "element " << i;
}

int threadsOfThisProcess() {
  int count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (const dirent* entry = readdir(dir))
    if (entry->d_name[0] != '.') ++count;
  closedir(dir);
  return count;
}

TEST(MatrixProducts, NameTheLibraryThatComputesThem) {
  const MatrixProducts m = matrixProducts();
#ifdef EIGEN_USE_BLAS
  EXPECT_TRUE(m.blas);
  EXPECT_EQ(m.name.rfind("OpenBLAS ", 0), 0u) << m.name;
#else
  EXPECT_FALSE(m.blas);
  EXPECT_EQ(m.name.rfind("Eigen ", 0), 0u) << m.name;
#endif
  EXPECT_TRUE(m.sequential) << m.name << " would start threads of its own in every rank";
}

// The layers' forms: y += W x (the bias already in y), dW = dy x^T in blocks of rows (a view
// with the full matrix's stride), dx = W^T dy; sizes of the MLP's first layer and batch 64.
TEST(MatrixProducts, TheLayersFormsAgreeWithASumInDouble) {
  Eigen::Index out = 512, in = 784, batch = 64;
  const Matrix w = Matrix::Random(out, in), x = Matrix::Random(in, batch);
  const Matrix bias = Matrix::Random(out, 1), dy = Matrix::Random(out, batch);

  Matrix y = bias.replicate(1, batch);
  y.noalias() += w * x;
  Matrix want = product(w, x);
  want.colwise() += bias.col(0);
  expectNear(y, want, in);

  Matrix dw = Matrix::Zero(out, in);
  for (Eigen::Index end = out; end > 0; end -= 200) {
    const Eigen::Index begin = std::max<Eigen::Index>(0, end - 200);
    dw.middleRows(begin, end - begin).noalias() = dy.middleRows(begin, end - begin) * x.transpose();
  }
  expectNear(dw, product(dy, x.transpose()), batch);

  Matrix dx(in, batch);
  dx.noalias() = w.transpose() * dy;
  expectNear(dx, product(w.transpose(), dy), out);
}

TEST(MatrixProducts, RunOnTheCallingThreadOnly) {
  const int before = threadsOfThisProcess();
  ASSERT_GT(before, 0) << "no /proc/self/task";
  // Large enough that a threaded BLAS would split it over the cores.
  const Matrix a = Matrix::Random(1024, 1024), b = Matrix::Random(1024, 1024);
  Matrix c(1024, 1024);
  for (int i = 0; i < 3; ++i)
    c.noalias() = a * b;
  EXPECT_TRUE(std::isfinite(c(0, 0)));
  EXPECT_EQ(threadsOfThisProcess(), before);
  EXPECT_EQ(before, 1) << "the test program itself starts no thread; a library loaded with it did";
}

TEST(MatrixProducts, KernelsNarrowerThanTheCpuAreReplaced) {
  EXPECT_EQ(widerBlasKernels("Prescott", VectorWidth::kAvx512), "SkylakeX");
  EXPECT_EQ(widerBlasKernels("Haswell", VectorWidth::kAvx512), "SkylakeX");
  EXPECT_EQ(widerBlasKernels("Zen", VectorWidth::kAvx512), "SkylakeX");
  EXPECT_EQ(widerBlasKernels("SkylakeX", VectorWidth::kAvx512), "");
  EXPECT_EQ(widerBlasKernels("COOPERLAKE", VectorWidth::kAvx512), "");
  EXPECT_EQ(widerBlasKernels("Prescott", VectorWidth::kAvx2), "Haswell");
  EXPECT_EQ(widerBlasKernels("Sandybridge", VectorWidth::kAvx2), "Haswell");
  EXPECT_EQ(widerBlasKernels("Zen", VectorWidth::kAvx2), "");
  EXPECT_EQ(widerBlasKernels("Haswell", VectorWidth::kAvx2), "");
  EXPECT_EQ(widerBlasKernels("Prescott", VectorWidth::kNarrow), "");
}

#ifdef EIGEN_USE_BLAS
extern "C" char* openblas_get_corename(void);

// At load the products took the CPU's widest kernels, or the ones OPENBLAS_CORETYPE names.
TEST(MatrixProducts, RunTheCpusWidestKernelsUnlessTheUserChose) {
  const std::string core = openblas_get_corename();
  if (const char* chosen = std::getenv("OPENBLAS_CORETYPE")) {
    EXPECT_EQ(strcasecmp(core.c_str(), chosen), 0) << core << " against OPENBLAS_CORETYPE";
  } else {
    EXPECT_EQ(widerBlasKernels(core, cpuVectorWidth()), "") << core;
  }
  EXPECT_NE(matrixProducts().name.find(core), std::string::npos) << matrixProducts().name;
}

// Asking again switches the kernels, products stay right, an unknown name changes nothing.
TEST(MatrixProducts, OpenBlasChoosesItsKernelsAgainWhenAsked) {
  const std::string original = openblas_get_corename();
  const Matrix a = Matrix::Random(96, 200), b = Matrix::Random(200, 72);
  const std::string other = strcasecmp(original.c_str(), "Prescott") == 0 ? "Core2" : "Prescott";
  ASSERT_TRUE(useBlasKernels(other));
  EXPECT_EQ(strcasecmp(openblas_get_corename(), other.c_str()), 0) << openblas_get_corename();
  Matrix c(96, 72);
  c.noalias() = a * b;
  expectNear(c, product(a, b), 200);
  EXPECT_FALSE(useBlasKernels("NoSuchKernels"));
  EXPECT_EQ(strcasecmp(openblas_get_corename(), other.c_str()), 0) << openblas_get_corename();
  ASSERT_TRUE(useBlasKernels(original));
  EXPECT_EQ(openblas_get_corename(), original);
}
#endif

}  // namespace
}  // namespace ringtrain::models

// bfloat16 matrix products (bf16_gemm.h) and the precision switch (matrix_products.h): the kernel
// against a sum in double of the same bfloat16-rounded inputs over odd and blocked shapes, every
// storage order and accumulation; against float32 to bfloat16's error; and whole models (mlp,
// cnn, gpt) in bfloat16 against float32. Skipped, saying why, on a CPU without AVX512-BF16.
#include "models/bf16_gemm.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "models/matrix_products.h"
#include "models/model_factory.h"

namespace ringtrain::models {
namespace {

using Matrix = Eigen::MatrixXf;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

#define SKIP_WITHOUT_BF16() \
  if (!bf16ProductsSupported()) GTEST_SKIP() << "this CPU has no AVX512-BF16"

// Round to nearest bfloat16, ties to even (finite values), as vcvtneps2bf16 does.
float toBf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The exact product of the rounded inputs, summed in double (a bf16 pair's product is exact in
// float32, so the kernel differs only by float32 accumulation).
Matrix roundedProduct(const Matrix& a, const Matrix& b) {
  const Eigen::MatrixXd ra = a.unaryExpr(&toBf16).cast<double>();
  const Eigen::MatrixXd rb = b.unaryExpr(&toBf16).cast<double>();
  return (ra * rb).cast<float>();
}

// Worst |got - want| over the sum of |a||b| of each element (the scale of its rounding error).
double worstRelativeError(const Matrix& got, const Matrix& want, const Matrix& a, const Matrix& b) {
  const Matrix scale = a.cwiseAbs() * b.cwiseAbs();
  double worst = 0;
  for (Eigen::Index i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got.data()[i]) - want.data()[i]) /
                                std::max(double(scale.data()[i]), 1e-30));
  return worst;
}

struct Shape {
  Eigen::Index m, n, k;
};
// Edges of the micro-tile (32 x 12) and of the cache blocks (k 384, rows 192), odd k, ones.
const Shape kShapes[] = {{1, 1, 1},    {1, 7, 3},     {5, 1, 2},    {31, 11, 1},     {33, 13, 17},
                         {32, 12, 64}, {64, 24, 385}, {193, 25, 9}, {200, 100, 777}, {7, 300, 50}};

// Over every shape: the kernel is the exact product of the rounded inputs up to float32
// accumulation (a few ulps of the sum's scale per term), and so within bfloat16's error of the
// float32 inputs' product: each input is off by at most 2^-8 relative (8 significant bits), each
// term by 2^-7, a bound that holds for every element whatever the signs.
TEST(Bf16Product, OverOddShapesIsTheRoundedInputsProductWithinBfloat16ErrorOfFloat32) {
  SKIP_WITHOUT_BF16();
  for (const Shape& s : kShapes) {
    const Matrix a = Matrix::Random(s.m, s.k), b = Matrix::Random(s.k, s.n);
    Matrix c(s.m, s.n);
    bf16Product(strided(a), strided(b), strided(c), false);
    EXPECT_LT(worstRelativeError(c, roundedProduct(a, b), a, b), 1e-6 * double(s.k) + 1e-6)
        << s.m << "x" << s.n << "x" << s.k;
    const Matrix exact = (a.cast<double>() * b.cast<double>()).cast<float>();
    const double error = worstRelativeError(c, exact, a, b);
    EXPECT_LT(error, std::ldexp(1.0, -7)) << s.m << "x" << s.n << "x" << s.k;
    if (s.k >= 64) {
      EXPECT_GT(error, 1e-5) << "no bfloat16 rounding seen: is it float32?";
    }
  }
}

TEST(Bf16Product, EveryStorageOrderBlockAndAccumulation) {
  SKIP_WITHOUT_BF16();
  const Eigen::Index m = 45, n = 29, k = 70;
  const RowMajor aRow = RowMajor::Random(m, k);
  const Matrix bBig = Matrix::Random(k + 10, n + 3);  // b is a block with a longer stride
  const auto b = bBig.block(4, 1, k, n);
  const Matrix aT = aRow.transpose();  // a given as the transpose of a column-major k x m
  const Matrix want = roundedProduct(aRow, b);
  const Matrix start = Matrix::Random(m, n);

  Matrix c1(m, n);
  bf16Product(strided(aRow), strided(b), strided(c1), false);
  RowMajor c2(m, n);  // row-major destination
  bf16Product(strided(aT.transpose()), strided(b), strided(c2), false);
  Matrix c3 = start;  // accumulate
  bf16Product(strided(aRow), strided(b), strided(c3), true);
  const RowMajor bT = b.transpose();
  Matrix c4(m, n);
  bf16Product(strided(aRow), strided(bT.transpose()), strided(c4), false);
  // Neither of a's strides 1: a view of every other value of a larger matrix.
  const Matrix wide = Matrix::Random(k, 2 * m);
  const Eigen::Map<const Matrix, 0, Eigen::Stride<Eigen::Dynamic, 2>> everyOther(
      wide.data(), k, m, Eigen::Stride<Eigen::Dynamic, 2>(2 * k, 2));
  Matrix c5(m, n);
  bf16Product(strided(everyOther.transpose()), strided(b), strided(c5), false);
  EXPECT_LT((c5 - roundedProduct(everyOther.transpose(), b)).cwiseAbs().maxCoeff(), 1e-4f);
  for (const Matrix& got : {c1, Matrix(c2), Matrix(c3 - start), c4})
    EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-4f);
}

TEST(Bf16Product, DepthZeroGivesZerosOrLeavesTheSum) {
  SKIP_WITHOUT_BF16();
  const Matrix a(3, 0), b(0, 4);
  Matrix c = Matrix::Constant(3, 4, 7.0f);
  bf16Product(strided(a), strided(b), strided(c), true);
  EXPECT_EQ(c, Matrix::Constant(3, 4, 7.0f));
  bf16Product(strided(a), strided(b), strided(c), false);
  EXPECT_EQ(c, Matrix::Zero(3, 4));
}

// Sets the precision for one test and puts float32 back after it.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(Precision p) { setMatrixPrecision(p); }
  ~PrecisionGuard() { setMatrixPrecision(Precision::kFloat32); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;
};

TEST(MatrixPrecision, Float32IsEigensProductToTheBitAndBfloat16IsTheKernels) {
  SKIP_WITHOUT_BF16();
  const Matrix a = Matrix::Random(40, 300), b = Matrix::Random(300, 20);
  Matrix eigen = Matrix::Ones(40, 20), viaProduct = eigen, kernel = eigen;
  eigen.noalias() += a * b;
  product(viaProduct, a, b, /*accumulate=*/true);
  EXPECT_EQ(viaProduct, eigen);
  const PrecisionGuard bf16(Precision::kBfloat16);
  product(viaProduct, a, b);
  bf16Product(strided(a), strided(b), strided(kernel), false);
  EXPECT_EQ(viaProduct, kernel);
  EXPECT_NE(viaProduct, Matrix(a * b));
}

// One forward and backward of `spec` in float32 and in bfloat16 from the same weights and batch.
struct Pass {
  double loss = 0;
  std::vector<float> gradients;
};

Pass runPass(Model<float>& model, const Batch<float>& batch) {
  Pass pass;
  pass.loss = model.forward(batch).meanLoss();
  model.backward();
  pass.gradients.assign(model.gradients().begin(), model.gradients().end());
  return pass;
}

// `tolerance`: of the gradients' relative L2 error. A ReLU whose input lies within bfloat16's
// rounding of zero switches, which moves a whole gradient element: the error grows like the
// square root of the fraction switched, a few per cent where GELU's smooth slope gives ~2^-8.
void expectBfloat16TracksFloat32(const ModelSpec& spec, Index samples, Index tokenRange,
                                 double tolerance) {
  auto model = makeModel<float>(spec);
  model.initialize(5);
  SplitMix64 generator(6);
  std::vector<float> inputs(static_cast<std::size_t>(model.inputShape().size() * samples));
  for (float& x : inputs)
    x = tokenRange > 0 ? float(generator.next() % tokenRange) : float(generator.symmetric(1));
  std::vector<std::int32_t> labels(
      static_cast<std::size_t>(samples * (spec.name == "gpt" ? spec.gpt.context : 1)));
  for (auto& label : labels)
    label = static_cast<std::int32_t>(generator.next() % (tokenRange > 0 ? tokenRange : 10));
  const Batch<float> batch{inputs, labels, {}};
  const Pass fp32 = runPass(model, batch);
  Pass bf16;
  {
    const PrecisionGuard guard(Precision::kBfloat16);
    bf16 = runPass(model, batch);
  }
  EXPECT_NEAR(bf16.loss, fp32.loss, 1e-2 * std::abs(fp32.loss)) << spec.name;
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < fp32.gradients.size(); ++i) {
    diff += std::pow(double(bf16.gradients[i]) - fp32.gradients[i], 2);
    norm += std::pow(double(fp32.gradients[i]), 2);
  }
  ASSERT_GT(norm, 0) << spec.name;
  const double relative = std::sqrt(diff / norm);
  EXPECT_LT(relative, tolerance) << spec.name << ": gradients off by this fraction of their norm";
  EXPECT_GT(relative, 1e-5) << spec.name << ": no bfloat16 rounding seen";
}

TEST(MatrixPrecision, Bfloat16ForwardAndBackwardTrackFloat32ForEveryModel) {
  SKIP_WITHOUT_BF16();
  expectBfloat16TracksFloat32(
      {.name = "mlp", .input = {1, 28, 28}, .classes = 10, .hidden = {128, 64}}, 16, 0, 0.2);
  expectBfloat16TracksFloat32({.name = "cnn", .input = {1, 12, 12}, .classes = 10, .hidden = {}}, 8,
                              0, 0.2);
  expectBfloat16TracksFloat32(
      {.name = "gpt",
       .input = {1, 16, 1},
       .gpt = {.layers = 2, .heads = 2, .width = 32, .context = 16, .vocabulary = 97}},
      4, 97, 0.02);
}

}  // namespace
}  // namespace ringtrain::models

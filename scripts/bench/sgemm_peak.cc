// sgemm_peak: the single-thread float32 matrix-product rate of a BLAS library, the ceiling that
// a model's FLOP/s per core is measured against (scripts/bench/model_speed.sh builds it against
// the OpenBLAS that ringtrain's build links, CMakeCache's RINGTRAIN_OPENBLAS_SERIAL, and runs it
// bound to one core).
//
//   sgemm_peak [N] [SECONDS] [REPEATS]   (default 1024 1.0 5)
//
// C = A·B with N×N row-major matrices through cblas_sgemm; each of REPEATS rounds repeats the
// product for at least SECONDS; prints the best and the median round in GFLOP/s (2·N³ per
// product) and one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

// The CBLAS declaration, written here so that no header of one BLAS build is needed.
extern "C" void cblas_sgemm(int order, int transA, int transB, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  if (n < 1 || seconds <= 0 || repeats < 1) {
    std::fprintf(stderr, "sgemm_peak: usage: sgemm_peak [N >= 1] [SECONDS > 0] [REPEATS >= 1]\n");
    return 2;
  }
  const auto size = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> a(size), b(size), c(size, 0.0f);
  std::mt19937 random(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto& x : a) x = uniform(random);
  for (auto& x : b) x = uniform(random);
  constexpr int kRowMajor = 101, kNoTrans = 111;
  auto product = [&] {
    cblas_sgemm(kRowMajor, kNoTrans, kNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
  };
  product();  // warm-up: caches, the library's buffers
  const double flops = 2.0 * n * static_cast<double>(n) * n;
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    long products = 0;
    do {
      product();
      ++products;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < seconds);
    rates.push_back(flops * static_cast<double>(products) / elapsed / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  const double best = rates.back();
  const double median = rates[rates.size() / 2];
  std::printf("sgemm %dx%d float32, one thread: best %.1f GFLOP/s, median %.1f over %d rounds "
              "(checksum %.3g)\n",
              n, n, best, median, repeats, static_cast<double>(c[size / 2]));
  std::printf("{\"n\": %d, \"best_gflops\": %.3f, \"median_gflops\": %.3f, \"rounds\": %d}\n", n,
              best, median, repeats);
  return 0;
}

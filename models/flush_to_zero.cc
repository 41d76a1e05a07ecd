#include "models/flush_to_zero.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace ringtrain::models {
namespace {

#if defined(__SSE__)
constexpr unsigned kFlushToZero = 0x8000;       // MXCSR bit 15: results that would be denormal
constexpr unsigned kDenormalsAreZero = 0x0040;  // MXCSR bit 6: denormal inputs
#endif

}  // namespace

bool enableFlushToZero() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero);
  return true;
#else
  return false;
#endif
}

bool flushToZeroEnabled() {
#if defined(__SSE__)
  const unsigned both = kFlushToZero | kDenormalsAreZero;
  return (_mm_getcsr() & both) == both;
#else
  return false;
#endif
}

}  // namespace ringtrain::models

// Flush-to-zero and denormals-are-zero for the calling thread.
//
// Late in training many gradients and activations shrink into the denormal range, where every
// operation on them takes a slow microcoded path that slows the whole step down. Treating
// denormals as zero changes results only below ~1e-38 (float), far under anything that matters.
#pragma once

namespace ringtrain::models {

// Sets FTZ and DAZ in the MXCSR register on x86 and returns true; returns false (and changes
// nothing) on other processors. MXCSR is per thread: call it on every thread that runs a model.
// Threads started afterwards by this thread inherit the setting.
bool enableFlushToZero();

// Whether both bits are set for the calling thread (always false off x86).
bool flushToZeroEnabled();

}  // namespace ringtrain::models

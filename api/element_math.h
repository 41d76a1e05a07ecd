// Element arithmetic of the named operations that the engine's collectives do not do themselves:
// the types and ops it lacks (8- and 16-bit integers, bool, the product), and Horovod's pre- and
// post-scaling. Results are the same on every rank: the reduction runs over the ranks' blocks in
// rank order.
#pragma once

#include <cstddef>
#include <optional>

#include "collectives/data_type.h"
#include "ringtrain/ringtrain.h"

namespace ringtrain::api {

std::size_t sizeOf(DataType type);
std::string typeName(DataType type);
std::string opName(ReduceOp op);
// The engine's type and op, where its collectives reduce them.
std::optional<collectives::DataType> engineType(DataType type);
std::optional<collectives::ReduceOp> engineOp(ReduceOp op);

// out[i] = op over r < ranks of blocks[r * count + i], in rank order.
void reduceBlocks(const void* blocks, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out);
// data[i] *= factor, as Horovod scales: in the type itself for float32 and float64, in float32
// for the 16-bit floats, in float64 for integers (truncated back). A factor of 1 does nothing.
void scale(void* data, std::size_t count, DataType type, double factor);
// Whether `op` means something on `type` (kAverage on kBool does not).
bool reducible(DataType type, ReduceOp op);

}  // namespace ringtrain::api

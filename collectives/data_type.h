// Element types and reductions the collectives understand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "collectives/float16.h"

namespace ringtrain::collectives {

enum class DataType : std::uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64 };
inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat64,
                                             DataType::kFloat16, DataType::kBFloat16,
                                             DataType::kInt32,   DataType::kInt64};

// kAverage is a sum divided by the number of ranks; for integers the division truncates toward
// zero, as C++ integer division does.
enum class ReduceOp : std::uint8_t { kSum, kAverage, kMin, kMax };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                             ReduceOp::kMax};

std::size_t sizeOf(DataType type);
bool isFloatingPoint(DataType type);
// "float32", "float64", "float16", "bfloat16", "int32", "int64".
std::string_view name(DataType type);
// "sum", "avg", "min", "max".
std::string_view name(ReduceOp op);
// Accepts the names above and nccl-tests' spellings (float, double, half, bf16, int, ...).
std::optional<DataType> parseDataType(std::string_view text);
std::optional<ReduceOp> parseReduceOp(std::string_view text);

template <class T>
constexpr DataType dataTypeOf();
template <>
constexpr DataType dataTypeOf<float>() {
  return DataType::kFloat32;
}
template <>
constexpr DataType dataTypeOf<double>() {
  return DataType::kFloat64;
}
template <>
constexpr DataType dataTypeOf<Float16>() {
  return DataType::kFloat16;
}
template <>
constexpr DataType dataTypeOf<BFloat16>() {
  return DataType::kBFloat16;
}
template <>
constexpr DataType dataTypeOf<std::int32_t>() {
  return DataType::kInt32;
}
template <>
constexpr DataType dataTypeOf<std::int64_t>() {
  return DataType::kInt64;
}

}  // namespace ringtrain::collectives

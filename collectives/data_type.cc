#include "collectives/data_type.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace ringtrain::collectives {

std::size_t sizeOf(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
  }
  return 0;
}

bool isFloatingPoint(DataType type) {
  return type != DataType::kInt32 && type != DataType::kInt64;
}

std::string_view name(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
  }
  return "unknown";
}

std::string_view name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown";
}

namespace {
std::string lower(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}
}  // namespace

std::optional<DataType> parseDataType(std::string_view text) {
  const std::string t = lower(text);
  if (t == "float32" || t == "float" || t == "f32" || t == "fp32") return DataType::kFloat32;
  if (t == "float64" || t == "double" || t == "f64" || t == "fp64") return DataType::kFloat64;
  if (t == "float16" || t == "half" || t == "f16" || t == "fp16") return DataType::kFloat16;
  if (t == "bfloat16" || t == "bf16") return DataType::kBFloat16;
  if (t == "int32" || t == "int" || t == "i32") return DataType::kInt32;
  if (t == "int64" || t == "i64" || t == "long") return DataType::kInt64;
  return std::nullopt;
}

std::optional<ReduceOp> parseReduceOp(std::string_view text) {
  const std::string t = lower(text);
  if (t == "sum") return ReduceOp::kSum;
  if (t == "avg" || t == "average" || t == "mean") return ReduceOp::kAverage;
  if (t == "min") return ReduceOp::kMin;
  if (t == "max") return ReduceOp::kMax;
  return std::nullopt;
}

}  // namespace ringtrain::collectives

#include "api/element_math.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "collectives/float16.h"

namespace ringtrain::api {
namespace {

// Calls body(T{}) with T the C++ type of `type` (bool as std::uint8_t).
template <class Body>
void dispatch(DataType type, Body&& body) {
  switch (type) {
    case DataType::kFloat32:
      return body(float{});
    case DataType::kFloat64:
      return body(double{});
    case DataType::kFloat16:
      return body(collectives::Float16{});
    case DataType::kBFloat16:
      return body(collectives::BFloat16{});
    case DataType::kInt32:
      return body(std::int32_t{});
    case DataType::kInt64:
      return body(std::int64_t{});
    case DataType::kUInt8:
    case DataType::kBool:
      return body(std::uint8_t{});
    case DataType::kInt8:
      return body(std::int8_t{});
    case DataType::kInt16:
      return body(std::int16_t{});
  }
  throw Error("ringtrain: unknown DataType " + std::to_string(static_cast<int>(type)));
}

// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
template <class T>
struct Arithmetic {
  using Type = T;
  static T in(T value) { return value; }
  static T out(T value) { return value; }
};
template <>
struct Arithmetic<collectives::Float16> {
  using Type = float;
  static float in(collectives::Float16 value) { return collectives::toFloat(value); }
  static collectives::Float16 out(float value) { return collectives::toFloat16(value); }
};
template <>
struct Arithmetic<collectives::BFloat16> {
  using Type = float;
  static float in(collectives::BFloat16 value) { return collectives::toFloat(value); }
  static collectives::BFloat16 out(float value) { return collectives::toBFloat16(value); }
};

template <class A>
A combine(A a, A b, ReduceOp op, bool boolean) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return boolean ? A(a || b) : A(a + b);
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kProduct:
      return boolean ? A(a && b) : A(a * b);
  }
  return a;
}

template <class T>
void reduceTyped(const T* blocks, int ranks, std::size_t count, ReduceOp op, bool boolean, T* out) {
  using A = typename Arithmetic<T>::Type;
  for (std::size_t i = 0; i < count; ++i) {
    A value = Arithmetic<T>::in(blocks[i]);
    if (boolean) value = value != 0;
    for (int r = 1; r < ranks; ++r) {
      A next = Arithmetic<T>::in(blocks[static_cast<std::size_t>(r) * count + i]);
      if (boolean) next = next != 0;
      value = combine(value, next, op, boolean);
    }
    if (op == ReduceOp::kAverage) value = static_cast<A>(value / static_cast<A>(ranks));
    out[i] = Arithmetic<T>::out(value);
  }
}

template <class T>
void scaleTyped(T* data, std::size_t count, double factor) {
  if constexpr (std::is_integral_v<T>) {
    for (std::size_t i = 0; i < count; ++i)
      data[i] = static_cast<T>(static_cast<double>(data[i]) * factor);
  } else {
    using A = typename Arithmetic<T>::Type;
    const A f = static_cast<A>(factor);
    for (std::size_t i = 0; i < count; ++i)
      data[i] = Arithmetic<T>::out(Arithmetic<T>::in(data[i]) * f);
  }
}

}  // namespace

std::size_t sizeOf(DataType type) {
  std::size_t bytes = 0;
  dispatch(type, [&](auto value) { bytes = sizeof(value); });
  return bytes;
}

std::string typeName(DataType type) {
  static const char* const kNames[] = {"float32", "float64", "float16", "bfloat16", "int32",
                                       "int64",   "uint8",   "int8",    "int16",    "bool"};
  return kNames[static_cast<int>(type)];
}

std::string opName(ReduceOp op) {
  static const char* const kNames[] = {"sum", "average", "min", "max", "product"};
  return kNames[static_cast<int>(op)];
}

std::optional<collectives::DataType> engineType(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return collectives::DataType::kFloat32;
    case DataType::kFloat64:
      return collectives::DataType::kFloat64;
    case DataType::kFloat16:
      return collectives::DataType::kFloat16;
    case DataType::kBFloat16:
      return collectives::DataType::kBFloat16;
    case DataType::kInt32:
      return collectives::DataType::kInt32;
    case DataType::kInt64:
      return collectives::DataType::kInt64;
    default:
      return std::nullopt;
  }
}

std::optional<collectives::ReduceOp> engineOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return collectives::ReduceOp::kSum;
    case ReduceOp::kAverage:
      return collectives::ReduceOp::kAverage;
    case ReduceOp::kMin:
      return collectives::ReduceOp::kMin;
    case ReduceOp::kMax:
      return collectives::ReduceOp::kMax;
    default:
      return std::nullopt;
  }
}

bool reducible(DataType type, ReduceOp op) {
  return !(type == DataType::kBool && op == ReduceOp::kAverage);
}

void reduceBlocks(const void* blocks, int ranks, std::size_t count, DataType type, ReduceOp op,
                  void* out) {
  const bool boolean = type == DataType::kBool;
  dispatch(type, [&](auto value) {
    using T = decltype(value);
    reduceTyped(static_cast<const T*>(blocks), ranks, count, op, boolean, static_cast<T*>(out));
  });
}

void scale(void* data, std::size_t count, DataType type, double factor) {
  if (factor == 1.0 || type == DataType::kBool) return;
  dispatch(type, [&](auto value) {
    using T = decltype(value);
    scaleTyped(static_cast<T*>(data), count, factor);
  });
}

}  // namespace ringtrain::api

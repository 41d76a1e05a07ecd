#include "data/dataset.h"

namespace ringtrain::data {

std::string toString(const SampleShape& shape) {
  return std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" +
         std::to_string(shape.width);
}

}  // namespace ringtrain::data

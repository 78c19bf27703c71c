// Why: see scale_format.h.
#include "engine/amp/scale_format.h"

#include <charconv>

namespace mixtrain {

std::string format_scale(float scale) {
  char text[32];
  const std::to_chars_result result = std::to_chars(text, text + sizeof(text), scale);
  return std::string(text, result.ptr);
}

}  // namespace mixtrain

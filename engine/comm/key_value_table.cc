// Why: see key_value_table.h.
#include "engine/comm/key_value_table.h"

#include <charconv>

namespace mixtrain {

const std::string* KeyValueTable::find(std::string_view key) const {
  const auto found = values_.find(key);
  return found == values_.end() ? nullptr : &found->second;
}

const std::string* KeyValueTable::first_missing(const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    if (!values_.contains(key)) return &key;
  }
  return nullptr;
}

std::optional<int64_t> KeyValueTable::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  if (const std::string* text = find(key); text != nullptr && !text->empty()) {
    const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error != std::errc() || end != text->data() + text->size()) return std::nullopt;
  }
  value += delta;
  values_[key] = std::to_string(value);
  return value;
}

}  // namespace mixtrain

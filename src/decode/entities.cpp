#include "decode/entities.h"

#include <utility>

namespace tfm::decode {

namespace {

// The B-/I- prefix of a label and its type: {'B', "PER"}, {'I', "PER"}, {'O', ""}, and
// {'I', "MISC"} for a label without a prefix.
std::pair<char, std::string> split_label(const std::string& label) {
  if (label == "O") return {'O', ""};
  if (label.size() > 2 && (label[0] == 'B' || label[0] == 'I') && (label[1] == '-' || label[1] == '_')) return {label[0], label.substr(2)};
  return {'I', label};
}

}  // namespace

std::vector<EntitySpan> group_entities(const std::vector<std::string>& word_labels) {
  std::vector<EntitySpan> out;
  bool open = false;
  for (int64_t w = 0; w < static_cast<int64_t>(word_labels.size()); ++w) {
    const auto [prefix, type] = split_label(word_labels[static_cast<size_t>(w)]);
    if (prefix == 'O') {
      open = false;
      continue;
    }
    if (!(open && prefix == 'I' && out.back().type == type)) out.push_back({type, w, w});
    open = true;
    out.back().end = w + 1;
  }
  return out;
}

}  // namespace tfm::decode

#pragma once
// Named entities from a token classifier's word labels, as transformers' token-
// classification pipeline groups them (IOB2): "B-PER" starts an entity of type PER,
// "I-PER" continues an open PER entity (and starts one where none is open, or the open
// one is of another type), "O" is outside every entity; a label without a B-/I- prefix
// ("PER") is read as I-.
#include <cstdint>
#include <string>
#include <vector>

namespace tfm::decode {

struct EntitySpan {
  std::string type;                 // the label without its prefix
  int64_t first = 0, end = 0;       // words [first, end)
  bool operator==(const EntitySpan&) const = default;
};

std::vector<EntitySpan> group_entities(const std::vector<std::string>& word_labels);

}  // namespace tfm::decode

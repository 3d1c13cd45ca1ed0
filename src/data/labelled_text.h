#pragma once
// Labelled sentences for training a classifier: a TSV or CSV file of a text and a label a
// line, or a folder of one sub-folder per label.
//
//   TSV (.tsv, or any file whose first line has a tab): "text<TAB>label", split at the
//       line's last tab; a first line whose label column is "label" names the columns.
//   CSV (.csv): RFC 4180 fields (double quotes around a field with commas or quotes, ""
//       for a quote inside), two columns, text then label, unless a first line names
//       them ("label" and "text" or "sentence", in either order). Plain or .gz.
//   A folder: DIR/<label>/<file>, each file one text (its lines joined by spaces), as
//       the IMDb and 20 Newsgroups sets come.
// Every empty text or label, a line of another shape, a file that is not text, is an
// error naming the file and line.
#include <string>
#include <vector>

namespace tfm::data {

struct LabelledText {
  std::string text, label;
};

std::vector<LabelledText> read_labelled_text(const std::string& path);

// A sentence of labelled words, for a token classifier.
struct LabelledWords {
  std::vector<std::string> words, labels;
};

// A CoNLL file (CoNLL-2003's, WikiANN's, most NER sets'), plain or .gz: a word a line,
// the word in the first whitespace-separated column and its label in the last, sentences
// separated by blank lines, -DOCSTART- lines skipped.
std::vector<LabelledWords> read_conll(const std::string& path);

}  // namespace tfm::data

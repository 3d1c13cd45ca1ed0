#include "data/labelled_text.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "data/text.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A CSV line's fields (RFC 4180, without line breaks inside a field).
std::vector<std::string> csv_fields(const std::string& line, const std::string& where) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
    else if (c == '"' && (quoted || fields.back().empty())) quoted = !quoted;
    else if (c == ',' && !quoted) fields.emplace_back();
    else fields.back() += c;
  }
  TFM_CHECK(!quoted, where << ": a quoted field does not end on its line (fields with line breaks are not supported)");
  return fields;
}

// A TSV line's text and label: split at its last tab.
std::vector<std::string> tsv_fields(const std::string& line) {
  const size_t tab = line.rfind('\t');
  if (tab == std::string::npos) return {line};
  return {line.substr(0, tab), line.substr(tab + 1)};
}

// Which of a header's columns hold the text and the label, or {-1, -1} where the first
// line is not a header.
std::pair<int, int> header_columns(const std::vector<std::string>& fields) {
  int text = -1, label = -1;
  for (int i = 0; i < static_cast<int>(fields.size()); ++i) {
    const std::string name = lower(fields[static_cast<size_t>(i)]);
    if (name == "label") label = i;
    else if (name == "text" || name == "sentence") text = i;
  }
  if (label < 0) return {-1, -1};
  return {text >= 0 ? text : 1 - label, label};
}

std::vector<LabelledText> read_table(const std::string& path) {
  const std::string name = lower(path);
  const bool csv = name.ends_with(".csv") || name.ends_with(".csv.gz");
  LineReader in(path);
  std::vector<LabelledText> out;
  std::pair<int, int> columns{0, 1};
  int64_t number = 0;
  for (std::string line; in.next(line);) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    if (line.empty()) continue;
    const std::vector<std::string> fields = csv ? csv_fields(line, where) : tsv_fields(line);
    if (number == 1 && header_columns(fields).first >= 0) {
      columns = header_columns(fields);
      continue;
    }
    TFM_CHECK(static_cast<int>(fields.size()) > std::max(columns.first, columns.second),
              where << ": expected a text and a label " << (csv ? "(two CSV columns)" : "separated by a tab"));
    LabelledText t{fields[static_cast<size_t>(columns.first)], fields[static_cast<size_t>(columns.second)]};
    TFM_CHECK(!t.text.empty() && !t.label.empty(), where << ": an empty " << (t.text.empty() ? "text" : "label"));
    out.push_back(std::move(t));
  }
  TFM_CHECK(!out.empty(), path << ": holds no labelled text");
  return out;
}

// DIR/<label>/<file>: each file one text, in name order.
std::vector<LabelledText> read_folder(const std::string& dir) {
  std::vector<fs::path> labels;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory()) labels.push_back(e.path());
  std::sort(labels.begin(), labels.end());
  std::vector<LabelledText> out;
  for (const fs::path& label : labels) {
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(label))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      LineReader in(f.string());
      std::string text;
      for (std::string line; in.next(line);)
        if (!line.empty()) text += (text.empty() ? "" : " ") + line;
      TFM_CHECK(!text.empty(), f.string() << ": is empty");
      out.push_back({text, label.filename().string()});
    }
  }
  TFM_CHECK(!out.empty(), dir << ": holds no text files in label folders (DIR/<label>/<file>)");
  return out;
}

}  // namespace

std::vector<LabelledWords> read_conll(const std::string& path) {
  LineReader in(path);
  std::vector<LabelledWords> out(1);
  int64_t number = 0;
  for (std::string line; in.next(line);) {
    ++number;
    std::vector<std::string> columns;
    for (size_t at = 0; (at = line.find_first_not_of(" \t", at)) != std::string::npos;) {
      const size_t end = std::min(line.find_first_of(" \t", at), line.size());
      columns.push_back(line.substr(at, end - at));
      at = end;
    }
    if (columns.empty() || columns[0] == "-DOCSTART-") {
      if (!out.back().words.empty()) out.emplace_back();
      continue;
    }
    TFM_CHECK(columns.size() >= 2, path << ":" << number << ": expected a word and its label (CoNLL columns)");
    out.back().words.push_back(columns.front()), out.back().labels.push_back(columns.back());
  }
  if (out.back().words.empty()) out.pop_back();
  TFM_CHECK(!out.empty(), path << ": holds no labelled words");
  return out;
}

std::vector<LabelledText> read_labelled_text(const std::string& path) {
  TFM_CHECK(fs::exists(path), path << ": not found");
  return fs::is_directory(path) ? read_folder(path) : read_table(path);
}

}  // namespace tfm::data

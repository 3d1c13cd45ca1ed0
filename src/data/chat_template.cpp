#include "data/chat_template.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "data/hf_tokenizer.h"
#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("chat template: " + what); }

// Jinja's Undefined (a missing variable, key or item): false, printed as nothing, equal
// only to itself.
json undefined() { return json(json::value_t::discarded); }

// ---- Lexing the inside of a tag ----

struct Token {
  enum class Type { kName, kString, kNumber, kOperator, kEnd };
  Type type = Type::kEnd;
  std::string text{};  // a name, an operator, a string literal's value
  json number{};
};

// The `digits` hexadecimal digits of \xNN or \uNNNN at s[i]; i moves past them.
char32_t hex_escape(std::string_view s, size_t& i, size_t digits) {
  if (i + digits > s.size() || !std::all_of(s.begin() + i, s.begin() + i + digits, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    fail("a \\x or \\u escape in a string needs hexadecimal digits");
  const char32_t c = static_cast<char32_t>(std::stoul(std::string(s.substr(i, digits)), nullptr, 16));
  i += digits;
  return c;
}

// A string literal from its opening quote at s[i], with Python's escapes (\n \t \r \\ \' \"
// \xNN \uNNNN); i moves past it.
std::string string_literal(std::string_view s, size_t& i) {
  const char quote = s[i++];
  std::string out;
  while (i < s.size() && s[i] != quote) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i++];
      continue;
    }
    const char escaped = s[i + 1];
    i += 2;
    if (escaped == 'n') out += '\n';
    else if (escaped == 't') out += '\t';
    else if (escaped == 'r') out += '\r';
    else if (escaped == '\\' || escaped == '\'' || escaped == '"') out += escaped;
    else if (escaped == 'x' || escaped == 'u') append_utf8(out, hex_escape(s, i, escaped == 'x' ? 2 : 4));
    else fail(std::string("the escape \\") + escaped + " in a string is not supported");
  }
  if (i == s.size()) fail("a string is not closed");
  ++i;
  return out;
}

Token number_literal(std::string_view s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  const bool fraction = i + 1 < s.size() && s[i] == '.' && std::isdigit(static_cast<unsigned char>(s[i + 1]));
  if (!fraction) return {Token::Type::kNumber, "", json(std::stoll(std::string(s.substr(start, i - start))))};
  for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]));) ++i;
  return {Token::Type::kNumber, "", json(std::stod(std::string(s.substr(start, i - start))))};
}

std::vector<Token> lex(std::string_view s) {
  std::vector<Token> tokens;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isspace(c)) {
      ++i;
    } else if (std::isalpha(c) || c == '_') {
      const size_t start = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      tokens.push_back({Token::Type::kName, std::string(s.substr(start, i - start))});
    } else if (std::isdigit(c)) {
      tokens.push_back(number_literal(s, i));
    } else if (c == '\'' || c == '"') {
      tokens.push_back({Token::Type::kString, string_literal(s, i)});
    } else if (const auto two = s.substr(i, 2); two == "==" || two == "!=" || two == "<=" || two == ">=" || two == "//" || two == "**") {
      tokens.push_back({Token::Type::kOperator, std::string(two)});
      i += 2;
    } else if (std::string_view("+-*/%~|.,:()[]{}<>=").find(static_cast<char>(c)) != std::string_view::npos) {
      tokens.push_back({Token::Type::kOperator, std::string(1, static_cast<char>(c))});
      ++i;
    } else {
      fail(std::string("unexpected character '") + static_cast<char>(c) + "'");
    }
  }
  tokens.push_back({});
  return tokens;
}

// ---- Expressions ----

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind { kLiteral, kName, kList, kAttribute, kSubscript, kSlice, kCall, kMethod, kFilter, kTest, kNot, kNegate, kBinary, kCondition };
  Kind kind;
  std::string name;           // a variable, attribute, function, method, filter or test; a binary operator
  std::vector<ExprPtr> args;  // the operands, the object first; a slice's missing bounds are null
  json value;                 // a literal's
};

ExprPtr make(Expr::Kind kind, std::string name, std::vector<ExprPtr> args, json value = json()) {
  return std::make_shared<const Expr>(Expr{kind, std::move(name), std::move(args), std::move(value)});
}

const std::set<std::string> kFunctions = {"raise_exception", "range"};
const std::set<std::string> kMethods = {"strip", "lstrip", "rstrip", "lower", "startswith", "endswith", "split", "replace", "get"};
const std::set<std::string> kFilters = {"trim", "length", "count", "lower", "first", "last", "join", "default", "d", "string"};
const std::set<std::string> kTests = {"defined", "undefined", "none", "string", "number", "mapping", "sequence", "boolean"};

void require_known(const std::set<std::string>& known, const std::string& name, const char* what) {
  if (!known.count(name)) fail(std::string("the ") + what + " " + name + " is not supported");
}

// Jinja's expression grammar, loosest first: "a if b else c", or, and, not, comparisons
// and in, + -, ~, * / // %, unary -, then a primary with its attributes, subscripts,
// calls, filters and tests.
class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  ExprPtr expression() {
    ExprPtr e = disjunction();
    while (take("if")) {
      ExprPtr condition = disjunction();
      ExprPtr otherwise = take("else") ? expression() : make(Expr::Kind::kLiteral, "", {}, undefined());
      e = make(Expr::Kind::kCondition, "", {condition, e, otherwise});
    }
    return e;
  }
  // An expression without "if ... else" (a for loop's list, where "if" would filter it).
  ExprPtr disjunction() { return binary_chain({"or"}, [&] { return conjunction(); }); }

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(at_ + ahead, tokens_.size() - 1)]; }
  bool at(std::string_view text, size_t ahead = 0) const { return peek(ahead).type != Token::Type::kString && peek(ahead).text == text; }
  bool take(std::string_view text) {
    if (!at(text)) return false;
    ++at_;
    return true;
  }
  void expect(std::string_view text) {
    if (!take(text)) unexpected();
  }
  std::string name() {
    if (peek().type != Token::Type::kName) unexpected();
    return tokens_[at_++].text;
  }
  void finish() const {
    if (peek().type != Token::Type::kEnd) unexpected();
  }
  [[noreturn]] void unexpected() const {
    fail(peek().type == Token::Type::kEnd ? "an expression ends too soon" : "unexpected '" + peek().text + "'");
  }

 private:
  template <class Operand>
  ExprPtr binary_chain(std::initializer_list<std::string_view> operators, Operand operand) {
    ExprPtr e = operand();
    for (bool more = true; more;) {
      more = false;
      for (std::string_view op : operators)
        if (take(op)) {
          e = make(Expr::Kind::kBinary, std::string(op), {e, operand()});
          more = true;
          break;
        }
    }
    return e;
  }
  ExprPtr conjunction() { return binary_chain({"and"}, [&] { return negation(); }); }
  ExprPtr negation() { return take("not") ? make(Expr::Kind::kNot, "", {negation()}) : comparison(); }
  ExprPtr comparison() {
    ExprPtr e = sum();
    for (;;) {
      std::string op;
      for (const char* candidate : {"==", "!=", "<=", ">=", "<", ">", "in"})
        if (take(candidate)) {
          op = candidate;
          break;
        }
      if (op.empty() && at("not") && at("in", 1)) at_ += 2, op = "not in";
      if (op.empty()) return e;
      e = make(Expr::Kind::kBinary, op, {e, sum()});
    }
  }
  ExprPtr sum() { return binary_chain({"+", "-"}, [&] { return concatenation(); }); }
  ExprPtr concatenation() { return binary_chain({"~"}, [&] { return product(); }); }
  ExprPtr product() { return binary_chain({"*", "//", "/", "%"}, [&] { return unary(); }); }
  ExprPtr unary() {
    if (take("-")) return make(Expr::Kind::kNegate, "", {unary()});
    if (take("+")) return unary();
    return filters(postfix(primary()));
  }
  ExprPtr primary();
  ExprPtr postfix(ExprPtr e);
  ExprPtr filters(ExprPtr e);
  std::vector<ExprPtr> arguments(std::vector<ExprPtr> args);

  std::vector<Token> tokens_;
  size_t at_ = 0;
};

ExprPtr ExprParser::primary() {
  const Token token = peek();
  ++at_;
  if (token.type == Token::Type::kString) return make(Expr::Kind::kLiteral, "", {}, token.text);
  if (token.type == Token::Type::kNumber) return make(Expr::Kind::kLiteral, "", {}, token.number);
  if (token.type == Token::Type::kName) {
    if (token.text == "true" || token.text == "True") return make(Expr::Kind::kLiteral, "", {}, true);
    if (token.text == "false" || token.text == "False") return make(Expr::Kind::kLiteral, "", {}, false);
    if (token.text == "none" || token.text == "None") return make(Expr::Kind::kLiteral, "", {}, nullptr);
    if (!take("(")) return make(Expr::Kind::kName, token.text, {});
    require_known(kFunctions, token.text, "function");
    return make(Expr::Kind::kCall, token.text, arguments({}));
  }
  if (token.text == "(") {
    ExprPtr e = expression();
    if (at(",")) fail("tuples are not supported");
    expect(")");
    return e;
  }
  if (token.text == "[") {
    std::vector<ExprPtr> items;
    while (!take("]")) {
      if (!items.empty()) expect(",");
      items.push_back(expression());
    }
    return make(Expr::Kind::kList, "", std::move(items));
  }
  if (token.text == "{") fail("mapping literals are not supported");
  --at_;
  unexpected();
}

// A call's arguments, after its "(", appended to `args`; keyword arguments are refused.
std::vector<ExprPtr> ExprParser::arguments(std::vector<ExprPtr> args) {
  for (bool first = true; !take(")"); first = false) {
    if (!first) expect(",");
    if (peek().type == Token::Type::kName && at("=", 1)) fail("keyword arguments (" + peek().text + "=) are not supported");
    args.push_back(expression());
  }
  return args;
}

// .attribute, .method(...), [key], [start:stop]
ExprPtr ExprParser::postfix(ExprPtr e) {
  for (;;) {
    if (take(".")) {
      const std::string member = name();
      if (!take("(")) {
        e = make(Expr::Kind::kAttribute, member, {e});
        continue;
      }
      require_known(kMethods, member, "method");
      e = make(Expr::Kind::kMethod, member, arguments({e}));
    } else if (take("[")) {
      ExprPtr start = at(":") ? nullptr : expression();
      if (take("]")) {
        e = make(Expr::Kind::kSubscript, "", {e, start});
        continue;
      }
      expect(":");
      ExprPtr stop = at("]") || at(":") ? nullptr : expression();
      if (at(":")) fail("slices with a step are not supported");
      expect("]");
      e = make(Expr::Kind::kSlice, "", {e, start, stop});
    } else if (at("(")) {
      fail("calling a value is not supported");
    } else {
      return e;
    }
  }
}

// | filter, | filter(...), is test, is not test
ExprPtr ExprParser::filters(ExprPtr e) {
  for (;;) {
    if (take("|")) {
      const std::string filter = name();
      require_known(kFilters, filter, "filter");
      e = make(Expr::Kind::kFilter, filter, take("(") ? arguments({e}) : std::vector<ExprPtr>{e});
    } else if (take("is")) {
      const bool negated = take("not");
      const std::string test = name();
      require_known(kTests, test, "test");
      e = make(Expr::Kind::kTest, test, {e});
      if (negated) e = make(Expr::Kind::kNot, "", {e});
    } else {
      return e;
    }
  }
}

}  // namespace

// ---- Statements ----

struct ChatTemplate::Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet };
  Kind kind;
  std::string text{};                       // kText
  std::vector<std::string> targets{};       // kFor: the loop's variables; kSet: the variable
  std::vector<ExprPtr> exprs{};             // kOutput, kSet: the value; kIf: each branch's condition; kFor: the list
  std::vector<std::vector<Node>> bodies{};  // kIf: each branch's, then else's; kFor: the body
};

namespace {

using Node = ChatTemplate::Node;

// The template cut into text, {{ output }} and {% statement %}, comments dropped, with
// the whitespace that jinja2 (trim_blocks, lstrip_blocks, keep_trailing_newline false)
// and the tags' "-" take away.
struct Piece {
  Node::Kind kind;  // kText, kOutput, or kIf for any statement
  std::string text;
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Where the tag opened at `from` closes (`close`), past string literals.
size_t tag_end(const std::string& s, size_t from, std::string_view close) {
  char quote = 0;  // inside a string literal: its quote
  for (size_t i = from; i < s.size(); ++i) {
    if (quote) {
      if (s[i] == '\\') ++i;
      else if (s[i] == quote) quote = 0;
    } else if (s[i] == '\'' || s[i] == '"') {
      quote = s[i];
    } else if (s.compare(i, close.size(), close) == 0) {
      return i;
    }
  }
  fail("a tag is not closed");
}

// lstrip_blocks: the blanks between a line's start and a block tag go (`at_start`: the
// text starts the template, and so a line).
void strip_line_start(std::string& text, bool at_start) {
  const size_t newline = text.rfind('\n');
  const size_t line = newline == std::string::npos ? 0 : newline + 1;
  const bool blank = std::all_of(text.begin() + static_cast<std::ptrdiff_t>(line), text.end(), is_blank);
  if (blank && (newline != std::string::npos || at_start)) text.erase(line);
}

std::vector<Piece> cut(std::string source) {
  if (source.ends_with('\n')) source.pop_back();  // keep_trailing_newline false
  if (source.ends_with('\r')) source.pop_back();
  std::vector<Piece> pieces;
  bool strip_next = false, trim_next = false;  // after "-%}": all whitespace; after a block tag: one newline
  for (size_t pos = 0;;) {
    const size_t open = std::min({source.find("{{", pos), source.find("{%", pos), source.find("{#", pos)});
    std::string text = source.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    const char kind = open == std::string::npos ? 0 : source[open + 1];
    const size_t close = kind == 0 ? 0 : kind == '#' ? source.find("#}", open + 2) : tag_end(source, open + 2, kind == '{' ? "}}" : "%}");
    if (close == std::string::npos) fail("a comment is not closed");
    std::string inside = kind == 0 ? "" : source.substr(open + 2, close - open - 2);
    const bool strip_before = inside.starts_with('-'), keep_before = inside.starts_with('+'), strip_after = inside.ends_with('-');
    if (kind != 0 && strip_before) text.erase(std::find_if(text.rbegin(), text.rend(), [](char c) { return !is_space(c); }).base(), text.end());
    else if (kind != 0 && kind != '{' && !keep_before) strip_line_start(text, pos == 0);
    if (strip_next) text.erase(0, std::find_if(text.begin(), text.end(), [](char c) { return !is_space(c); }) - text.begin());
    else if (trim_next && text.starts_with('\n')) text.erase(0, 1);
    else if (trim_next && text.starts_with("\r\n")) text.erase(0, 2);
    if (!text.empty()) pieces.push_back({Node::Kind::kText, std::move(text)});
    if (kind == 0) return pieces;
    inside = inside.substr(strip_before || keep_before ? 1 : 0, inside.size() - (strip_before || keep_before ? 1 : 0) - (strip_after ? 1 : 0));
    if (kind != '#') pieces.push_back({kind == '{' ? Node::Kind::kOutput : Node::Kind::kIf, std::move(inside)});
    strip_next = strip_after, trim_next = kind != '{';
    pos = close + 2;
  }
}

// The pieces as a tree of nodes.
class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}

  std::vector<Node> parse() {
    std::string ended;
    std::unique_ptr<ExprParser> rest;
    return block({}, ended, rest);
  }

 private:
  // The nodes up to the statement whose keyword is one of `ends` (which is returned in
  // `ended`, with the rest of that statement in `rest`), or up to the end where `ends` is empty.
  std::vector<Node> block(const std::vector<std::string>& ends, std::string& ended, std::unique_ptr<ExprParser>& rest) {
    std::vector<Node> nodes;
    while (at_ < pieces_.size()) {
      const Piece& piece = pieces_[at_++];
      if (piece.kind == Node::Kind::kText) {
        nodes.push_back({.kind = Node::Kind::kText, .text = piece.text});
        continue;
      }
      auto parser = std::make_unique<ExprParser>(lex(piece.text));
      if (piece.kind == Node::Kind::kOutput) {
        nodes.push_back({.kind = Node::Kind::kOutput, .exprs = {parser->expression()}});
        parser->finish();
        continue;
      }
      const std::string keyword = parser->name();
      if (std::find(ends.begin(), ends.end(), keyword) != ends.end()) {
        ended = keyword;
        rest = std::move(parser);
        return nodes;
      }
      nodes.push_back(statement(keyword, *parser));
    }
    if (!ends.empty()) fail("{% " + ends.back() + " %} is missing");
    return nodes;
  }

  Node statement(const std::string& keyword, ExprParser& p) {
    if (keyword == "if") return if_statement(p);
    if (keyword == "for") return for_statement(p);
    if (keyword == "set") return set_statement(p);
    if (keyword.starts_with("end") || keyword == "elif" || keyword == "else") fail("{% " + keyword + " %} has no statement it ends");
    fail("{% " + keyword + " %} is not supported");
  }

  Node if_statement(ExprParser& p) {
    Node node{.kind = Node::Kind::kIf, .exprs = {p.expression()}};
    p.finish();
    for (;;) {
      std::string ended;
      std::unique_ptr<ExprParser> rest;
      node.bodies.push_back(block({"elif", "else", "endif"}, ended, rest));
      if (ended == "elif") node.exprs.push_back(rest->expression());
      rest->finish();
      if (ended == "elif") continue;
      if (ended == "else") {
        node.bodies.push_back(block({"endif"}, ended, rest));
        rest->finish();
      }
      return node;
    }
  }

  Node for_statement(ExprParser& p) {
    Node node{.kind = Node::Kind::kFor, .targets = {p.name()}};
    while (p.take(",")) node.targets.push_back(p.name());
    p.expect("in");
    node.exprs.push_back(p.disjunction());
    if (p.at("if") || p.at("recursive")) fail("{% for ... " + p.peek().text + " %} is not supported");
    p.finish();
    std::string ended;
    std::unique_ptr<ExprParser> rest;
    node.bodies.push_back(block({"else", "endfor"}, ended, rest));
    if (ended == "else") fail("{% for %} with {% else %} is not supported");
    rest->finish();
    return node;
  }

  Node set_statement(ExprParser& p) {
    Node node{.kind = Node::Kind::kSet, .targets = {p.name()}};
    if (p.at(".")) fail("{% set " + node.targets[0] + ".attribute %} (namespace()) is not supported");
    if (!p.take("=")) fail("{% set %} blocks and multiple targets are not supported");
    node.exprs.push_back(p.expression());
    p.finish();
    return node;
  }

  std::vector<Piece> pieces_;
  size_t at_ = 0;
};

// ---- Values, as Python and Jinja treat them ----

bool truthy(const json& v) {
  if (v.is_discarded() || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();  // lists, mappings
}

std::string type_name(const json& v) { return v.is_discarded() ? "undefined" : v.type_name(); }

// str(value), as {{ }} prints it.
std::string to_text(const json& v) {
  if (v.is_discarded()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number()) return v.dump();
  fail("printing " + type_name(v) + " values is not supported");
}

bool equal(const json& a, const json& b) {
  if (a.is_discarded() || b.is_discarded()) return a.is_discarded() && b.is_discarded();
  return a == b;
}

int64_t integer(const json& v, const char* what) {
  if (!v.is_number_integer()) fail(std::string(what) + " must be an integer, got a " + type_name(v));
  return v.get<int64_t>();
}

std::u32string characters(const json& s) { return code_points(s.get<std::string>(), "a string of the chat template"); }

// Python's s[start:stop] of a list or string, bounds clamped, negative ones from the end.
json slice(const json& v, const json& start, const json& stop) {
  if (!v.is_array() && !v.is_string()) fail("slicing a " + type_name(v) + " is not supported");
  const std::u32string chars = v.is_string() ? characters(v) : U"";
  const int64_t n = static_cast<int64_t>(v.is_string() ? chars.size() : v.size());
  const auto bound = [n](const json& b, int64_t fallback) {
    if (b.is_null()) return fallback;
    const int64_t i = integer(b, "a slice's bound");
    return std::clamp(i < 0 ? i + n : i, int64_t{0}, n);
  };
  const int64_t from = bound(start, 0), to = std::max(from, bound(stop, n));
  if (v.is_string()) return to_utf8(chars.substr(static_cast<size_t>(from), static_cast<size_t>(to - from)));
  return json(v.begin() + from, v.begin() + to);
}

// value[key]: a mapping's entry, a list's or string's item (negative from the end); Undefined where there is none.
json item(const json& v, const json& key) {
  if (v.is_discarded()) fail("an undefined value has no items");
  if (v.is_object() && key.is_string()) return v.contains(key.get<std::string>()) ? v[key.get<std::string>()] : undefined();
  if ((v.is_array() || v.is_string()) && key.is_number_integer()) {
    const json one = slice(v, key, key.get<int64_t>() == -1 ? json() : json(key.get<int64_t>() + 1));
    return one.empty() ? undefined() : v.is_array() ? one[0] : one;
  }
  return undefined();
}

// Python's str.strip(chars), lstrip, rstrip; whitespace as str.isspace without `chars`.
std::string strip(const json& s, const json& chars, bool left, bool right) {
  if (!s.is_string()) fail("strip of a " + type_name(s) + " is not supported");
  if (chars.is_null() || chars.is_discarded()) {
    std::string_view text = s.get_ref<const std::string&>();
    text = left ? lstrip_space(text) : text;
    return std::string(right ? rstrip_space(text) : text);
  }
  std::u32string text = characters(s);
  const std::u32string set = characters(chars);
  const auto in_set = [&](char32_t c) { return set.find(c) != std::u32string::npos; };
  size_t begin = 0, end = text.size();
  while (left && begin < end && in_set(text[begin])) ++begin;
  while (right && end > begin && in_set(text[end - 1])) --end;
  return to_utf8(text.substr(begin, end - begin));
}

// Python's str.split(sep), or without one, at runs of whitespace.
json split(const json& s, const json& separator) {
  json parts = json::array();
  const std::string text = s.get<std::string>();
  if (separator.is_string()) {
    const std::string sep = separator.get<std::string>();
    if (sep.empty()) fail("split with an empty separator");
    size_t start = 0;
    for (size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
      parts.push_back(text.substr(start, at - start));
      start = at + sep.size();
    }
    parts.push_back(text.substr(start));
    return parts;
  }
  std::string word;
  for (char32_t c : characters(s)) {
    if (!unicode::is_python_space(c)) append_utf8(word, c);
    else if (!word.empty()) parts.push_back(std::exchange(word, ""));
  }
  if (!word.empty()) parts.push_back(word);
  return parts;
}

json arithmetic(const std::string& op, const json& a, const json& b) {
  if (!a.is_number() || !b.is_number()) fail("cannot compute a " + type_name(a) + " " + op + " a " + type_name(b));
  const bool integers = a.is_number_integer() && b.is_number_integer();
  if (op == "/" || !integers) {
    const double x = a.get<double>(), y = b.get<double>();
    if (y == 0 && (op == "/" || op == "//" || op == "%")) fail("division by zero");
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "/") return x / y;
    if (op == "//") return std::floor(x / y);
    return x - y * std::floor(x / y);  // %: the divisor's sign, as Python's
  }
  const int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
  if (y == 0 && (op == "//" || op == "%")) fail("division by zero");
  const int64_t floor = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "//") return floor;
  return x - y * floor;
}

json binary(const std::string& op, const json& a, const json& b) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "~") return to_text(a) + to_text(b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string() && a.is_string()) found = b.get<std::string>().find(a.get<std::string>()) != std::string::npos;
    else if (b.is_array()) found = std::any_of(b.begin(), b.end(), [&](const json& x) { return equal(a, x); });
    else if (b.is_object() && a.is_string()) found = b.contains(a.get<std::string>());
    else fail("'in' a " + type_name(b) + " is not supported");
    return op == "in" ? found : !found;
  }
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    if (!(a.is_number() && b.is_number()) && !(a.is_string() && b.is_string())) fail("cannot compare a " + type_name(a) + " with a " + type_name(b));
    return op == "<" ? a < b : op == "<=" ? a <= b : op == ">" ? a > b : a >= b;
  }
  if (op == "+" && ((a.is_string() && b.is_string()) || (a.is_array() && b.is_array()))) {
    if (a.is_string()) return a.get<std::string>() + b.get<std::string>();
    json both = a;
    both.insert(both.end(), b.begin(), b.end());
    return both;
  }
  if (op == "*" && (a.is_string() || b.is_string()) && (a.is_number_integer() || b.is_number_integer())) {
    const json& text = a.is_string() ? a : b;
    std::string repeated;
    for (int64_t k = 0; k < (a.is_string() ? b : a).get<int64_t>(); ++k) repeated += text.get_ref<const std::string&>();
    return repeated;
  }
  if (op == "%" && a.is_string()) fail("string formatting with % is not supported");
  return arithmetic(op, a, b);
}

json method(const std::string& name, const json& self, const std::vector<json>& args) {
  const auto arg = [&](size_t i) { return i < args.size() ? args[i] : json(); };
  if (name == "get") {
    if (!self.is_object()) fail("get of a " + type_name(self) + " is not supported");
    const json found = item(self, arg(0));
    return found.is_discarded() ? arg(1) : found;
  }
  if (!self.is_string()) fail(name + " of a " + type_name(self) + " is not supported");
  const std::string text = self.get<std::string>();
  if (name == "strip" || name == "lstrip" || name == "rstrip") return strip(self, arg(0), name != "rstrip", name != "lstrip");
  if (name == "lower") return to_utf8(unicode::lower(characters(self)));
  if (name == "startswith" || name == "endswith") {
    if (!arg(0).is_string()) fail(name + " takes a string");
    return name == "startswith" ? text.starts_with(arg(0).get<std::string>()) : text.ends_with(arg(0).get<std::string>());
  }
  if (name == "split") return split(self, arg(0));
  if (!arg(0).is_string() || !arg(1).is_string() || arg(0).get<std::string>().empty()) fail("replace takes two strings, the first not empty");
  return replace_all(text, arg(0).get<std::string>(), arg(1).get<std::string>());  // replace
}

json filter(const std::string& name, const json& v, const std::vector<json>& args) {
  const auto arg = [&](size_t i, json fallback) { return i < args.size() ? args[i] : fallback; };
  if (name == "default" || name == "d") return v.is_discarded() || (truthy(arg(1, false)) && !truthy(v)) ? arg(0, "") : v;
  if (name == "string") return to_text(v);
  if (name == "trim") return strip(v, arg(0, nullptr), true, true);
  if (name == "lower") return method("lower", v, {});
  if (name == "length" || name == "count") {
    if (!v.is_string() && !v.is_array() && !v.is_object()) fail("length of a " + type_name(v) + " is not supported");
    return v.is_string() ? characters(v).size() : v.size();
  }
  if (name == "first" || name == "last") return v.empty() && !v.is_discarded() ? undefined() : item(v, name == "first" ? 0 : -1);
  if (!v.is_array()) fail("join of a " + type_name(v) + " is not supported");  // join
  std::string joined;
  for (size_t i = 0; i < v.size(); ++i) joined += (i ? to_text(arg(0, "")) : "") + to_text(v[i]);
  return joined;
}

bool test(const std::string& name, const json& v) {
  if (name == "defined") return !v.is_discarded();
  if (name == "undefined") return v.is_discarded();
  if (name == "none") return v.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "mapping") return v.is_object();
  if (name == "boolean") return v.is_boolean();
  return v.is_string() || v.is_array() || v.is_object();  // sequence
}

// Renders nodes with Jinja's scopes: a for loop's body has its own each time round
// (what it sets is gone afterwards), an if has none.
class Renderer {
 public:
  explicit Renderer(const json& variables) : scopes_{variables} {}

  void run(const std::vector<Node>& nodes, std::string& out) {
    for (const Node& node : nodes) {
      switch (node.kind) {
        case Node::Kind::kText: out += node.text; break;
        case Node::Kind::kOutput: out += to_text(eval(*node.exprs[0])); break;
        case Node::Kind::kSet: scopes_.back()[node.targets[0]] = eval(*node.exprs[0]); break;
        case Node::Kind::kIf: run_if(node, out); break;
        case Node::Kind::kFor: run_for(node, out); break;
      }
    }
  }

 private:
  void run_if(const Node& node, std::string& out) {
    for (size_t i = 0; i < node.exprs.size(); ++i)
      if (truthy(eval(*node.exprs[i]))) return run(node.bodies[i], out);
    if (node.bodies.size() > node.exprs.size()) run(node.bodies.back(), out);
  }

  void run_for(const Node& node, std::string& out) {
    const json list = eval(*node.exprs[0]);
    if (list.is_discarded()) return;  // Jinja iterates over Undefined as over nothing
    if (!list.is_array()) fail("a for loop over a " + type_name(list) + " is not supported");
    const int64_t n = static_cast<int64_t>(list.size());
    for (int64_t i = 0; i < n; ++i) {
      json scope = {{"loop", {{"index", i + 1}, {"index0", i}, {"revindex", n - i}, {"revindex0", n - i - 1},
                              {"first", i == 0}, {"last", i == n - 1}, {"length", n}}}};
      const json& value = list[static_cast<size_t>(i)];
      if (node.targets.size() == 1) scope[node.targets[0]] = value;
      else if (value.is_array() && value.size() == node.targets.size())
        for (size_t k = 0; k < node.targets.size(); ++k) scope[node.targets[k]] = value[k];
      else fail("cannot unpack a " + type_name(value) + " into " + std::to_string(node.targets.size()) + " loop variables");
      scopes_.push_back(std::move(scope));
      run(node.bodies[0], out);
      scopes_.pop_back();
    }
  }

  json lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
      if (scope->contains(name)) return (*scope)[name];
    return undefined();
  }

  std::vector<json> values(const std::vector<ExprPtr>& exprs, size_t from) {
    std::vector<json> out;
    for (size_t i = from; i < exprs.size(); ++i) out.push_back(eval(*exprs[i]));
    return out;
  }

  json call(const Expr& e) {
    const std::vector<json> args = values(e.args, 0);
    if (e.name == "raise_exception") fail(args.empty() ? "raise_exception()" : to_text(args[0]));
    if (args.empty() || args.size() > 2) fail("range takes one or two integers");  // range
    const int64_t from = args.size() == 2 ? integer(args[0], "range's start") : 0, to = integer(args.back(), "range's stop");
    json list = json::array();
    for (int64_t i = from; i < to; ++i) list.push_back(i);
    return list;
  }

  json eval(const Expr& e) {
    using Kind = Expr::Kind;
    switch (e.kind) {
      case Kind::kLiteral: return e.value;
      case Kind::kName: return lookup(e.name);
      case Kind::kList: return json(values(e.args, 0));
      case Kind::kAttribute: {
        const json object = eval(*e.args[0]);
        if (object.is_discarded()) fail("an undefined value has no attribute " + e.name);
        return object.is_object() ? item(object, e.name) : undefined();
      }
      case Kind::kSubscript: return item(eval(*e.args[0]), eval(*e.args[1]));
      case Kind::kSlice: return slice(eval(*e.args[0]), e.args[1] ? eval(*e.args[1]) : json(), e.args[2] ? eval(*e.args[2]) : json());
      case Kind::kCall: return call(e);
      case Kind::kMethod: return method(e.name, eval(*e.args[0]), values(e.args, 1));
      case Kind::kFilter: return filter(e.name, eval(*e.args[0]), values(e.args, 1));
      case Kind::kTest: return test(e.name, eval(*e.args[0]));
      case Kind::kNot: return !truthy(eval(*e.args[0]));
      case Kind::kNegate: return arithmetic("-", 0, eval(*e.args[0]));
      case Kind::kCondition: return truthy(eval(*e.args[0])) ? eval(*e.args[1]) : eval(*e.args[2]);
      case Kind::kBinary: break;
    }
    const json left = eval(*e.args[0]);
    if (e.name == "and") return truthy(left) ? eval(*e.args[1]) : left;
    if (e.name == "or") return truthy(left) ? left : eval(*e.args[1]);
    return binary(e.name, left, eval(*e.args[1]));
  }

  std::vector<json> scopes_;
};

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source)
    : body_(std::make_shared<const std::vector<Node>>(TemplateParser(cut(source)).parse())) {}

std::string ChatTemplate::render(const json& variables) const {
  if (!variables.is_object()) fail("the variables must be an object");
  std::string out;
  Renderer(variables).run(*body_, out);
  return out;
}

std::string apply_chat_template(const TokenizerConfig& config, const json& messages, bool add_generation_prompt) {
  const json& settings = config.json();
  json source = settings.value("chat_template", json());
  if (source.is_array()) {  // named templates: [{"name": "default", "template": "..."}, ...]
    const auto named = std::find_if(source.begin(), source.end(), [](const json& t) { return t.is_object() && t.value("name", json()) == "default"; });
    source = named == source.end() ? json() : named->value("template", json());
  }
  TFM_CHECK(source.is_string(), config.path() << ": no chat_template (a string, or a list of named templates with one named \"default\")");
  json variables = {{"messages", messages}, {"add_generation_prompt", add_generation_prompt}};
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const json token = settings.value(key, json());
    const json content = token.is_object() ? token.value("content", json()) : token;
    if (content.is_string()) variables[key] = content;
  }
  if (settings.contains("additional_special_tokens")) variables["additional_special_tokens"] = settings["additional_special_tokens"];
  return ChatTemplate(source.get<std::string>()).render(variables);
}

}  // namespace tfm::data

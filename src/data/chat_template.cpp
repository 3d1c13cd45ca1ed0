#include "data/chat_template.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <set>

#include "data/hf_tokenizer.h"
#include "data/jinja_values.h"
#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

using namespace jinja;  // NOLINT(google-build-using-namespace): the values and their operations

namespace {

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
using Keywords = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind { kLiteral, kName, kList, kMapping, kAttribute, kSubscript, kSlice, kCall, kMethod, kFilter, kTest, kNot, kNegate, kBinary, kCondition };
  Kind kind;
  std::string name;           // a variable, attribute, function, method, filter or test; a binary operator
  std::vector<ExprPtr> args;  // the operands, the object first; a slice's missing parts are null; a mapping's keys and values in turn
  json value{};               // a literal's
  Keywords keywords{};        // a call's name=value arguments
};

ExprPtr make(Expr::Kind kind, std::string name, std::vector<ExprPtr> args, json value = json(), Keywords keywords = {}) {
  return std::make_shared<const Expr>(Expr{kind, std::move(name), std::move(args), std::move(value), std::move(keywords)});
}

// A call's arguments, the object (of a method, filter or test) first.
struct CallArgs {
  std::vector<ExprPtr> positional;
  Keywords keywords{};
};

ExprPtr make_call(Expr::Kind kind, std::string name, CallArgs args) {
  return make(kind, std::move(name), std::move(args.positional), json(), std::move(args.keywords));
}

// Jinja's expression grammar, loosest first: "a if b else c", or, and, not, comparisons
// and in, + -, ~, * / // %, **, unary - and +, then a primary with its attributes,
// subscripts, calls, filters and tests.
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
  ExprPtr product() { return binary_chain({"*", "//", "/", "%"}, [&] { return power(); }); }
  ExprPtr power() { return binary_chain({"**"}, [&] { return unary(true); }); }
  // As jinja2's parse_unary: the operand of - and + takes no filters, the result does.
  ExprPtr unary(bool with_filters) {
    ExprPtr e = take("-") ? make(Expr::Kind::kNegate, "", {unary(false)}) : take("+") ? unary(false) : primary();
    e = postfix(e);
    return with_filters ? filters(e) : e;
  }
  ExprPtr primary();
  std::vector<ExprPtr> items(std::string_view close, bool pairs);
  ExprPtr postfix(ExprPtr e);
  ExprPtr filters(ExprPtr e);
  CallArgs arguments(std::vector<ExprPtr> first);

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
    return take("(") ? make_call(Expr::Kind::kCall, token.text, arguments({})) : make(Expr::Kind::kName, token.text, {});
  }
  if (token.text == "(") {
    if (take(")")) return make(Expr::Kind::kList, "", {});  // the empty tuple
    ExprPtr e = expression();
    if (take(")")) return e;
    expect(",");  // a tuple, which tfm holds as a list
    std::vector<ExprPtr> tuple = items(")", false);
    tuple.insert(tuple.begin(), e);
    return make(Expr::Kind::kList, "", std::move(tuple));
  }
  if (token.text == "[") return make(Expr::Kind::kList, "", items("]", false));
  if (token.text == "{") return make(Expr::Kind::kMapping, "", items("}", true));
  --at_;
  unexpected();
}

// The items of a list, tuple or mapping (key: value) up to `close`, a trailing comma allowed.
std::vector<ExprPtr> ExprParser::items(std::string_view close, bool pairs) {
  std::vector<ExprPtr> out;
  while (!take(close)) {
    if (!out.empty()) {
      expect(",");
      if (take(close)) break;
    }
    out.push_back(expression());
    if (pairs) expect(":"), out.push_back(expression());
  }
  return out;
}

// A call's arguments after its "(", appended to `first`: positional, then name=value.
CallArgs ExprParser::arguments(std::vector<ExprPtr> first) {
  CallArgs args{std::move(first)};
  for (bool start = true; !take(")"); start = false) {
    if (!start) expect(",");
    if (take(")")) break;
    if (peek().type == Token::Type::kName && at("=", 1)) {
      std::string keyword = name();
      expect("=");
      args.keywords.emplace_back(std::move(keyword), expression());
    } else {
      if (!args.keywords.empty()) fail("a positional argument after a keyword argument");
      args.positional.push_back(expression());
    }
  }
  return args;
}

// .attribute, .method(...), [key], [start:stop:step]
ExprPtr ExprParser::postfix(ExprPtr e) {
  for (;;) {
    if (take(".")) {
      const std::string member = name();
      e = take("(") ? make_call(Expr::Kind::kMethod, member, arguments({e})) : make(Expr::Kind::kAttribute, member, {e});
    } else if (take("[")) {
      ExprPtr start = at(":") ? nullptr : expression();
      if (take("]")) {
        e = make(Expr::Kind::kSubscript, "", {e, start});
        continue;
      }
      expect(":");
      ExprPtr stop = at("]") || at(":") ? nullptr : expression();
      ExprPtr step = take(":") && !at("]") ? expression() : nullptr;
      expect("]");
      e = make(Expr::Kind::kSlice, "", {e, start, stop, step});
    } else if (at("(")) {
      fail("calling a value is not supported");
    } else {
      return e;
    }
  }
}

// | filter, | filter(...), is test, is test(...), is not test
ExprPtr ExprParser::filters(ExprPtr e) {
  for (;;) {
    if (take("|")) {
      const std::string filter = name();
      e = make_call(Expr::Kind::kFilter, filter, take("(") ? arguments({e}) : CallArgs{{e}});
    } else if (take("is")) {
      const bool negated = take("not");
      const std::string test = name();
      e = make_call(Expr::Kind::kTest, test, take("(") ? arguments({e}) : CallArgs{{e}});
      if (negated) e = make(Expr::Kind::kNot, "", {e});
    } else {
      return e;
    }
  }
}

}  // namespace

// ---- Statements ----

struct ChatTemplate::Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetAttribute, kBreak, kContinue };
  Kind kind;
  std::string text{};                       // kText
  std::vector<std::string> targets{};       // kFor: the loop's variables; kSet: the variable; kSetAttribute: the namespace and attribute
  std::vector<ExprPtr> exprs{};             // kOutput, kSet*: the value; kIf: each branch's condition; kFor: the list, its "if"
  std::vector<std::vector<Node>> bodies{};  // kIf: each branch's, then else's; kFor: the body, then else's
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

  // The body up to `end`, which ends it alone.
  std::vector<Node> body_until(const std::string& end) {
    std::string ended;
    std::unique_ptr<ExprParser> rest;
    std::vector<Node> body = block({end}, ended, rest);
    rest->finish();
    return body;
  }

  Node statement(const std::string& keyword, ExprParser& p) {
    if (keyword == "if") return if_statement(p);
    if (keyword == "for") return for_statement(p);
    if (keyword == "set") return set_statement(p);
    if (keyword == "break" || keyword == "continue") {  // transformers loads jinja2's loopcontrols
      p.finish();
      return {.kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue};
    }
    if (keyword == "generation") {  // transformers' marker of the assistant's text: rendered as it stands
      p.finish();
      return {.kind = Node::Kind::kIf, .exprs = {make(Expr::Kind::kLiteral, "", {}, true)}, .bodies = {body_until("endgeneration")}};
    }
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
      if (ended == "else") node.bodies.push_back(body_until("endif"));
      return node;
    }
  }

  Node for_statement(ExprParser& p) {
    Node node{.kind = Node::Kind::kFor, .targets = {p.name()}};
    while (p.take(",")) node.targets.push_back(p.name());
    p.expect("in");
    node.exprs.push_back(p.disjunction());
    if (p.take("if")) node.exprs.push_back(p.expression());
    if (p.at("recursive")) fail("{% for ... recursive %} is not supported");
    p.finish();
    std::string ended;
    std::unique_ptr<ExprParser> rest;
    node.bodies.push_back(block({"else", "endfor"}, ended, rest));
    rest->finish();
    if (ended == "else") node.bodies.push_back(body_until("endfor"));
    return node;
  }

  Node set_statement(ExprParser& p) {
    Node node{.kind = Node::Kind::kSet, .targets = {p.name()}};
    if (p.take(".")) node.kind = Node::Kind::kSetAttribute, node.targets.push_back(p.name());
    if (p.at(",")) fail("{% set %} with several targets is not supported");
    if (!p.take("=")) fail("{% set %} blocks ({% endset %}) are not supported");
    node.exprs.push_back(p.expression());
    p.finish();
    return node;
  }

  std::vector<Piece> pieces_;
  size_t at_ = 0;
};

// Python's range(stop), range(start, stop[, step]).
json range(const Args& a) {
  if (a.positional.empty() || a.positional.size() > 3 || !a.keywords.empty()) fail("range takes one to three integers");
  const bool one = a.positional.size() == 1;
  const int64_t start = one ? 0 : integer(a.positional[0], "range's start"), stop = integer(a.positional[one ? 0 : 1], "range's stop");
  const int64_t step = a.positional.size() == 3 ? integer(a.positional[2], "range's step") : 1;
  if (step == 0) fail("range's step cannot be zero");
  json list = json::array();
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) list.push_back(i);
  return list;
}

// datetime.strftime(format) of `now` (through the C library, as CPython's).
std::string strftime(const json& format, const std::tm& now) {
  if (!format.is_string()) fail("strftime_now takes a format string");
  const std::string f = format.get<std::string>();
  std::string out(64 * (f.size() + 1), '\0');
  out.resize(std::strftime(out.data(), out.size(), f.c_str(), &now));
  return out;
}

// dict(mapping, key=value, ...) and namespace(...): a mapping of the keywords over the mapping given.
json keyword_mapping(const Args& a, const char* function) {
  json mapping = a.positional.empty() ? json::object() : a.positional[0];
  if (a.positional.size() > 1 || !mapping.is_object() || is_namespace(mapping)) fail(std::string(function) + " takes a mapping and name=value arguments");
  for (const auto& entry : a.keywords.items()) mapping[entry.key()] = entry.value();
  return mapping;
}

// The functions a chat template may call: jinja2's range, namespace and dict, and transformers' raise_exception and strftime_now.
const std::set<std::string, std::less<>> kFunctions = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

// Renders nodes with Jinja's scopes: a for loop's body has its own each time round
// (what it sets is gone afterwards), an if has none.
class Renderer {
 public:
  Renderer(const json& variables, const std::tm& now) : scopes_{variables}, now_(now) {}

  // What ends a run of nodes: their end, or {% break %} or {% continue %}.
  enum class Flow { kNext, kBreak, kContinue };

  Flow run(const std::vector<Node>& nodes, std::string& out) {
    for (const Node& node : nodes) {
      Flow flow = Flow::kNext;
      switch (node.kind) {
        case Node::Kind::kText: out += node.text; break;
        case Node::Kind::kOutput: out += to_text(eval(*node.exprs[0])); break;
        case Node::Kind::kSet: scopes_.back()[node.targets[0]] = eval(*node.exprs[0]); break;
        case Node::Kind::kSetAttribute: set_attribute(node); break;
        case Node::Kind::kIf: flow = run_if(node, out); break;
        case Node::Kind::kFor: run_for(node, out); break;
        case Node::Kind::kBreak: return Flow::kBreak;
        case Node::Kind::kContinue: return Flow::kContinue;
      }
      if (flow != Flow::kNext) return flow;
    }
    return Flow::kNext;
  }

 private:
  Flow run_if(const Node& node, std::string& out) {
    for (size_t i = 0; i < node.exprs.size(); ++i)
      if (truthy(eval(*node.exprs[i]))) return run(node.bodies[i], out);
    return node.bodies.size() > node.exprs.size() ? run(node.bodies.back(), out) : Flow::kNext;
  }

  // The loop's variables in `scope`, bound to `value` (unpacked where there are several).
  static void bind(const std::vector<std::string>& targets, const json& value, json& scope) {
    if (targets.size() == 1) {
      scope[targets[0]] = value;
      return;
    }
    if (!value.is_array() || value.size() != targets.size())
      fail("cannot unpack a " + type_name(value) + " into " + std::to_string(targets.size()) + " loop variables");
    for (size_t k = 0; k < targets.size(); ++k) scope[targets[k]] = value[k];
  }

  // What the loop goes through: its list's items that pass its "if", which sees each as the loop's variables.
  json loop_items(const Node& node) {
    const json items = iteration(eval(*node.exprs[0]));
    if (node.exprs.size() == 1) return items;
    json kept = json::array();
    for (const json& x : items) {
      scopes_.push_back(json::object());
      bind(node.targets, x, scopes_.back());
      const bool keep = truthy(eval(*node.exprs[1]));
      scopes_.pop_back();
      if (keep) kept.push_back(x);
    }
    return kept;
  }

  void run_for(const Node& node, std::string& out) {
    const json items = loop_items(node);
    if (items.empty() && node.bodies.size() > 1) run(node.bodies[1], out);  // {% else %}
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      json scope = {{"loop", {{"index", i + 1}, {"index0", i}, {"revindex", n - i}, {"revindex0", n - i - 1},
                              {"first", i == 0}, {"last", i == n - 1}, {"length", n}}}};
      if (i > 0) scope["loop"]["previtem"] = items[static_cast<size_t>(i - 1)];
      if (i + 1 < n) scope["loop"]["nextitem"] = items[static_cast<size_t>(i + 1)];
      bind(node.targets, items[static_cast<size_t>(i)], scope);
      scopes_.push_back(std::move(scope));
      const Flow flow = run(node.bodies[0], out);
      scopes_.pop_back();
      if (flow == Flow::kBreak) break;
    }
  }

  // {% set ns.attribute = value %}: the namespace where it is defined changes, seen from every scope.
  void set_attribute(const Node& node) {
    const std::string& name = node.targets[0];
    const auto scope = std::find_if(scopes_.rbegin(), scopes_.rend(), [&](const json& s) { return s.contains(name); });
    if (scope == scopes_.rend() || !is_namespace((*scope)[name])) fail("{% set " + name + "." + node.targets[1] + " %} needs " + name + " to be a namespace()");
    namespace_attributes((*scope)[name])[node.targets[1]] = eval(*node.exprs[0]);
  }

  json lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
      if (scope->contains(name)) return (*scope)[name];
    return kFunctions.count(name) ? function_value(name) : undefined();
  }

  Args arguments(const Expr& e, size_t from) {
    Args a;
    for (size_t i = from; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
    for (const auto& [keyword, value] : e.keywords) a.keywords[keyword] = eval(*value);
    return a;
  }

  json call(const Expr& e) {
    if (!is_function(lookup(e.name))) fail("the function " + e.name + " is not supported");
    const Args a = arguments(e, 0);
    if (e.name == "raise_exception") fail(to_text(a.at(0, "message", "")));
    if (e.name == "strftime_now") return strftime(a.at(0, "format", undefined()), now_);
    if (e.name == "namespace") return make_namespace(keyword_mapping(a, "namespace"));
    if (e.name == "dict") return keyword_mapping(a, "dict");
    return range(a);
  }

  json mapping(const Expr& e) {
    json m = json::object();
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      const json key = eval(*e.args[i]);
      if (!key.is_string()) fail("a mapping's keys must be strings, got a " + type_name(key));
      m[key.get<std::string>()] = eval(*e.args[i + 1]);
    }
    return m;
  }

  json optional(const ExprPtr& e) { return e ? eval(*e) : json(); }

  json eval(const Expr& e) {
    using Kind = Expr::Kind;
    switch (e.kind) {
      case Kind::kLiteral: return e.value;
      case Kind::kName: return lookup(e.name);
      case Kind::kList: return json(arguments(e, 0).positional);
      case Kind::kMapping: return mapping(e);
      case Kind::kAttribute: return attribute(eval(*e.args[0]), e.name);
      case Kind::kSubscript: return item(eval(*e.args[0]), eval(*e.args[1]));
      case Kind::kSlice: return slice(eval(*e.args[0]), optional(e.args[1]), optional(e.args[2]), optional(e.args[3]));
      case Kind::kCall: return call(e);
      case Kind::kMethod: return method(e.name, eval(*e.args[0]), arguments(e, 1));
      case Kind::kFilter: return filter(e.name, eval(*e.args[0]), arguments(e, 1));
      case Kind::kTest: return test(e.name, eval(*e.args[0]), arguments(e, 1));
      case Kind::kNot: return !truthy(eval(*e.args[0]));
      case Kind::kNegate: return binary("-", 0, eval(*e.args[0]));
      case Kind::kCondition: return truthy(eval(*e.args[0])) ? eval(*e.args[1]) : eval(*e.args[2]);
      case Kind::kBinary: break;
    }
    const json left = eval(*e.args[0]);
    if (e.name == "and") return truthy(left) ? eval(*e.args[1]) : left;
    if (e.name == "or") return truthy(left) ? left : eval(*e.args[1]);
    return binary(e.name, left, eval(*e.args[1]));
  }

  std::vector<json> scopes_;
  std::tm now_;
};

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source)
    : body_(std::make_shared<const std::vector<Node>>(TemplateParser(cut(source)).parse())) {}

std::string ChatTemplate::render(const json& variables) const {
  const std::time_t seconds = std::time(nullptr);
  std::tm now{};
  localtime_r(&seconds, &now);  // datetime.now(): the local time
  return render(variables, now);
}

std::string ChatTemplate::render(const json& variables, const std::tm& now) const {
  if (!variables.is_object()) fail("the variables must be an object");
  std::tm normalized = now;  // the weekday and day of the year from the date
  const std::time_t seconds = timegm(&normalized);
  gmtime_r(&seconds, &normalized);
  std::string out;
  Renderer(variables, normalized).run(*body_, out);
  return out;
}

std::string chat_template_source(const TokenizerConfig& config) {
  nlohmann::json source = config.json().value("chat_template", nlohmann::json());
  if (source.is_array()) {  // named templates: [{"name": "default", "template": "..."}, ...]
    const auto named = std::find_if(source.begin(), source.end(), [](const nlohmann::json& t) { return t.is_object() && t.value("name", nlohmann::json()) == "default"; });
    source = named == source.end() ? nlohmann::json() : named->value("template", nlohmann::json());
  }
  TFM_CHECK(source.is_string(), config.path() << ": no chat_template (a string, or a list of named templates with one named \"default\")");
  return source.get<std::string>();
}

std::string apply_chat_template(const TokenizerConfig& config, const json& messages, bool add_generation_prompt, const json& kwargs,
                                const std::optional<std::tm>& now) {
  const nlohmann::json& settings = config.json();
  const ChatTemplate chat_template(chat_template_source(config));
  TFM_CHECK(kwargs.is_object(), "the chat template's keyword arguments must be an object");
  // As transformers renders: tools and documents none unless given, the special tokens, then the keyword arguments.
  json variables = {{"messages", messages}, {"tools", nullptr}, {"documents", nullptr}, {"add_generation_prompt", add_generation_prompt}};
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const nlohmann::json token = settings.value(key, nlohmann::json());
    const nlohmann::json content = token.is_object() ? token.value("content", nlohmann::json()) : token;
    if (content.is_string()) variables[key] = content;
  }
  if (settings.contains("additional_special_tokens")) variables["additional_special_tokens"] = settings["additional_special_tokens"];
  for (const auto& entry : kwargs.items()) variables[entry.key()] = entry.value();
  return now ? chat_template.render(variables, *now) : chat_template.render(variables);
}

}  // namespace tfm::data

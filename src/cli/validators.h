#pragma once
// Range checks for numeric flags. CLI11's own print their bounds in full (DBL_MAX
// as 300 digits) and let NaN through; these name the bound and echo the value:
// "--batch must be at least 1 (got 0)". A value that does not parse as the flag's
// type fails the same way, so "--threads abc" is a usage error, not a crash.
#include <CLI/CLI.hpp>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>

namespace tfm::cli {

namespace detail {

template <typename T>
std::string number(T v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Passes values of type T for which `ok` holds; the message says "must be <wording>".
// Floating-point values must also be finite (NaN compares false with every bound anyway).
template <typename T>
CLI::Validator satisfies(std::function<bool(T)> ok, const std::string& wording) {
  return CLI::Validator(
      [ok, wording](std::string& text) -> std::string {
        T v{};
        bool good = CLI::detail::lexical_cast(text, v) && ok(v);
        if constexpr (std::is_floating_point_v<T>) good = good && std::isfinite(v);
        return good ? "" : "must be " + wording + " (got " + text + ")";
      },
      wording);
}

}  // namespace detail

// lo or more.
template <typename T>
CLI::Validator at_least(T lo) {
  return detail::satisfies<T>([lo](T v) { return v >= lo; }, (std::is_floating_point_v<T> ? "a number of at least " : "at least ") +
                                                                 detail::number(lo));
}

// From lo to hi, both included.
template <typename T>
CLI::Validator in_range(T lo, T hi) {
  return detail::satisfies<T>([lo, hi](T v) { return v >= lo && v <= hi; },
                              "from " + detail::number(lo) + " to " + detail::number(hi));
}

// The floating-point checks take the type of the flag's variable: a value is parsed
// as that type, so 1e300 given to a float is refused as infinite.

// From lo up to, but not including, hi: probabilities such as dropout or Adam's beta2.
template <typename T>
CLI::Validator below(T lo, T hi) {
  return detail::satisfies<T>([lo, hi](T v) { return v >= lo && v < hi; },
                              "at least " + detail::number(lo) + " and below " + detail::number(hi));
}

// Strictly between lo and hi: the masked LM's mask fraction.
template <typename T>
CLI::Validator strictly_between(T lo, T hi) {
  return detail::satisfies<T>([lo, hi](T v) { return v > lo && v < hi; },
                              "greater than " + detail::number(lo) + " and below " + detail::number(hi));
}

// Greater than zero and at most hi: learning rates.
template <typename T>
CLI::Validator positive_up_to(T hi) {
  return detail::satisfies<T>([hi](T v) { return v > 0 && v <= hi; }, "a number greater than 0 and at most " + detail::number(hi));
}

// Zero or more: weight decay, clipping norm, time limits.
template <typename T>
CLI::Validator finite_nonneg() {
  return at_least(T{0});
}

// Any finite number: exponents such as the length penalty.
template <typename T>
CLI::Validator finite_number() {
  return detail::satisfies<T>([](T) { return true; }, "a finite number");
}

// Either of two values: a ViT's channels, 1 (grey) or 3 (RGB).
template <typename T>
CLI::Validator either(T a, T b) {
  return detail::satisfies<T>([a, b](T v) { return v == a || v == b; }, detail::number(a) + " or " + detail::number(b));
}

// Flags that conflict: a usage error (exit status 2) like CLI11's own, thrown from a command's callback.
inline void require_usage(bool ok, const std::string& message) {
  if (!ok) throw CLI::ValidationError(message);
}

}  // namespace tfm::cli

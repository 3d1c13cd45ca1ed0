#pragma once
// The element types a tensor may hold. Models compute in f32; bf16 and f16 hold
// converted weights and activations, i64/i32 indices (token ids, targets, row indices),
// i8/u8 quantised values and raw bytes (images), boolean masks.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tfm {

enum class DType { f32, bf16, f16, i64, i32, i8, u8, boolean };

inline size_t size_of(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::i64: return 8;
    case DType::i8: case DType::u8: case DType::boolean: return 1;
  }
  return 0;
}

inline std::string to_string(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

// The dtype whose elements a C++ type stores (bf16 and f16 as their 16 bits).
struct bf16_bits { uint16_t bits; };
struct f16_bits { uint16_t bits; };
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16_bits>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16_bits>() { return DType::f16; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

// Calls f(T{}) with the C++ type T of `dtype`'s elements (every device's conversions).
template <class F>
void with_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16_bits{});
    case DType::f16: return f(f16_bits{});
    case DType::i64: return f(int64_t{});
    case DType::i32: return f(int32_t{});
    case DType::i8: return f(int8_t{});
    case DType::u8: return f(uint8_t{});
    case DType::boolean: return f(bool{});
  }
}

}  // namespace tfm

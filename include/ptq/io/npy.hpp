// .npy reading (float32 and float16 -> float32, C order) and writing (float32).
//
// Why not xtensor's xtensor/xnpy.hpp (0.24.3): it does not reject malformed files cleanly. It
// decodes the header length through a signed char (headers >= 128 bytes get a wrong length),
// never checks that the header or the data were actually read (a truncated file silently yields
// uninitialised values), multiplies the shape without an overflow check (a hostile header makes
// it allocate without bound), and has no float16. So this is a small hardened reader: every
// field of the header is parsed and checked, and every error names the file.
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/io/atomic_file.hpp"
#include "ptq/io/read_file.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

/// A float32 array read from a .npy file (C order).
struct npy_array {
  std::vector<std::size_t> shape;
  std::vector<float> data;
  std::string descr;  ///< the file's dtype, e.g. "<f4" or "<f2"

  [[nodiscard]] std::size_t size() const noexcept { return data.size(); }
};

namespace detail {

struct header_parser {
  std::string_view s;
  std::size_t i = 0;

  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
      ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool str(std::string& out) {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      return false;
    const char q = s[i++];
    const std::size_t b = i;
    while (i < s.size() && s[i] != q)
      ++i;
    if (i >= s.size())
      return false;
    out.assign(s.substr(b, i - b));
    ++i;
    return true;
  }
  bool word(std::string_view w) {
    ws();
    if (s.substr(i, w.size()) == w) {
      i += w.size();
      return true;
    }
    return false;
  }
  bool number(std::size_t& out) {
    ws();
    const std::size_t b = i;
    std::size_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      const auto d = static_cast<std::size_t>(s[i] - '0');
      if (v > (std::numeric_limits<std::size_t>::max() - d) / 10)
        return false;
      v = v * 10 + d;
      ++i;
    }
    if (i == b)
      return false;
    out = v;
    return true;
  }
};

/// An io error whose message starts with the file's name, as every .npy message does.
[[nodiscard]] inline error npy_err(errc c, std::string_view name, std::string_view what) {
  return make_error(c, std::string(name) + ": " + std::string(what));
}

}  // namespace detail

/// What a .npy header says, checked against the file's size.
struct npy_header {
  std::vector<std::size_t> shape;
  std::string descr;            ///< e.g. "<f4" or "<f2"
  std::size_t item = 0;         ///< bytes per value: 4 or 2
  std::size_t data_offset = 0;  ///< where the values start
  std::size_t count = 0;        ///< number of values (product of shape)

  /// The values in `bytes`, the file's bytes this header was parsed from, where they lie.
  [[nodiscard]] tensor_view view(std::string_view bytes) const {
    tensor_view v;
    v.data = bytes.data() + data_offset;
    v.type = item == 4 ? dtype::f32 : dtype::f16;
    v.shape = shape;
    return v;
  }
};

namespace detail {

/// Where the header dict of a .npy file is: [offset, offset + length) after the magic string,
/// the version and the length field.
struct npy_dict_span {
  std::size_t offset = 0;
  std::size_t length = 0;
};

[[nodiscard]] inline result<npy_dict_span> npy_header_span(std::string_view bytes,
                                                           std::string_view name) {
  static constexpr char magic[] = "\x93NUMPY";
  if (bytes.size() < 8 || bytes.substr(0, 6) != std::string_view(magic, 6))
    return npy_err(errc::bad_magic, name, "not a .npy file (bad magic string)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  npy_dict_span span;
  if (major == 1) {
    if (bytes.size() < 10)
      return npy_err(errc::truncated, name, "truncated header");
    span.length = static_cast<std::size_t>(static_cast<unsigned char>(bytes[8])) |
                  (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    span.offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return npy_err(errc::truncated, name, "truncated header");
    for (std::size_t b = 0; b < 4; ++b) {
      span.length |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + b])) << (8 * b);
    }
    span.offset = 12;
  } else {
    return npy_err(errc::bad_version, name,
                   "unsupported .npy format version " + std::to_string(major));
  }
  if (bytes.size() - span.offset < span.length)
    return npy_err(errc::truncated, name, "truncated header");
  return span;
}

/// The header dict's three keys.
struct npy_dict {
  std::string descr;
  bool fortran = false;
  std::vector<std::size_t> shape;
};

/// The dict's 'shape' tuple, after its key and colon.
[[nodiscard]] inline result<> parse_npy_shape(header_parser& p, std::string_view name,
                                              std::vector<std::size_t>& shape) {
  if (!p.eat('('))
    return npy_err(errc::bad_header, name, "malformed 'shape'");
  while (!p.eat(')')) {
    std::size_t d = 0;
    if (!p.number(d))
      return npy_err(errc::bad_header, name, "malformed 'shape'");
    shape.push_back(d);
    if (!p.eat(',')) {
      if (!p.eat(')'))
        return npy_err(errc::bad_header, name, "malformed 'shape'");
      break;
    }
  }
  return {};
}

/// The header dict `{'descr': ..., 'fortran_order': ..., 'shape': (...)}`, every key required.
[[nodiscard]] inline result<npy_dict> parse_npy_dict(std::string_view text, std::string_view name) {
  header_parser p{text};
  npy_dict out;
  bool have_descr = false, have_fortran = false, have_shape = false;
  if (!p.eat('{'))
    return npy_err(errc::bad_header, name, "header is not a dict");
  while (!p.eat('}')) {
    std::string key;
    if (!p.str(key) || !p.eat(':'))
      return npy_err(errc::bad_header, name, "malformed header");
    if (key == "descr") {
      if (!p.str(out.descr))
        return npy_err(errc::bad_header, name, "malformed 'descr'");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (p.word("True")) {
        out.fortran = true;
      } else if (!p.word("False")) {
        return npy_err(errc::bad_header, name, "malformed 'fortran_order'");
      }
      have_fortran = true;
    } else if (key == "shape") {
      if (auto st = parse_npy_shape(p, name, out.shape); !st)
        return st.error();
      have_shape = true;
    } else {
      return npy_err(errc::bad_header, name, "unknown header key '" + key + "'");
    }
    if (!p.eat(',')) {
      if (!p.eat('}'))
        return npy_err(errc::bad_header, name, "malformed header");
      break;
    }
  }
  if (!have_descr || !have_fortran || !have_shape)
    return npy_err(errc::bad_header, name, "header lacks descr, fortran_order or shape");
  return out;
}

/// Bytes per value of a dtype ptq reads: float32 or float16, little-endian or native.
[[nodiscard]] inline result<std::size_t> npy_item_size(const std::string& descr,
                                                       std::string_view name) {
  if (descr == "<f4" || descr == "=f4" || descr == "f4")
    return std::size_t{4};
  if (descr == "<f2" || descr == "=f2" || descr == "f2")
    return std::size_t{2};
  return npy_err(errc::unsupported_dtype, name,
                 "unsupported dtype '" + descr + "' (expected float32 '<f4' or float16 '<f2')");
}

}  // namespace detail

/// Parses and checks the header of a .npy file and that the data after it has exactly the
/// header's size. `name` labels error messages (usually the path).
[[nodiscard]] inline result<npy_header> parse_npy_header(std::string_view bytes,
                                                         std::string_view name = "npy") {
  const auto err = detail::npy_err;
  auto span = detail::npy_header_span(bytes, name);
  if (!span)
    return span.error();
  auto dict = detail::parse_npy_dict(bytes.substr(span->offset, span->length), name);
  if (!dict)
    return dict.error();
  auto item = detail::npy_item_size(dict->descr, name);
  if (!item)
    return item.error();
  if (dict->fortran)
    return err(errc::fortran_order, name, "Fortran-ordered arrays are not supported");
  std::size_t n = 1;
  for (auto d : dict->shape) {
    if (d != 0 && n > (std::size_t{1} << 40) / d)
      return err(errc::file_too_large, name, "array is too large");
    n *= d;
  }
  const std::size_t pos = span->offset + span->length;
  const std::size_t have = bytes.size() - pos;
  const std::size_t want = n * item.value();
  if (have < want) {
    return err(errc::truncated, name,
               "truncated data: expected " + std::to_string(want) + " bytes, found " +
                   std::to_string(have));
  }
  if (have > want) {
    return err(errc::trailing_data, name,
               std::to_string(have - want) + " bytes after the array data");
  }
  npy_header out;
  out.shape = std::move(dict->shape);
  out.descr = std::move(dict->descr);
  out.item = item.value();
  out.data_offset = pos;
  out.count = n;
  return out;
}

/// Parses the bytes of a .npy file into float32 values (a copy; io/npy_map.hpp has none).
/// `name` labels error messages (usually the path).
[[nodiscard]] inline result<npy_array> try_parse_npy(std::string_view bytes,
                                                     std::string_view name = "npy") {
  auto header = parse_npy_header(bytes, name);
  if (!header)
    return header.error();
  npy_header& h = header.value();
  npy_array out;
  out.shape = std::move(h.shape);
  out.descr = std::move(h.descr);
  out.data.resize(h.count);
  h.view(bytes).convert(0, h.count, out.data.data());
  return out;
}

/// Reads a .npy file (float32 or float16, C order) as float32; files above `max_bytes` and
/// non-regular files are refused (try_read_file).
[[nodiscard]] inline result<npy_array> try_read_npy(
    const std::string& path, std::uint64_t max_bytes = default_tensor_file_limit) {
  auto bytes = try_read_file(path, max_bytes);
  if (!bytes)
    return bytes.error();
  return try_parse_npy(bytes.value(), path);
}

#if PTQ_EXCEPTIONS
/// try_parse_npy and try_read_npy, throwing ptq::exception on an error.
[[nodiscard]] inline npy_array parse_npy(std::string_view bytes, std::string_view name = "npy") {
  return value_or_throw(try_parse_npy(bytes, name));
}
[[nodiscard]] inline npy_array read_npy(const std::string& path,
                                        std::uint64_t max_bytes = default_tensor_file_limit) {
  return value_or_throw(try_read_npy(path, max_bytes));
}
#endif

/// The header of a version-1.0 .npy file holding float32 values with `shape` (C order): the
/// bytes before the data.
[[nodiscard]] inline std::string npy_header_bytes(const std::vector<std::size_t>& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    dict += shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : "");
  }
  dict += "), }";
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>((dict.size() >> 8) & 0xFF);
  out += dict;
  return out;
}

[[nodiscard]] inline std::size_t shape_elements(const std::vector<std::size_t>& shape) noexcept {
  std::size_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

/// The bytes of a version-1.0 .npy file holding float32 `data` with `shape` (C order).
[[nodiscard]] inline std::string format_npy(const float* data,
                                            const std::vector<std::size_t>& shape) {
  std::string out = npy_header_bytes(shape);
  const std::size_t n = shape_elements(shape);
  const std::size_t at = out.size();
  out.resize(at + 4 * n);
  if (n != 0u)
    std::memcpy(&out[at], data, 4 * n);
  return out;
}

/// Writes float32 `data` with `shape` as a .npy file, atomically (write_file_atomic), from
/// `data` itself: no copy of the values.
[[nodiscard]] inline result<> write_npy(const std::string& path, const float* data,
                                        const std::vector<std::size_t>& shape) {
  const std::string header = npy_header_bytes(shape);
  return write_file_atomic(path, {header, std::string_view(reinterpret_cast<const char*>(data),
                                                           4 * shape_elements(shape))});
}

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq

// safetensors reading and writing (the format PyTorch models are shared in): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, the data.
// The reader rejects malformed files with a message that names the problem; floating-point
// tensors (F32, F16, BF16, F64) convert to float32. Adds nlohmann_json.
// Depends on: core, detail and nlohmann_json.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/error.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/detail/json_parse.hpp"
#include "ptq/io/atomic_file.hpp"
#include "ptq/io/mapped_file.hpp"
#include "ptq/io/read_file.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

/// One tensor's header entry; `begin`/`end` are byte offsets into the data section.
struct safetensors_entry {
  std::string name;
  std::string dtype;
  std::vector<std::size_t> shape;
  std::size_t begin = 0;
  std::size_t end = 0;
  [[nodiscard]] std::size_t numel() const noexcept {
    std::size_t n = 1;
    for (const auto d : shape)
      n *= d;
    return n;
  }
};

/// A float32 tensor in C order.
struct float_tensor {
  std::vector<std::size_t> shape;
  std::vector<float> data;
};

/// A tensor of the file as a tensor_view: F32, F16 and BF16 read where they lie in the mapped
/// file, F64 converted into `owned`. `view` stays valid while the file and this object live
/// (one into a mapped file also while `view.owner`, the mapping, lives). Move-only (a copy would
/// point into the original's `owned`).
struct file_tensor {
  tensor_view view;
  std::vector<float> owned;

  file_tensor() = default;
  file_tensor(file_tensor&&) noexcept = default;
  file_tensor& operator=(file_tensor&&) noexcept = default;
  file_tensor(const file_tensor&) = delete;
  file_tensor& operator=(const file_tensor&) = delete;
  ~file_tensor() = default;
};

/// A parsed safetensors file: entries in data order, the metadata, and the file's bytes
/// (mapped by read_safetensors, so a file is in memory once, in the page cache; shared with the
/// views of its tensors, tensor_view::owner, so a view may outlive this object). Move-only.
struct safetensors_file {
  std::vector<safetensors_entry> entries;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::shared_ptr<const mapped_file> bytes;  ///< the whole file
  std::size_t data_offset = 0;               ///< where the data section starts in `bytes`

  /// The data section; entries' begin/end are offsets into it.
  [[nodiscard]] std::string_view data() const noexcept {
    return bytes ? bytes->bytes().substr(data_offset) : std::string_view{};
  }

  [[nodiscard]] const safetensors_entry* find(std::string_view name) const noexcept {
    for (const auto& e : entries) {
      if (e.name == name)
        return &e;
    }
    return nullptr;
  }

  /// The named tensor as float32 (a copy): errc::tensor_not_found when it is missing,
  /// errc::unsupported_dtype when it is not a floating-point tensor.
  [[nodiscard]] result<float_tensor> get(std::string_view name) const;

  /// The named tensor where it lies (F32, F16, BF16; F64 converted to float32), named as in the
  /// file; the same errors as get().
  [[nodiscard]] result<file_tensor> view(std::string_view name) const;
};

namespace detail {

[[nodiscard]] inline std::size_t dtype_size(std::string_view d) noexcept {
  if (d == "F64" || d == "I64" || d == "U64")
    return 8;
  if (d == "F32" || d == "I32" || d == "U32")
    return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16")
    return 2;
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E4M3" || d == "F8_E5M2")
    return 1;
  return 0;
}

}  // namespace detail

inline result<file_tensor> safetensors_file::view(std::string_view name) const {
  const auto* e = find(name);
  if (!e) {
    return make_error(errc::tensor_not_found,
                      "tensor '" + std::string(name) + "' is not in the file");
  }
  file_tensor out;
  tensor_view& v = out.view;
  v.shape = e->shape;
  v.name = e->name;
  const char* src = data().data() + e->begin;
  if (e->dtype == "F32" || e->dtype == "F16" || e->dtype == "BF16") {
    v.data = src;
    v.type = e->dtype == "F32" ? dtype::f32 : (e->dtype == "F16" ? dtype::f16 : dtype::bf16);
    if (bytes->is_mapped())  // the page cache's pages: an observer may keep them (no copy)
      v.owner = bytes;
    return out;
  }
  if (e->dtype != "F64") {
    return make_error(errc::unsupported_dtype,
                      "tensor '" + std::string(name) + "' has dtype " + e->dtype +
                          "; a floating-point tensor (F32, F16, BF16, F64) is needed");
  }
  const std::size_t n = e->numel();
  out.owned.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    double d = 0;
    std::memcpy(&d, src + i * 8, 8);
    out.owned[i] = static_cast<float>(d);
  }
  v.data = out.owned.data();
  return out;
}

inline result<float_tensor> safetensors_file::get(std::string_view name) const {
  auto t = view(name);
  if (!t)
    return t.error();
  float_tensor out;
  out.shape = t.value().view.shape;
  out.data.resize(t.value().view.size());
  t.value().view.convert(0, out.data.size(), out.data.data());
  return out;
}

/// Parses a safetensors file held in memory. Checks: the header length fits the file, the header
/// is a JSON object, every entry has a known dtype, a shape and data offsets inside the data
/// section, the byte size matches dtype x shape, and no two tensors overlap. `name` (usually the
/// path) starts every error message when it is given.
[[nodiscard]] inline result<safetensors_file> try_parse_safetensors(mapped_file file,
                                                                    std::string_view name = {}) {
  const std::string_view bytes = file.bytes();
  const auto fail = [&](errc code, const std::string& what) {
    return make_error(code, name.empty() ? what : std::string(name) + ": " + what);
  };
  if (bytes.size() < 8) {
    return fail(errc::truncated, "file is " + std::to_string(bytes.size()) +
                                     " bytes; too short for the header length");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (n > bytes.size() - 8 || n > (std::uint64_t{100} << 20)) {
    return fail(errc::bad_header, "header length " + std::to_string(n) +
                                      " does not fit the file (" + std::to_string(bytes.size()) +
                                      " bytes)");
  }
  const std::string_view header(bytes.data() + 8, static_cast<std::size_t>(n));
  const auto parsed = ptq::detail::parse_json_ordered(header);
  if (!parsed.ok || !parsed.value.is_object())
    return fail(errc::bad_header, "header is not a JSON object");
  if (!parsed.duplicate.empty()) {  // nlohmann's own parser would keep the last one silently
    return fail(errc::bad_header,
                "the header names '" + parsed.duplicate + "' twice (a tensor or a key of one)");
  }
  const auto& j = parsed.value;
  safetensors_file out;
  out.data_offset = 8 + static_cast<std::size_t>(n);
  const std::size_t data_size = bytes.size() - out.data_offset;
  for (const auto& [key, v] : j.items()) {
    if (key == "__metadata__") {
      if (!v.is_object())
        return fail(errc::bad_header, "__metadata__ is not an object");
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string())
          return fail(errc::bad_header, "__metadata__ value '" + mk + "' is not a string");
        out.metadata.emplace_back(mk, mv.get<std::string>());
      }
      continue;
    }
    const std::string at = "tensor '" + key + "': ";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      return fail(errc::bad_header, at + "needs dtype, shape and data_offsets");
    }
    safetensors_entry e;
    e.name = key;
    if (!v["dtype"].is_string() || detail::dtype_size(v["dtype"].get<std::string>()) == 0)
      return fail(errc::unsupported_dtype, at + "unsupported dtype " + v["dtype"].dump());
    e.dtype = v["dtype"].get<std::string>();
    if (!v["shape"].is_array())
      return fail(errc::bad_header, at + "shape is not a list");
    std::size_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned())
        return fail(errc::bad_header, at + "shape has a value that is not a non-negative integer");
      const auto dim = d.get<std::uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<std::size_t>::max() / dim)
        return fail(errc::bad_header, at + "shape is too large");
      numel *= static_cast<std::size_t>(dim);
      e.shape.push_back(static_cast<std::size_t>(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      return fail(errc::bad_offsets, at + "data_offsets must be [begin, end]");
    }
    const auto b = off[0].get<std::uint64_t>();
    const auto en = off[1].get<std::uint64_t>();
    const std::string span = "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "]";
    if (b > en)
      return fail(errc::bad_offsets, at + span + " are reversed (begin is after end)");
    if (en > data_size) {
      return fail(errc::bad_offsets, at + span + " are outside the data section (" +
                                         std::to_string(data_size) + " bytes)");
    }
    e.begin = static_cast<std::size_t>(b);
    e.end = static_cast<std::size_t>(en);
    const std::size_t esz = detail::dtype_size(e.dtype);
    if (numel > std::numeric_limits<std::size_t>::max() / esz || numel * esz != e.end - e.begin) {
      return fail(errc::bad_offsets, at + "shape and dtype need " + std::to_string(numel) + " x " +
                                         std::to_string(esz) + " bytes, but data_offsets span " +
                                         std::to_string(e.end - e.begin));
    }
    out.entries.push_back(std::move(e));
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < out.entries.size(); ++i) {
    if (out.entries[i].begin < out.entries[i - 1].end) {
      return fail(errc::bad_offsets, "tensors '" + out.entries[i - 1].name + "' and '" +
                                         out.entries[i].name + "' overlap in the data section");
    }
  }
  out.bytes = std::make_shared<const mapped_file>(std::move(file));
  return out;
}

/// Parses a safetensors file whose bytes are in memory (they are moved into the result).
[[nodiscard]] inline result<safetensors_file> try_parse_safetensors(std::string bytes,
                                                                    std::string_view name = {}) {
  return try_parse_safetensors(mapped_file{std::move(bytes)}, name);
}

#if PTQ_EXCEPTIONS
/// try_parse_safetensors, throwing ptq::exception on an error.
[[nodiscard]] inline safetensors_file parse_safetensors(mapped_file file,
                                                        std::string_view name = {}) {
  return value_or_throw(try_parse_safetensors(std::move(file), name));
}
[[nodiscard]] inline safetensors_file parse_safetensors(std::string bytes,
                                                        std::string_view name = {}) {
  return value_or_throw(try_parse_safetensors(std::move(bytes), name));
}
#endif

/// Maps and parses a safetensors file; every error names the path. Files above `max_bytes` and
/// non-regular files are refused (try_map_file, with try_read_file's checks and messages).
[[nodiscard]] inline result<safetensors_file> read_safetensors(
    const std::string& path, std::uint64_t max_bytes = default_mapped_file_limit) {
  auto file = try_map_file(path, max_bytes);
  if (!file)
    return file.error();
  return try_parse_safetensors(std::move(file).value(), path);
}

/// A tensor to write: name, shape and float32 values (C order).
struct named_tensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<float> data;
};

/// The header of a safetensors file holding `tensors` as F32, in the given order: the 8-byte
/// length and the JSON, padded to a multiple of 8. The data follows, tensor after tensor.
[[nodiscard]] inline std::string safetensors_header_bytes(
    const std::vector<named_tensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = header["__metadata__"];
    m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata)
      m[k] = v;
  }
  std::size_t offset = 0;
  std::unordered_set<std::string_view> names;  // appended: linear in the tensors
  for (const auto& t : tensors) {
    const std::size_t bytes = t.data.size() * 4;
    nlohmann::ordered_json entry = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    if (names.insert(t.name).second && t.name != "__metadata__") {
      ptq::detail::append_member(header, t.name, std::move(entry));
    } else {
      header[t.name] = std::move(entry);
    }
    offset += bytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0)
    h += ' ';
  std::string out(8, '\0');
  std::uint64_t n = h.size();
  for (std::size_t i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xFFU);
  out += h;
  return out;
}

/// A safetensors file as the pieces write_file_atomic writes: `header` (owned), then views of
/// each tensor's data, valid while the tensors live.
struct safetensors_pieces {
  std::string header;
  std::vector<std::string_view> data;

  /// Every piece in file order.
  [[nodiscard]] std::vector<std::string_view> pieces() const {
    std::vector<std::string_view> out{header};
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
};

[[nodiscard]] inline safetensors_pieces layout_safetensors(
    const std::vector<named_tensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  safetensors_pieces out{safetensors_header_bytes(tensors, metadata), {}};
  for (const auto& t : tensors)
    out.data.emplace_back(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
  return out;
}

/// The bytes of a safetensors file holding `tensors` as F32, in the given order.
[[nodiscard]] inline std::string format_safetensors(
    const std::vector<named_tensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  const safetensors_pieces layout = layout_safetensors(tensors, metadata);
  std::string out;
  for (const std::string_view piece : layout.pieces())
    out.append(piece);
  return out;
}

/// Writes a safetensors file atomically, from the tensors' own data (no joined copy).
[[nodiscard]] inline result<> write_safetensors(
    const std::string& path, const std::vector<named_tensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  return write_file_atomic(path, layout_safetensors(tensors, metadata).pieces());
}

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq

// .npy reading without a copy: the file is mapped (core/mapped_file.hpp), its header checked by
// the same parser as read_npy (every error and message is the same), and float32 data is used
// where it lies in the page cache. float16 data, and float32 data at an offset that is not a
// multiple of 4 (a hand-made header; numpy pads headers to 64 bytes), are converted into an
// owned float32 buffer instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/core/mapped_file.hpp"
#include "ptq/io/npy.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

/// A .npy file's values as float32 (C order), read in place when the file holds aligned float32.
/// Owns the mapping; `data()` stays valid while the view lives (moves keep it valid).
class npy_view {
 public:
  std::vector<std::size_t> shape;
  std::string descr;  ///< the file's dtype, e.g. "<f4" or "<f2"

  [[nodiscard]] const float* data() const noexcept {
    if (!converted_.empty() || count_ == 0)
      return converted_.data();
    // Mapped memory has no declared type; the offset is a multiple of alignof(float) (checked).
    return reinterpret_cast<const float*>(file_.bytes().data() + offset_);
  }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  /// True when data() points into the file's mapping (no copy was made).
  [[nodiscard]] bool zero_copy() const noexcept {
    return file_.is_mapped() && converted_.empty() && count_ > 0;
  }

  /// Checks the header of `file`'s bytes and views (or converts) its values.
  [[nodiscard]] static result<npy_view> from(mapped_file file, std::string_view name) {
    auto header = parse_npy_header(file.bytes(), name);
    if (!header)
      return header.error();
    npy_header& h = header.value();
    npy_view out;
    out.shape = std::move(h.shape);
    out.descr = std::move(h.descr);
    out.count_ = h.count;
    out.offset_ = h.data_offset;
    const char* src = file.bytes().data() + h.data_offset;
    if (h.count > 0 &&
        (h.item != 4 || reinterpret_cast<std::uintptr_t>(src) % alignof(float) != 0)) {
      out.converted_.resize(h.count);
      detail::npy_to_float(src, h.item, h.count, out.converted_.data());
    } else {
      out.file_ = std::move(file);
    }
    return out;
  }

 private:
  mapped_file file_;
  std::vector<float> converted_;
  std::size_t offset_ = 0;
  std::size_t count_ = 0;
};

/// Maps a .npy file (float32 or float16, C order) and views its values as float32; files above
/// `max_bytes` and non-regular files are refused, as by read_npy, with the same messages.
[[nodiscard]] inline result<npy_view> map_npy(const std::string& path,
                                              std::uint64_t max_bytes = default_tensor_file_limit) {
  auto file = map_file(path, max_bytes);
  if (!file)
    return file.error();
  return npy_view::from(std::move(file).value(), path);
}

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq

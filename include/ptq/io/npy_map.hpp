// .npy reading without a copy: the file is mapped (io/mapped_file.hpp), its header checked by
// the same parser as try_read_npy (every error and message is the same), and float32 data is used
// where it lies in the page cache. float16 data, and float32 data at an offset that is not a
// multiple of 4 (a hand-made header; numpy pads headers to 64 bytes), are converted into an
// owned float32 buffer, or (npy_values::as_stored) left for the consumer to convert in blocks.
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/io/mapped_file.hpp"
#include "ptq/io/npy.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace io {

/// What npy_view does with values it cannot use in place (float16, or float32 at an offset that
/// is not a multiple of 4).
enum class npy_values : std::uint8_t {
  as_float32,  ///< converted into an owned float32 buffer when mapped: data() always works
  as_stored,   ///< left in the file: view() has them, a consumer converts them in blocks
};

/// A .npy file's values, read in place when the file holds aligned float32. Shares the mapping
/// with the views it gives (tensor_view::owner); data() and view() stay valid while the npy_view
/// lives (moves keep them valid), a view of the mapping also while its owner does.
class npy_view {
 public:
  std::vector<std::size_t> shape;
  std::string descr;  ///< the file's dtype, e.g. "<f4" or "<f2"

  /// The values as float32; nullptr when they are neither in place nor converted (as_stored).
  [[nodiscard]] const float* data() const noexcept {
    if (!converted_.empty() || count_ == 0)
      return converted_.data();
    return view().in_place();
  }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  /// The values as the file stores them, or the converted float32 ones (as_float32).
  [[nodiscard]] tensor_view view() const {
    tensor_view v;
    v.shape = shape;
    if (!converted_.empty()) {
      v.data = converted_.data();
      return v;
    }
    if (!file_)
      return v;
    v.data = file_->bytes().data() + offset_;
    v.type = type_;
    if (file_->is_mapped())  // the page cache's pages: an observer may keep them (no copy)
      v.owner = file_;
    return v;
  }
  /// True when data() points into the file's mapping (no copy was made).
  [[nodiscard]] bool zero_copy() const noexcept {
    return file_ && file_->is_mapped() && converted_.empty() && data() != nullptr;
  }

  /// Checks the header of `file`'s bytes and views its values (converting them when `mode` is
  /// as_float32 and they are not float32 in place).
  [[nodiscard]] static result<npy_view> from(mapped_file file, std::string_view name,
                                             npy_values mode = npy_values::as_float32) {
    auto header = parse_npy_header(file.bytes(), name);
    if (!header)
      return header.error();
    npy_header& h = header.value();
    const tensor_view stored = h.view(file.bytes());
    npy_view out;
    out.shape = std::move(h.shape);
    out.descr = std::move(h.descr);
    out.count_ = h.count;
    out.offset_ = h.data_offset;
    out.type_ = stored.type;
    if (mode == npy_values::as_float32 && h.count > 0 && stored.in_place() == nullptr) {
      out.converted_.resize(h.count);
      stored.convert(0, h.count, out.converted_.data());
    } else {
      out.file_ = std::make_shared<const mapped_file>(std::move(file));
    }
    return out;
  }

 private:
  std::shared_ptr<const mapped_file> file_;
  std::vector<float> converted_;
  std::size_t offset_ = 0;
  std::size_t count_ = 0;
  dtype type_ = dtype::f32;
};

/// Maps a .npy file (float32 or float16, C order) and views its values as float32; files above
/// `max_bytes` and non-regular files are refused, as by try_read_npy, with the same messages.
[[nodiscard]] inline result<npy_view> try_map_npy(
    const std::string& path, std::uint64_t max_bytes = default_mapped_file_limit,
    npy_values mode = npy_values::as_float32) {
  auto file = try_map_file(path, max_bytes);
  if (!file)
    return file.error();
  return npy_view::from(std::move(file).value(), path, mode);
}

#if PTQ_EXCEPTIONS
/// try_map_npy, throwing ptq::exception on an error.
[[nodiscard]] inline npy_view map_npy(const std::string& path,
                                      std::uint64_t max_bytes = default_mapped_file_limit,
                                      npy_values mode = npy_values::as_float32) {
  return value_or_throw(try_map_npy(path, max_bytes, mode));
}
#endif

}  // namespace io
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq

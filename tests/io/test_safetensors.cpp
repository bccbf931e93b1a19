#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "ptq/io/npy.hpp"
#include "ptq/io/safetensors.hpp"

namespace {

std::string with_header(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (std::size_t i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xFFU);
  return out + header + std::string(data_bytes, '\0');
}

// The message of the error parsing `bytes` gives; `code` is the error code it must have.
std::string parse_error(const std::string& bytes, ptq::errc code) {
  const auto r = ptq::io::try_parse_safetensors(bytes);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == code);
  return r.error().message;
}

}  // namespace

TEST_CASE("safetensors round trip, F32 and converted dtypes", "[safetensors]") {
  const std::vector<ptq::io::named_tensor> t = {{"a", {2, 2}, {1, 2, 3, 4}}, {"b", {3}, {5, 6, 7}}};
  auto parsed = ptq::io::try_parse_safetensors(ptq::io::format_safetensors(t, {{"k", "v"}}));
  REQUIRE(parsed.ok());
  auto f = std::move(parsed).value();
  REQUIRE(f.entries.size() == 2);
  CHECK(f.metadata.at(0).second == "v");
  auto x = f.get("b");
  REQUIRE(x.ok());
  CHECK(x->shape == std::vector<std::size_t>{3});
  CHECK(x->data == std::vector<float>{5, 6, 7});
  // F16 1.0 = 0x3C00, BF16 -2.0 = 0xC000, F64 0.5
  std::string data;
  data += std::string("\x00\x3C", 2) + std::string("\x00\xC0", 2);
  const double half = 0.5;
  data.append(reinterpret_cast<const char*>(&half), 8);
  const std::string h =
      R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"g":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]},"d":{"dtype":"F64","shape":[],"data_offsets":[4,12]},"i":{"dtype":"I64","shape":[0],"data_offsets":[12,12]}})";
  std::string bytes = with_header(h, 0) + data;
  parsed = ptq::io::try_parse_safetensors(bytes);
  REQUIRE(parsed.ok());
  f = std::move(parsed).value();
  x = f.get("h");
  REQUIRE(x.ok());
  CHECK(x->data[0] == 1.0f);
  x = f.get("g");
  REQUIRE(x.ok());
  CHECK(x->data[0] == -2.0f);
  x = f.get("d");
  REQUIRE(x.ok());
  CHECK(x->data[0] == 0.5f);
  // view(): BF16 is read where it lies, F64 converted into `owned`, as float32.
  for (const char* name : {"g", "d"}) {
    const auto st = f.view(name);
    REQUIRE(st.ok());
    const bool f64 = name[0] == 'd';
    CHECK(st->owned.size() == (f64 ? 1U : 0U));
    CHECK(st->view.type == (f64 ? ptq::dtype::f32 : ptq::dtype::bf16));
    CHECK(st->view.data == (f64 ? static_cast<const void*>(st->owned.data())
                                : f.data().data() + f.find(name)->begin));
    CHECK(st->view.at(0) == f.get(name).value().data[0]);
    CHECK(st->view.name == name);
  }
  CHECK(f.view("i").error().message == f.get("i").error().message);
  x = f.get("i");
  REQUIRE_FALSE(x.ok());
  CHECK(x.error().code == ptq::errc::unsupported_dtype);
  CHECK(x.error().message ==
        "tensor 'i' has dtype I64; a floating-point tensor (F32, F16, BF16, F64) is needed");
  x = f.get("missing");
  REQUIRE_FALSE(x.ok());
  CHECK(x.error().code == ptq::errc::tensor_not_found);
  CHECK(x.error().message == "tensor 'missing' is not in the file");
}

TEST_CASE("view reads F32, F16 and BF16 where they lie, the values get gives", "[safetensors]") {
  const std::vector<ptq::io::named_tensor> t = {{"a", {2, 2}, {1, 2, 3, 4}}, {"b", {3}, {5, 6, 7}}};
  auto parsed = ptq::io::try_parse_safetensors(ptq::io::format_safetensors(t, {}));
  REQUIRE(parsed.ok());
  const auto f = std::move(parsed).value();
  auto v = f.view("b");
  REQUIRE(v.ok());
  CHECK(v->view.shape == std::vector<std::size_t>{3});
  CHECK(v->owned.empty());
  CHECK(v->view.data == f.data().data() + f.find("b")->begin);
  CHECK(ptq::copy_values(v->view) == std::vector<float>{5, 6, 7});
  const auto moved = std::move(v).value();  // the view survives a move
  CHECK(moved.view.at(2) == 7.0f);
  CHECK(f.view("missing").error().message == f.get("missing").error().message);

  // An F32 tensor at an offset that is not a multiple of 4 (8 + 110 header bytes + 1 byte of
  // padding in the data section), and an F16 one: both read where they lie (the F32 one through
  // convert(), as its address is not a float's).
  std::string data(1, '\0');
  const float two = 2.0f;
  data.append(reinterpret_cast<const char*>(&two), 4);
  data += std::string("\x00\x3C", 2);
  const std::string h =
      R"({"f":{"dtype":"F32","shape":[1],"data_offsets":[1,5]},"h":{"dtype":"F16","shape":[1],"data_offsets":[5,7]}})";
  parsed = ptq::io::try_parse_safetensors(with_header(h + "   ", 0) + data);
  REQUIRE(parsed.ok());
  const auto g = std::move(parsed).value();
  for (const char* name : {"f", "h"}) {
    INFO(name);
    auto st = g.view(name);
    REQUIRE(st.ok());
    CHECK(st->owned.empty());
    CHECK(st->view.in_place() == nullptr);
    CHECK(st->view.data == g.data().data() + g.find(name)->begin);
    CHECK(st->view.type == (name[0] == 'f' ? ptq::dtype::f32 : ptq::dtype::f16));
    CHECK(st->view.at(0) == g.get(name).value().data[0]);
    CHECK(st->view.shape == std::vector<std::size_t>{1});
  }
}

TEST_CASE("malformed safetensors are clear errors", "[safetensors]") {
  using ptq::errc;
  CHECK(parse_error("abc", errc::truncated) == "file is 3 bytes; too short for the header length");
  CHECK(parse_error(std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10), errc::bad_header) ==
        "header length 4294967295 does not fit the file (10 bytes)");
  CHECK(parse_error(with_header("not json", 0), errc::bad_header) == "header is not a JSON object");
  CHECK(parse_error(with_header(R"({"a":{"dtype":"X9","shape":[1],"data_offsets":[0,4]}})", 4),
                    errc::unsupported_dtype) == "tensor 'a': unsupported dtype \"X9\"");
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
                    errc::bad_offsets) ==
        "tensor 'a': shape and dtype need 2 x 4 bytes, but data_offsets span 4");
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", 4),
                    errc::bad_offsets) ==
        "tensor 'a': data_offsets [0, 8] are outside the data section (4 bytes)");
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
                    errc::bad_offsets) ==
        "tensor 'a': data_offsets [8, 4] are reversed (begin is after end)");
  CHECK(
      parse_error(
          with_header(
              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
              8),
          errc::bad_offsets) == "tensors 'a' and 'b' overlap in the data section");
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                    errc::bad_header) ==
        "tensor 'a': shape has a value that is not a non-negative integer");
  CHECK(parse_error(with_header(R"({"a":{"dtype":"F32"}})", 4), errc::bad_header) ==
        "tensor 'a': needs dtype, shape and data_offsets");
  // A tensor named twice: JSON parsers keep the last entry silently; safetensors does not.
  CHECK(
      parse_error(
          with_header(
              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
              8),
          errc::bad_header) == "the header names 'a' twice (a tensor or a key of one)");
  // The name given to the parser (the path, for read_safetensors) starts every message.
  const auto named = ptq::io::try_parse_safetensors("abc", "w.safetensors");
  REQUIRE_FALSE(named.ok());
  CHECK(named.error().message == "w.safetensors: file is 3 bytes; too short for the header length");
  const auto missing = ptq::io::read_safetensors("/nonexistent-dir/w.safetensors");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == errc::file_open_failed);
  CHECK(missing.error().message ==
        "cannot open '/nonexistent-dir/w.safetensors': No such file or directory");
}

TEST_CASE("writes are atomic: a failed write leaves the old file", "[safetensors]") {
  const auto failed = ptq::io::write_file_atomic("/nonexistent-dir/x.txt", "data");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == ptq::errc::write_failed);
  CHECK(failed.error().message.rfind("cannot create '/nonexistent-dir/x.txt.tmp.", 0) == 0);
  CHECK(failed.error().message.find("No such file or directory") != std::string::npos);
  const std::string path = "ptq_atomic_test.txt";
  REQUIRE(ptq::io::write_file_atomic(path, "one").ok());
  REQUIRE(ptq::io::write_file_atomic(path, "two").ok());
  // A target that cannot be replaced (a directory) fails at the rename and keeps nothing.
  REQUIRE(ptq::io::write_file_atomic(".", "x").ok() == false);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f);
  char buf[8] = {};
  CHECK(std::fread(buf, 1, 8, f) == 3);
  std::fclose(f);
  CHECK(std::string(buf) == "two");
  std::remove(path.c_str());
}

TEST_CASE("large files are written in pieces: the bytes of the joined formats", "[safetensors]") {
  const auto slurp = [](const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f);
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      out.append(buf, n);
    std::fclose(f);
    return out;
  };
  // Pieces are written in order, empty ones included.
  const std::string path = "ptq_pieces_test.bin";
  REQUIRE(ptq::io::write_file_atomic(path, {"ab", "", "cde"}).ok());
  CHECK(slurp(path) == "abcde");
  // safetensors: header, then each tensor's data from the tensor itself.
  std::vector<ptq::io::named_tensor> t{
      {"w", {2, 3}, {1, -2, 3, 4.5f, 5, 6}}, {"empty", {0}, {}}, {"b", {2}, {0.25f, -0.5f}}};
  REQUIRE(ptq::io::write_safetensors(path, t, {{"k", "v"}}).ok());
  CHECK(slurp(path) == ptq::io::format_safetensors(t, {{"k", "v"}}));
  const auto layout = ptq::io::layout_safetensors(t);
  REQUIRE(layout.data.size() == 3);
  CHECK(static_cast<const void*>(layout.data[0].data()) == t[0].data.data());  // not a copy
  CHECK(layout.header.size() % 8 == 0);
  // .npy: the header, then the caller's values.
  const std::vector<float> v{0.5f, -1.0f, 3.0f, 7.25f};
  REQUIRE(ptq::io::write_npy(path, v.data(), {2, 2}).ok());
  CHECK(slurp(path) == ptq::io::format_npy(v.data(), {2, 2}));
  CHECK(ptq::io::npy_header_bytes({2, 2}).size() % 64 == 0);
  // A failed write names the file and leaves nothing.
  const auto failed = ptq::io::write_file_atomic("/nonexistent-dir/x.bin", {"a", "b"});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == ptq::errc::write_failed);
  std::remove(path.c_str());
  // A writer that streams into the file (protobuf's SerializeToFileDescriptor, for ONNX).
  REQUIRE(ptq::io::write_file_atomic_with(path, [](int fd) {
            return ptq::io::detail::write_all(fd, "st") && ptq::io::detail::write_all(fd, "ream");
          }).ok());
  CHECK(slurp(path) == "stream");
  // One that fails keeps the old file and no temporary: its errno is the reason given, or EIO
  // when it set none.
  auto st = ptq::io::write_file_atomic_with(path, [](int fd) {
    (void)ptq::io::detail::write_all(fd, "half");
    errno = ENOSPC;
    return false;
  });
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "cannot write '" + path + ".tmp." + std::to_string(::getpid()) +
                                  "': " + std::strerror(ENOSPC));
  st = ptq::io::write_file_atomic_with(path, [](int) { return false; });
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find(std::strerror(EIO)) != std::string::npos);
  CHECK(slurp(path) == "stream");
  std::FILE* tmp = std::fopen((path + ".tmp." + std::to_string(::getpid())).c_str(), "rb");
  CHECK(tmp == nullptr);
  if (tmp)
    std::fclose(tmp);
  std::remove(path.c_str());
}

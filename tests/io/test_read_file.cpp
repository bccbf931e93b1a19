// Bounded reading (ptq/io/read_file.hpp), mapping (ptq/io/mapped_file.hpp) and the readers
// built on them: non-regular files, files above the limit (refused before reading), empty and
// missing files, each an exact error; a mapped .npy gives read_npy's values, without a copy.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/half_npy.hpp"
#include "ptq/config.hpp"
#include "ptq/io/mapped_file.hpp"
#include "ptq/io/npy.hpp"
#include "ptq/io/npy_map.hpp"
#include "ptq/io/read_file.hpp"
#include "ptq/io/safetensors.hpp"

namespace {

// A scratch directory for this test binary, removed with its files at the end of each case.
struct scratch {
  std::string dir;
  scratch() {
    std::string tmpl = "/tmp/ptq-read-file-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  [[nodiscard]] std::string file(const std::string& name, const std::string& contents) const {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
};

template <class T>
void check_error(const ptq::result<T>& r, ptq::errc code, const std::string& message) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == code);
  CHECK(r.error().message == message);
}

}  // namespace

TEST_CASE("read_file: regular files, up to the limit", "[io][read_file]") {
  const scratch s;
  const auto path = s.file("a.txt", "hello");
  const auto r = ptq::try_read_file(path, 5);
  REQUIRE(r.ok());
  CHECK(r.value() == "hello");
  check_error(ptq::try_read_file(path, 4), ptq::errc::file_too_large,
              "'" + path + "' is 5 bytes; the limit is 4 bytes");
  // An empty file is an empty text (the parser then says what it misses).
  const auto empty = ptq::try_read_file(s.file("empty.txt", ""), 0);
  REQUIRE(empty.ok());
  CHECK(empty.value().empty());
  // Larger than one read.
  const std::string big(200000, 'x');
  const auto b = ptq::try_read_file(s.file("big.txt", big), big.size());
  REQUIRE(b.ok());
  CHECK(b.value() == big);
}

TEST_CASE("read_file: a directory, a device, a FIFO and a missing file", "[io][read_file]") {
  const scratch s;
  check_error(ptq::try_read_file(s.dir, 100), ptq::errc::not_a_file,
              "'" + s.dir + "' is a directory; a regular file is needed");
  check_error(ptq::try_read_file("/dev/zero", 100), ptq::errc::not_a_file,
              "'/dev/zero' is a character device; a regular file is needed");
  const std::string fifo = s.dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_error(ptq::try_read_file(fifo, 100), ptq::errc::not_a_file,
              "'" + fifo + "' is a FIFO; a regular file is needed");  // and does not block
  check_error(ptq::try_read_file(s.dir + "/missing.cfg", 100), ptq::errc::file_open_failed,
              "cannot open '" + s.dir + "/missing.cfg': No such file or directory");
}

TEST_CASE("read_file: a sparse file above the limit is refused before reading", "[io][read_file]") {
  const scratch s;
  const std::string path = s.dir + "/huge.cfg";
  // 10 GiB, sparse: reading it would take minutes and 10 GiB of memory.
  REQUIRE(std::system(("truncate -s 10G '" + path + "'").c_str()) == 0);
  check_error(ptq::try_read_text_file(path), ptq::errc::file_too_large,
              "'" + path + "' is 10737418240 bytes; the limit is 16 MiB");
  const auto npy = ptq::io::try_read_npy(path);
  REQUIRE_FALSE(npy.ok());
  CHECK(npy.error().code == ptq::errc::file_too_large);
  CHECK(npy.error().message == "'" + path + "' is 10737418240 bytes; the limit is 4 GiB");
  const auto st = ptq::io::read_safetensors(path, std::uint64_t{1} << 30);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "'" + path + "' is 10737418240 bytes; the limit is 1 GiB");
}

TEST_CASE("readers on an empty, a missing and a non-regular file", "[io][read_file]") {
  const scratch s;
  const auto empty = s.file("empty.npy", "");
  const auto npy = ptq::io::try_read_npy(empty);
  REQUIRE_FALSE(npy.ok());
  CHECK(npy.error().code == ptq::errc::bad_magic);
  CHECK(npy.error().message == empty + ": not a .npy file (bad magic string)");
  const auto st = ptq::io::read_safetensors(s.file("empty.safetensors", ""));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::truncated);
  CHECK(st.error().message ==
        s.dir + "/empty.safetensors: file is 0 bytes; too short for the header length");
  const auto dir = ptq::io::read_safetensors(s.dir);
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.error().code == ptq::errc::not_a_file);
  const auto missing = ptq::io::try_read_npy(s.dir + "/none.npy");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ptq::errc::file_open_failed);
  CHECK(missing.error().message ==
        "cannot open '" + s.dir + "/none.npy': No such file or directory");
  // The config's text limit is the lexer's input limit.
  CHECK(ptq::default_text_file_limit == ptq::text_limits{}.max_input_bytes);
}

TEST_CASE("map_file: the bytes of a regular file, and read_file's errors", "[io][read_file]") {
  const scratch s;
  std::string big(300000, '\0');
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 7 + i / 251);
  auto m = ptq::try_map_file(s.file("big.bin", big), big.size());
  REQUIRE(m.ok());
  CHECK(m.value().is_mapped());
  CHECK(m.value().bytes() == big);
  const ptq::mapped_file moved = std::move(m).value();
  CHECK(moved.is_mapped());
  CHECK(moved.bytes() == big);
  const auto empty = ptq::try_map_file(s.file("empty.bin", ""), 10);
  REQUIRE(empty.ok());
  CHECK(empty.value().size() == 0);
  check_error(ptq::try_map_file(s.file("eleven.bin", "01234567890"), 10), ptq::errc::file_too_large,
              "'" + s.dir + "/eleven.bin' is 11 bytes; the limit is 10 bytes");
  check_error(ptq::try_map_file(s.dir, 100), ptq::errc::not_a_file,
              "'" + s.dir + "' is a directory; a regular file is needed");
  check_error(ptq::try_map_file("/dev/zero", 100), ptq::errc::not_a_file,
              "'/dev/zero' is a character device; a regular file is needed");
  const std::string fifo = s.dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_error(ptq::try_map_file(fifo, 100), ptq::errc::not_a_file,
              "'" + fifo + "' is a FIFO; a regular file is needed");
  check_error(ptq::try_map_file(s.dir + "/missing.npy", 100), ptq::errc::file_open_failed,
              "cannot open '" + s.dir + "/missing.npy': No such file or directory");
}

TEST_CASE("map_npy: read_npy's values in place, float16 and unaligned data converted",
          "[io][npy]") {
  const scratch s;
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) * 0.37f - 100.0f;
  const std::vector<std::size_t> shape{10, 100};
  const std::string f32 = s.file("a.npy", ptq::io::format_npy(values.data(), shape));
  const auto mapped = ptq::io::try_map_npy(f32);
  REQUIRE(mapped.ok());
  CHECK(mapped.value().zero_copy());
  CHECK(mapped.value().shape == shape);
  CHECK(mapped.value().descr == "<f4");
  REQUIRE(mapped.value().size() == values.size());
  CHECK(std::vector<float>(mapped.value().data(), mapped.value().data() + 1000) == values);

  // float16 (1, -2, the smallest subnormal, 65504): converted, as read_npy converts it.
  const std::string f16 = ptq_test::half_npy_bytes({0x3C00, 0xC000, 0x0001, 0x7BFF});
  const std::string half = s.file("h.npy", f16);
  const auto mh = ptq::io::try_map_npy(half);
  REQUIRE(mh.ok());
  CHECK_FALSE(mh.value().zero_copy());
  const auto rh = ptq::io::try_read_npy(half);
  REQUIRE(rh.ok());
  CHECK(std::vector<float>(mh.value().data(), mh.value().data() + 4) == rh.value().data);
  // As stored: nothing converted, view() reads the file's float16 bytes.
  const auto sh =
      ptq::io::try_map_npy(half, ptq::default_tensor_file_limit, ptq::io::npy_values::as_stored);
  REQUIRE(sh.ok());
  CHECK(sh.value().data() == nullptr);
  const ptq::tensor_view hv = sh.value().view();
  CHECK(hv.type == ptq::dtype::f16);
  CHECK(hv.shape == sh.value().shape);
  REQUIRE(hv.size() == 4);
  std::vector<float> from_stored(4);
  hv.convert(0, 4, from_stored.data());
  CHECK(from_stored == rh.value().data);
  // float32 in place is the same either way.
  const auto sf =
      ptq::io::try_map_npy(f32, ptq::default_tensor_file_limit, ptq::io::npy_values::as_stored);
  REQUIRE(sf.ok());
  CHECK(sf.value().zero_copy());
  CHECK(sf.value().view().in_place() == sf.value().data());

  // A header of odd length puts float32 data at an unaligned offset: copied, same values.
  std::string odd = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }  \n";
  std::string f32u("\x93NUMPY\x01\x00", 8);
  f32u += static_cast<char>(odd.size());
  f32u += '\0';
  f32u += odd;
  REQUIRE(f32u.size() % 4 != 0);
  const float three[] = {1.5f, -2.25f, 3.0f};
  f32u.append(reinterpret_cast<const char*>(three), sizeof three);
  const auto mu = ptq::io::try_map_npy(s.file("u.npy", f32u));
  REQUIRE(mu.ok());
  CHECK_FALSE(mu.value().zero_copy());
  CHECK(std::vector<float>(mu.value().data(), mu.value().data() + 3) ==
        std::vector<float>{1.5f, -2.25f, 3.0f});

  // Errors are read_npy's, message for message.
  for (const std::string& bad :
       {s.file("empty.npy", ""), s.file("t.npy", f32u.substr(0, 70)), s.dir, s.dir + "/none.npy"}) {
    const auto a = ptq::io::try_map_npy(bad);
    const auto b = ptq::io::try_read_npy(bad);
    REQUIRE_FALSE(a.ok());
    REQUIRE_FALSE(b.ok());
    CHECK(a.error().code == b.error().code);
    CHECK(a.error().message == b.error().message);
  }
}

TEST_CASE("the plain readers throw what the try_ readers return", "[io][read_file]") {
  const scratch s;
  const std::string text = s.file("a.txt", "abc");
  CHECK(ptq::read_file(text, 10) == "abc");
  CHECK(std::string(ptq::map_file(text, 10).bytes()) == "abc");
  const std::string missing = s.dir + "/missing.npy";
  const auto expect_throw = [&](auto&& read, const std::string& message) {
    try {
      (void)read();
      FAIL("no exception");
    } catch (const ptq::exception& e) {
      CHECK(e.code() == ptq::errc::file_open_failed);
      CHECK(std::string(e.what()) == message);
    }
  };
  const std::string message = ptq::try_read_file(missing, 10).error().message;
  expect_throw([&] { return ptq::read_file(missing, 10); }, message);
  expect_throw([&] { return ptq::map_file(missing, 10); }, message);
  expect_throw([&] { return ptq::io::read_npy(missing); },
               ptq::io::try_read_npy(missing).error().message);
  expect_throw([&] { return ptq::io::map_npy(missing); },
               ptq::io::try_map_npy(missing).error().message);
}

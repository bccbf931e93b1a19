// Bounded reading (ptq/core/read_file.hpp) and the readers built on it: non-regular files,
// files above the limit (refused before reading), empty and missing files, each an exact error.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ptq/config.hpp"
#include "ptq/core/read_file.hpp"
#include "ptq/io/npy.hpp"
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

void check_error(const ptq::result<std::string>& r, ptq::errc code, const std::string& message) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == code);
  CHECK(r.error().message == message);
}

}  // namespace

TEST_CASE("read_file: regular files, up to the limit", "[io][read_file]") {
  const scratch s;
  const auto path = s.file("a.txt", "hello");
  const auto r = ptq::read_file(path, 5);
  REQUIRE(r.ok());
  CHECK(r.value() == "hello");
  check_error(ptq::read_file(path, 4), ptq::errc::file_too_large,
              "'" + path + "' is 5 bytes; the limit is 4 bytes");
  // An empty file is an empty text (the parser then says what it misses).
  const auto empty = ptq::read_file(s.file("empty.txt", ""), 0);
  REQUIRE(empty.ok());
  CHECK(empty.value().empty());
  // Larger than one read.
  const std::string big(200000, 'x');
  const auto b = ptq::read_file(s.file("big.txt", big), big.size());
  REQUIRE(b.ok());
  CHECK(b.value() == big);
}

TEST_CASE("read_file: a directory, a device, a FIFO and a missing file", "[io][read_file]") {
  const scratch s;
  check_error(ptq::read_file(s.dir, 100), ptq::errc::not_a_file,
              "'" + s.dir + "' is a directory; a regular file is needed");
  check_error(ptq::read_file("/dev/zero", 100), ptq::errc::not_a_file,
              "'/dev/zero' is a character device; a regular file is needed");
  const std::string fifo = s.dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_error(ptq::read_file(fifo, 100), ptq::errc::not_a_file,
              "'" + fifo + "' is a FIFO; a regular file is needed");  // and does not block
  check_error(ptq::read_file(s.dir + "/missing.cfg", 100), ptq::errc::file_open_failed,
              "cannot open '" + s.dir + "/missing.cfg': No such file or directory");
}

TEST_CASE("read_file: a sparse file above the limit is refused before reading", "[io][read_file]") {
  const scratch s;
  const std::string path = s.dir + "/huge.cfg";
  // 10 GiB, sparse: reading it would take minutes and 10 GiB of memory.
  REQUIRE(std::system(("truncate -s 10G '" + path + "'").c_str()) == 0);
  check_error(ptq::read_text_file(path), ptq::errc::file_too_large,
              "'" + path + "' is 10737418240 bytes; the limit is 16 MiB");
  const auto npy = ptq::io::read_npy(path);
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
  const auto npy = ptq::io::read_npy(empty);
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
  const auto missing = ptq::io::read_npy(s.dir + "/none.npy");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ptq::errc::file_open_failed);
  CHECK(missing.error().message ==
        "cannot open '" + s.dir + "/none.npy': No such file or directory");
  // The config's text limit is the lexer's input limit.
  CHECK(ptq::default_text_file_limit == ptq::text_limits{}.max_input_bytes);
}

// What the `ptq` commands do to the paths they write (tools/ptq/outputs.hpp), run as a user
// would: a device, FIFO or socket is never replaced; every input takes part in the overlap
// check; two runs writing the same outputs leave one run's set; an interrupted run leaves no
// temporary file, whatever the number of outputs.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/run_cli.hpp"

namespace fs = std::filesystem;

namespace {

const std::string ex = PTQ_EXAMPLES_DIR;
const std::string digits = ex + "/digits";

std::size_t entries(const std::string& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
    ++n;
  return n;
}

std::string fresh_dir(const std::string& d) {
  fs::remove_all(d);
  fs::create_directory(d);
  return d;
}

}  // namespace

TEST_CASE("a device, a FIFO or a socket is never replaced by an output", "[cli][outputs]") {
  struct ::stat before {};
  REQUIRE(::stat("/dev/null", &before) == 0);
  auto r = ptq_test::run_cli("calibrate --quiet --record /dev/null");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --record '/dev/null': is a character device, which an "
        "output would replace; an output is a regular file or a new path [E1102]\n");
  struct ::stat after {};
  REQUIRE(::stat("/dev/null", &after) == 0);
  CHECK(S_ISCHR(after.st_mode));
  CHECK(after.st_rdev == before.st_rdev);

  fresh_dir("special");
  REQUIRE(::mkfifo("special/fifo", 0644) == 0);
  const std::string record = "special/record.txt";
  r = ptq_test::run_cli("calibrate --quiet --record " + record);
  REQUIRE(r.code == 0);
  r = ptq_test::run_cli("export --format qdq-json --record " + record + " -o special/fifo");
  CHECK(r.code == 1);
  CHECK(r.err.find("-o 'special/fifo': is a FIFO, which an output would replace") !=
        std::string::npos);
  r = ptq_test::run_cli("weights --type Linear --fake-quant-out special/fifo " + ex +
                        "/numerics/fc_weight.npy");
  CHECK(r.code == 1);
  CHECK(r.err.find("--fake-quant-out 'special/fifo': is a FIFO") != std::string::npos);
  CHECK(r.err.find("[E1102]") != std::string::npos);

  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(sock >= 0);
  ::sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = fs::absolute("special/sock").string();
  REQUIRE(sock_path.size() < sizeof addr.sun_path);
  std::copy(sock_path.begin(), sock_path.end(), addr.sun_path);
  REQUIRE(::bind(sock, reinterpret_cast<const ::sockaddr*>(&addr), sizeof addr) == 0);
  r = ptq_test::run_cli("calibrate --quiet --report special/sock");
  CHECK(r.code == 1);
  CHECK(r.err.find("--report 'special/sock': is a socket") != std::string::npos);
  ::close(sock);
  struct ::stat st {};
  REQUIRE(::lstat("special/fifo", &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  REQUIRE(::lstat("special/sock", &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK(entries("special") == 3);  // the FIFO, the socket, the record: no *.tmp.*
  fs::remove_all("special");
}

TEST_CASE("every input of every command is checked against its outputs", "[cli][outputs]") {
  fresh_dir("overlap");
  fs::copy_file(ex + "/numerics/fc_weight.npy", "overlap/w.npy");
  const auto before = fs::file_size("overlap/w.npy");
  auto r = ptq_test::run_cli("weights --type Linear --fake-quant-out overlap/w.npy overlap/w.npy");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq weights: error: --fake-quant-out 'overlap/w.npy' is the same file as WEIGHT "
        "'overlap/w.npy'; an output must not overwrite an input [E1101]\n");
  CHECK(fs::file_size("overlap/w.npy") == before);

  fs::copy_file(digits + "/model.onnx", "overlap/m.onnx");
  const auto onnx_size = fs::file_size("overlap/m.onnx");
  r = ptq_test::run_cli("calibrate --quiet --record overlap/r.txt");
  REQUIRE(r.code == 0);
  r = ptq_test::run_cli("export --format qdq-json --record overlap/r.txt --model " + digits +
                        "/manifest.json --weights " + digits +
                        "/model.safetensors --onnx overlap/m.onnx -o overlap/m.onnx");
  CHECK(r.code == 1);
  CHECK(r.err.find("-o 'overlap/m.onnx' is the same file as --onnx 'overlap/m.onnx'") !=
        std::string::npos);
  CHECK(fs::file_size("overlap/m.onnx") == onnx_size);
  r = ptq_test::run_cli("calibrate --quiet --onnx overlap/m.onnx --export onnx=overlap/m.onnx");
  CHECK(r.code == 1);
  CHECK(r.err.find("is the same file as --onnx") != std::string::npos);
  CHECK(fs::file_size("overlap/m.onnx") == onnx_size);
  fs::remove_all("overlap");
}

TEST_CASE("two runs writing the same outputs leave one run's set: the commit waits its turn",
          "[cli][outputs]") {
  // Another run holds the folder's lock (flock, as ptq's commit does) until told to let go:
  // this run computes, writes its temporary files, and renames only after the lock is released.
  // No fixed sleeps: on a loaded machine the run may take seconds to reach its commit.
  fresh_dir("locked");
  fs::remove("locked.ready");
  fs::remove("locked.go");
  const auto r = ptq_test::run_shell_command(
      "bash -c 'flock locked sh -c \"touch locked.ready; while [ ! -e locked.go ]; do sleep "
      "0.05; done\" & lock=$!; "
      "for i in $(seq 1200); do [ -e locked.ready ] && break; sleep 0.05; done; " +
      std::string(PTQ_CLI_PATH) +
      " calibrate --quiet --record locked/r.txt --quant-config locked/q.json >/dev/null & pid=$!; "
      "for i in $(seq 1200); do [ $(ls locked | grep -c \"\\.tmp\\.\") -ge 2 ] && break; "
      "sleep 0.05; done; "
      "ls locked | grep -c \"\\.tmp\\.\"; ls locked | grep -vc \"\\.tmp\\.\"; "
      "touch locked.go; wait $pid; echo rc=$?; wait $lock; ls locked'");
  // Two temporary files and no output while the lock is held; then the outputs, complete.
  CHECK(r.out == "2\n0\nrc=0\nq.json\nr.txt\n");
  fs::remove_all("locked");
  fs::remove("locked.ready");
  fs::remove("locked.go");
}

TEST_CASE("an interrupted commit of many outputs leaves none of its temporary files",
          "[cli][outputs]") {
  // 24 outputs (more than any fixed table would hold), held at the lock so the signal comes
  // while every temporary file exists.
  fresh_dir("many");
  std::string exports;
  for (int i = 0; i < 22; ++i)
    exports += " --export qdq-json=many/t" + std::to_string(i) + ".json";
  const auto r = ptq_test::run_shell_command(
      "bash -c 'flock many sleep 5 & lock=$!; sleep 0.5; " + std::string(PTQ_CLI_PATH) +
      " calibrate --quiet --record many/r.txt --quant-config many/q.json" + exports +
      " >/dev/null 2>many_err.txt & pid=$!; for i in $(seq 100); do "
      "[ $(ls many | grep -c \"\\.tmp\\.\") = 24 ] && break; sleep 0.1; done; "
      "ls many | grep -c \"\\.tmp\\.\"; kill -TERM $pid; wait $pid; echo rc=$?; "
      "kill $lock; ls many | wc -l; cat many_err.txt >&2; rm many_err.txt'");
  CHECK(r.out == "24\nrc=143\n0\n");
  CHECK(r.err.find("ptq calibrate: error: interrupted (SIGTERM); no output was written [E1103]") !=
        std::string::npos);
  fs::remove_all("many");
}

TEST_CASE("an interrupted ptq weights --fake-quant-out leaves no temporary file",
          "[cli][outputs]") {
  // The commit waits for the folder's lock, so the signal comes while the whole temporary file
  // exists: the handler removes it, and nothing is written.
  fresh_dir("wsig");
  const auto r = ptq_test::run_shell_command(
      "bash -c 'flock wsig sleep 5 & lock=$!; sleep 0.5; " + std::string(PTQ_CLI_PATH) +
      " weights --type Linear --fake-quant-out wsig/fq.npy " + ex +
      "/numerics/fc_weight.npy >/dev/null 2>wsig_err.txt & pid=$!; for i in $(seq 100); do "
      "[ $(ls wsig | grep -c \"\\.tmp\\.\") = 1 ] && break; sleep 0.05; done; "
      "ls wsig | grep -c \"\\.tmp\\.\"; kill -TERM $pid; wait $pid; echo rc=$?; kill $lock; "
      "ls wsig | wc -l; cat wsig_err.txt >&2; rm wsig_err.txt'");
  CHECK(r.out == "1\nrc=143\n0\n");
  CHECK(r.err.find("ptq weights: error: interrupted (SIGTERM); no output was written [E1103]") !=
        std::string::npos);
  fs::remove_all("wsig");
}

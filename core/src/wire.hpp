// What the parent and its worker processes say to each other over pipes: length-prefixed frames whose
// payloads are a compact binary form of the host's own types (plugin descriptions, Results, options).
// Both ends are the same executable, so the format needs no versioning, only exactness: every field
// of every type crosses unchanged (tests/unit/host_parts_test.cpp (Wire.*) round-trips each one).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "measure.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::wire {

struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v);
  void i64(std::int64_t v);
  void f64(double v);
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(std::string_view s);
  template <typename T, typename Put>
  void list(const std::vector<T>& items, Put put) {
    u32(static_cast<std::uint32_t>(items.size()));
    for (const auto& item : items) put(*this, item);
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::int64_t i64();
  double f64();
  bool boolean() { return u8() != 0; }
  std::string str();
  // Every element takes at least a byte: a count beyond what is left is a broken message, refused before
  // anything is made; the elements are made as they are read (no reserve a corrupted count could inflate).
  template <typename Get>
  auto list(Get get) {
    const std::uint32_t n = u32();
    if (n > remaining()) throw WireError("truncated message");
    std::vector<decltype(get(*this))> items;
    for (std::uint32_t i = 0; i < n; ++i) items.push_back(get(*this));
    return items;
  }
  bool at_end() const { return pos_ == in_.size(); }
  std::size_t remaining() const { return in_.size() - pos_; }

 private:
  std::string_view take(std::size_t n);
  std::string_view in_;
  std::size_t pos_ = 0;
};

void put(Writer& w, const Params& p);
Params get_params(Reader& r);
// A plugin's description: everything but the cases' make functions, which stay in the worker.
void put(Writer& w, const Plugin& p);
Plugin get_plugin(Reader& r);
void put(Writer& w, const MeasureOptions& o);
MeasureOptions get_measure_options(Reader& r);
void put(Writer& w, const Result& r);
Result get_result(Reader& r);
// A Result as a payload of its own, and back (the ranks' rounds carry them, rank_mode.hpp).
std::string result_bytes(const Result& r);
Result result_from_bytes(std::string_view bytes);

enum class FrameType : std::uint8_t {
  config = 1,   // parent -> worker: plugin files to load
  loading,      // worker -> parent: about to load this plugin file (so a crash at load names it)
  described,    // worker -> parent: path + plugin description
  load_failed,  // worker -> parent: path + reason
  done,         // worker -> parent: every plugin described
  ready,        // worker -> parent: plugins loaded, devices found; waiting for work
  run,          // parent -> worker: one benchmark to measure
  result,       // worker -> parent: its Result
  proceed,      // parent -> worker: go on (the parent has taken note of what came before)
  exchange,     // worker -> parent: a blob for Context::exchange (ranks in several processes)
  exchanged,    // parent -> worker: every process's blob, or why the exchange failed
};

// The answer to an exchange frame: every process's blob, or the reason it failed (thrown as Error).
std::string exchange_reply(const std::vector<std::string>& blobs);
std::string exchange_failure(const std::string& why);
std::vector<std::string> read_exchange_reply(const std::string& payload);

struct Frame {
  FrameType type;
  std::string payload;
};

// Writes one whole frame (retrying short writes); throws WireError when the other end is gone.
void write_frame(int fd, FrameType type, std::string_view payload);
// Blocks for one whole frame; nothing at a clean end of stream; throws WireError on a torn frame.
std::optional<Frame> read_frame(int fd);

// Bytes arriving in pieces (a non-blocking reader): complete frames come out of next().
class FrameBuffer {
 public:
  void append(const char* data, std::size_t n) { buffer_.append(data, n); }
  std::optional<Frame> next();
  bool empty() const { return buffer_.empty(); }

 private:
  std::string buffer_;
};

}  // namespace roofbench::wire

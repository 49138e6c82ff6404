// A small streaming JSON writer: enough for the results file. Strict JSON only: non-finite numbers
// become null (NaN and Infinity break strict readers), bytes that are not UTF-8 become U+FFFD, and a
// key given twice in one object throws std::logic_error (readers disagree on which one wins).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace roofbench {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(double number);
  JsonWriter& value(std::int64_t number);
  JsonWriter& value(int number) { return value(static_cast<std::int64_t>(number)); }
  JsonWriter& value(bool flag);
  JsonWriter& null();
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }
  const std::string& str() const { return out_; }

 private:
  void before_value();
  JsonWriter& close_scope(char bracket);
  void newline();
  std::string out_;
  std::vector<bool> first_in_scope_;
  std::vector<std::set<std::string, std::less<>>> keys_in_scope_;  // one per open scope (empty for arrays)
  bool after_key_ = false;
};

std::string json_escape(std::string_view text);

}  // namespace roofbench

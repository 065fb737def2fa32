// A strict YAML reader: the generic half of reading a configuration file, which knows YAML, key
// paths, units and overrides but no schema. A schema (scenario.cc's, for scenario files) says which
// keys mean what and reads each value through it. Internal to sim/scenario: only its .cc files
// include this header, so yaml-cpp (linked privately) stays out of the library's public headers.
//
// Strict means that a file is read exactly as its schema describes it, or refused with the reason:
//   - unknown keys: a map's keys are checked against the ones its schema knows before any value is
//     read (MapView); an unknown key is an error listing the known ones, and so is a key given
//     twice;
//   - wrong types: each value is read as one type (Reader::integer, number, boolean, ...), and a
//     value of another type or shape is an error ("expected an integer, got 'x'", "expected a map,
//     got a list");
//   - units: a bandwidth, duration or size carries its unit ("1Gbps", "5us", "1MiB"), never a bare
//     number (runtime/units.h, UnitStyle::strict);
//   - overrides: each "key.path=value" (--set) is applied to the tree before the schema reads it,
//     as if it were written in the file; an error in a value it set names the override
//     ("--set key.path: ...") since it has no place in the file;
//   - errors: every problem is an Error "file:line:col: key.path: message", pointing at the node at
//     fault (1-based; an empty value's key, as an empty value has no place of its own).
// The messages are part of the contract: users read them and tests check them word for word.
//
// How a schema uses it: derive from Reader (or hold one); apply the overrides to the loaded tree
// (apply_override); then for each section open a MapView with the keys the section knows, and read
// each key present with the reader of its type, passing the key path that messages name
// (MapView::child). What types cannot say (a range, two keys that exclude each other, a name that
// must exist) the schema checks itself, and reports with fail() at the node at fault.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kf::yaml {

using YAML::Node;

// "file:line:col: message"; with no line (0), "file: message", or the message alone when it
// already starts with the file ("--set key.path: ...").
std::string format_error(const std::string& file, int line, int column, const std::string& message);

// A problem in the file or in an override; what() is format_error's text.
class Error : public std::runtime_error {
 public:
  Error(std::string file, int line, int column, std::string message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }      // 1-based; 0 when unknown
  int column() const { return column_; }  // 1-based; 0 when unknown
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  int column_;
  std::string message_;
};

// Parses `text` (from `file`, for the messages); invalid YAML is an Error "invalid YAML: ...".
Node load(const std::string& text, const std::string& file);
// The bytes of the file at `path`; Error "cannot read file: ..." when it cannot.
std::string read_file(const std::string& path);
// An Error at the place a yaml-cpp exception names, when it names one.
Error error_at(const std::string& file, const YAML::Exception& e, const std::string& message);

// "a, b, c"
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");
// A node as messages name it: "'value'", "a list", "a map" or "nothing".
std::string describe(const Node& n);
// "a.b.0.c" -> {"a", "b", "0", "c"}; a part may be empty (the callers refuse that).
std::vector<std::string> split_key(const std::string& key);
// Sets the key path `parts` in `root` to `v` (maps are made on the way; a list takes an index)
// and returns the path as messages name it ("events[0].fail.worker"). The node `v` itself is
// placed, so it keeps its position in the file, if it has one. Throws std::invalid_argument.
std::string set_path(Node& root, const std::vector<std::string>& parts, const Node& v);
// A value on one line, as --set would take it: "1024", "{name: adaptive_batch_size, ...}".
std::string flow_yaml(const Node& n);

class MapView;

// Reads the values of one file (or of one tree made from it) and reports what is wrong with them.
class Reader {
 public:
  // `count_cap`: the schema's largest count (e.g. of workers); integer() takes it as a cap, not as
  // the end of a range (see there).
  Reader(std::string file, std::int64_t count_cap) : file_(std::move(file)), cap_(count_cap) {}

  const std::string& file() const { return file_; }

  // Throws an Error at `node`; `body` is prefixed with "path: " when `with_path`. The place is
  // the node's, or its key's for an empty value, or the key that placed it for a node made on the
  // way by place(); a value an override set (or a node with no place) names the override instead.
  [[noreturn]] void fail(const Node& node, const std::string& path, const std::string& body,
                         bool with_path = true) const;

  // Applies one --set "key.path=value" to `root`, as if written in the file: maps are made on the
  // way, a list takes an index, and errors in what it set name the override from then on.
  void apply_override(Node& root, const std::string& text);
  // Whether `path` (or a map or list above it) was set by an override.
  bool from_override(const std::string& path) const;
  // Sets `key` (a key path) in `root` to `value`, written at `where` in the file (a key elsewhere
  // in it): errors in a node made on the way point there. `overridden`: the key itself came from
  // an override, so its errors name the override. Returns the path as messages name it. Throws
  // std::invalid_argument.
  std::string place(Node& root, const std::string& key, const Node& value, const YAML::Mark& where,
                    bool overridden);

  // The scalar at `n`; `what` says what a node of another kind should have been ("a string").
  const std::string& scalar(const Node& n, const std::string& path, const std::string& what) const;
  std::string string(const Node& n, const std::string& path) const;
  // A scalar that is one of `known`, else "unknown WHAT 'x' (known: a, b)"; `expected` is
  // scalar()'s `what`.
  std::string one_of(const Node& n, const std::string& path, const std::string& expected,
                     const std::string& what, const std::vector<std::string>& known) const;
  // A whole number in [lo, hi]: "must be between LO and HI, got X" outside. When `hi` is only a
  // cap (the default, INT_MAX or the reader's count_cap): "must be at least LO, got X" below lo
  // and "too large (at most HI), got X" above hi.
  std::int64_t integer(const Node& n, const std::string& path, std::int64_t lo,
                       std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const;
  int int32(const Node& n, const std::string& path, int lo,
            int hi = std::numeric_limits<int>::max()) const;
  double number(const Node& n, const std::string& path) const;  // finite
  double positive_number(const Node& n, const std::string& path) const;
  bool boolean(const Node& n, const std::string& path) const;  // true/false, yes/no, on/off
  // Quantities with their units (runtime/units.h, strict): bits per second, time, bytes.
  double bandwidth(const Node& n, const std::string& path) const;
  std::chrono::nanoseconds duration(const Node& n, const std::string& path) const;
  std::size_t size(const Node& n, const std::string& path) const;

 private:
  friend class MapView;

  // `path` is `prefix` or lies under it ("a.b" and "a.b[0].c" lie under "a.b").
  static bool within(const std::string& path, const std::string& prefix);
  void note_empty_value(const Node& value, const YAML::Mark& key_mark) const {
    empty_values_.emplace_back(value, key_mark);
  }

  std::string file_;
  std::int64_t cap_;
  std::vector<std::string> overridden_;  // key paths set by overrides, as "a.b[0].c"
  // Key paths place() set, and where their keys are in the file.
  std::vector<std::pair<std::string, YAML::Mark>> placed_;
  mutable std::vector<std::pair<Node, YAML::Mark>> empty_values_;  // and their keys' places
};

// A YAML map whose keys are checked against the known ones (and for duplicates) up front: "unknown
// key 'x' in PATH (known: ...)", "duplicate key 'x' in PATH", "expected a map, got ...".
class MapView {
 public:
  MapView(const Reader& r, const Node& node, std::string path, std::vector<std::string> known);

  std::optional<Node> get(const std::string& key) const {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second.second;
  }
  Node key_node(const std::string& key) const { return entries_.at(key).first; }
  // The value of `key`, else "missing required key 'KEY'" at the map.
  Node require(const std::string& key) const;
  // The key path of `key` in this map: "PATH.key".
  std::string child(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  const Node& node() const { return node_; }
  const std::string& path() const { return path_; }

 private:
  const Reader& r_;
  Node node_;
  std::string path_;
  std::map<std::string, std::pair<Node, Node>> entries_;  // key -> (key node, value node)
};

}  // namespace kf::yaml

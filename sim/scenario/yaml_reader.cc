// The strict YAML reader (yaml_reader.h): typed readers, checked maps, --set overrides and errors
// that point at the node at fault. No schema here.
#include "sim/scenario/yaml_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/units.h"

namespace kf::yaml {
namespace {

// Where the errors of --set overrides point: they have no place in the file.
constexpr const char* kSetFile = "--set";

}  // namespace

std::string format_error(const std::string& file, int line, int column,
                         const std::string& message) {
  if (line > 0) {
    return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
  }
  // Unknown position: "FILE: message", unless the message already starts with FILE (the --set
  // errors read "--set key.path: ...").
  if (file.empty() || message.starts_with(file + " ")) return message;
  return file + ": " + message;
}

Error::Error(std::string file, int line, int column, std::string message)
    : std::runtime_error(format_error(file, line, column, message)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      message_(std::move(message)) {}

Error error_at(const std::string& file, const YAML::Exception& e, const std::string& message) {
  const int line = e.mark.line < 0 ? 0 : e.mark.line + 1;
  const int column = e.mark.line < 0 ? 0 : e.mark.column + 1;
  return Error(file, line, column, message);
}

Node load(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw error_at(file, e, "invalid YAML: " + e.msg);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, 0, 0, "cannot read file: " + std::string(std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path, 0, 0, "cannot read file");
  return text.str();
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

std::string describe(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  for (std::size_t begin = 0;;) {
    const auto dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  return parts;
}

std::string set_path(Node& root, const std::vector<std::string>& parts, const Node& v) {
  if (!root.IsMap()) root.reset(Node(YAML::NodeType::Map));
  Node cur = root;
  std::string norm;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (cur.IsSequence()) {
      std::size_t idx = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (ec != std::errc() || end != part.data() + part.size() || idx >= cur.size()) {
        throw std::invalid_argument("'" + norm + "' is a list; '" + part + "' is not an index 0.." +
                                    std::to_string(static_cast<long>(cur.size()) - 1));
      }
      norm.append("[").append(std::to_string(idx)).append("]");
      if (last) {
        cur[idx] = v;
      } else {
        Node next = cur[idx];
        cur.reset(next);
      }
    } else if (cur.IsScalar()) {
      throw std::invalid_argument("'" + norm + "' is a value, not a map");
    } else {  // map, or null (becomes a map)
      norm += (norm.empty() ? "" : ".") + part;
      if (last) {
        cur[part] = v;
      } else {
        Node next = cur[part];
        cur.reset(next);
      }
    }
  }
  return norm;
}

std::string flow_yaml(const Node& n) {
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << n;
  return out.c_str();
}

void Reader::fail(const Node& node, const std::string& path, const std::string& body,
                  bool with_path) const {
  YAML::Mark mark = node.Mark();
  // An empty value's own mark is wherever the next token is; its key is the better place.
  for (const auto& [value, key_mark] : empty_values_) {
    if (value.is(node)) mark = key_mark;
  }
  // A node place() made on the way has no place: the key that placed it is the place.
  for (const auto& [placed, key_mark] : placed_) {
    if (mark.line < 0 && (within(path, placed) || within(placed, path))) mark = key_mark;
  }
  if (from_override(path) || (mark.line < 0 && !path.empty())) {
    throw Error(kSetFile, 0, 0, std::string(kSetFile) + " " + path + ": " + body);
  }
  const std::string message = with_path && !path.empty() ? path + ": " + body : body;
  if (mark.line < 0) throw Error(file_, 1, 1, message);
  throw Error(file_, mark.line + 1, mark.column + 1, message);
}

bool Reader::within(const std::string& path, const std::string& prefix) {
  if (path == prefix) return true;
  return path.size() > prefix.size() && path.starts_with(prefix) &&
         (path[prefix.size()] == '.' || path[prefix.size()] == '[');
}

bool Reader::from_override(const std::string& path) const {
  return std::any_of(overridden_.begin(), overridden_.end(),
                     [&](const std::string& o) { return within(path, o); });
}

void Reader::apply_override(Node& root, const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) {
    throw Error(kSetFile, 0, 0, std::string(kSetFile) + " '" + text + "': expected key.path=value");
  }
  std::string key = text.substr(0, eq);
  while (!key.empty() && (key.back() == ' ' || key.back() == '\t'))
    key.pop_back();
  while (!key.empty() && (key.front() == ' ' || key.front() == '\t'))
    key.erase(0, 1);
  const std::string value = text.substr(eq + 1);
  const std::vector<std::string> parts = split_key(key);
  for (const auto& p : parts) {
    if (p.empty()) {
      throw Error(kSetFile, 0, 0,
                  std::string(kSetFile) + " '" + text + "': empty key in '" + key +
                      "'; expected key.path=value");
    }
  }
  Node v;
  try {
    v = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    throw Error(
        kSetFile, 0, 0,
        std::string(kSetFile) + " " + key + ": invalid YAML value '" + value + "': " + e.msg);
  }
  try {
    overridden_.push_back(set_path(root, parts, v));
  } catch (const std::invalid_argument& e) {
    throw Error(kSetFile, 0, 0, std::string(kSetFile) + " '" + text + "': " + e.what());
  }
}

std::string Reader::place(Node& root, const std::string& key, const Node& value,
                          const YAML::Mark& where, bool overridden) {
  const std::string target = set_path(root, split_key(key), value);
  if (overridden) overridden_.push_back(target);
  placed_.emplace_back(target, where);
  return target;
}

const std::string& Reader::scalar(const Node& n, const std::string& path,
                                  const std::string& what) const {
  if (!n.IsScalar()) fail(n, path, "expected " + what + ", got " + describe(n));
  return n.Scalar();
}

std::string Reader::string(const Node& n, const std::string& path) const {
  return scalar(n, path, "a string");
}

std::string Reader::one_of(const Node& n, const std::string& path, const std::string& expected,
                           const std::string& what, const std::vector<std::string>& known) const {
  const std::string& s = scalar(n, path, expected);
  if (std::find(known.begin(), known.end(), s) == known.end()) {
    fail(n, path, "unknown " + what + " '" + s + "' (known: " + join(known) + ")");
  }
  return s;
}

std::int64_t Reader::integer(const Node& n, const std::string& path, std::int64_t lo,
                             std::int64_t hi) const {
  const std::string& s = scalar(n, path, "an integer");
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) fail(n, path, "too large, got " + s);
  if (ec != std::errc() || end != s.data() + s.size()) {
    fail(n, path, "expected an integer, got '" + s + "'");
  }
  const bool bounded = hi < std::numeric_limits<std::int64_t>::max() && hi != INT_MAX && hi != cap_;
  if (v < lo || (bounded && v > hi)) {
    if (bounded) {
      fail(n, path,
           "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + s);
    }
    fail(n, path, "must be at least " + std::to_string(lo) + ", got " + s);
  }
  if (v > hi) fail(n, path, "too large (at most " + std::to_string(hi) + "), got " + s);
  return v;
}

int Reader::int32(const Node& n, const std::string& path, int lo, int hi) const {
  return static_cast<int>(integer(n, path, lo, hi));
}

double Reader::number(const Node& n, const std::string& path) const {
  const std::string& s = scalar(n, path, "a number");
  double v = 0;
  const char* begin = s.data();
  if (!s.empty() && s.front() == '+') ++begin;
  const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    fail(n, path, "expected a number, got '" + s + "'");
  }
  return v;
}

double Reader::positive_number(const Node& n, const std::string& path) const {
  const double v = number(n, path);
  if (!(v > 0)) fail(n, path, "must be positive, got " + scalar(n, path, "a number"));
  return v;
}

bool Reader::boolean(const Node& n, const std::string& path) const {
  const std::string& s = scalar(n, path, "true or false");
  for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}) {
    if (s == t) return true;
  }
  for (const char* f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}) {
    if (s == f) return false;
  }
  fail(n, path, "expected true or false, got '" + s + "'");
}

double Reader::bandwidth(const Node& n, const std::string& path) const {
  const std::string& s = scalar(n, path, "a bandwidth like 1Gbps");
  try {
    return parse_bandwidth(s);
  } catch (const std::invalid_argument& e) {
    fail(n, path, e.what());
  }
}

std::chrono::nanoseconds Reader::duration(const Node& n, const std::string& path) const {
  const std::string& s = scalar(n, path, "a duration like 5us");
  try {
    return parse_duration(s, UnitStyle::strict);
  } catch (const std::invalid_argument& e) {
    fail(n, path, e.what());
  }
}

std::size_t Reader::size(const Node& n, const std::string& path) const {
  const std::string& s = scalar(n, path, "a size like 1MiB");
  try {
    return parse_size(s, UnitStyle::strict);
  } catch (const std::invalid_argument& e) {
    fail(n, path, e.what());
  }
}

MapView::MapView(const Reader& r, const Node& node, std::string path,
                 std::vector<std::string> known)
    : r_(r), node_(node), path_(std::move(path)) {
  if (!node.IsMap()) r.fail(node, path_, "expected a map, got " + describe(node));
  const std::string where = path_.empty() ? "at top level" : "in " + path_;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const Node key = it->first;
    if (!key.IsScalar()) r.fail(key, path_, "expected a key name, got " + describe(key));
    const std::string& k = key.Scalar();
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      r.fail(key, child(k), "unknown key '" + k + "' " + where + " (known: " + join(known) + ")",
             false);
    }
    if (entries_.contains(k)) r.fail(key, child(k), "duplicate key '" + k + "' " + where, false);
    if (it->second.IsNull()) r.note_empty_value(it->second, key.Mark());
    entries_.emplace(k, std::make_pair(key, it->second));
  }
}

Node MapView::require(const std::string& key) const {
  if (const auto v = get(key)) return *v;
  r_.fail(node_, path_, "missing required key '" + key + "'");
}

}  // namespace kf::yaml

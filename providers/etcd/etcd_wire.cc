#include "providers/etcd/etcd_wire.h"

#include <charconv>

#include "providers/etcd/base64.h"

namespace berth::etcd_wire {
namespace {

using nlohmann::json;

std::string Str(int64_t n) { return std::to_string(n); }

/// Bytes field `field` of `object` (base64); absent → "". "" or what is wrong.
std::string ReadBytes(const json& object, const char* field, std::string* out) {
  out->clear();
  auto it = object.find(field);
  if (it == object.end()) return "";
  if (!it->is_string()) return std::string("\"") + field + "\" is not a string";
  if (!Base64Decode(it->get_ref<const std::string&>(), out))
    return std::string("\"") + field + "\" is not base64";
  return "";
}

std::string ReadKv(const json& j, EtcdKv* kv) {
  if (!j.is_object()) return "a kvs[] entry is not an object";
  for (auto [field, out] : {std::pair{"key", &kv->key}, std::pair{"value", &kv->value}}) {
    if (std::string e = ReadBytes(j, field, out); !e.empty()) return "kvs[]: " + e;
  }
  if (kv->key.empty()) return "a kvs[] entry has no key";
  for (auto [field, out] : {std::pair{"create_revision", &kv->create_revision},
                            std::pair{"mod_revision", &kv->mod_revision},
                            std::pair{"version", &kv->version}, std::pair{"lease", &kv->lease}}) {
    if (std::string e = ReadInt64(j, field, out); !e.empty()) return "kvs[]: " + e;
  }
  return "";
}

}  // namespace

std::string RangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

json RangeBody(const std::string& key, const std::string& range_end, int64_t limit, bool keys_only,
               int64_t revision) {
  json body = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) body["range_end"] = Base64Encode(range_end);
  if (limit > 0) body["limit"] = Str(limit);
  if (keys_only) body["keys_only"] = true;
  if (revision > 0) body["revision"] = Str(revision);
  return body;
}

json WatchCreateBody(const std::string& key, const std::string& range_end, int64_t start_revision) {
  json create = {{"key", Base64Encode(key)}};
  if (!range_end.empty()) create["range_end"] = Base64Encode(range_end);
  if (start_revision > 0) create["start_revision"] = Str(start_revision);
  return {{"create_request", create}};
}

json PutBody(const std::string& key, const std::string& value, int64_t lease) {
  json body = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) body["lease"] = Str(lease);
  return body;
}

json DeleteBody(const std::string& key) { return {{"key", Base64Encode(key)}}; }

json CreateIfAbsentBody(const std::string& key, const std::string& value, int64_t lease) {
  json compare = {{"key", Base64Encode(key)},
                  {"target", "CREATE"},
                  {"result", "EQUAL"},
                  {"create_revision", "0"}};
  return {{"compare", json::array({compare})},
          {"success", json::array({{{"request_put", PutBody(key, value, lease)}}})},
          {"failure", json::array({{{"request_range", RangeBody(key, "", 0)}}})}};
}

json DeleteIfLeaseBody(const std::string& key, int64_t lease) {
  json compare = {
      {"key", Base64Encode(key)}, {"target", "LEASE"}, {"result", "EQUAL"}, {"lease", Str(lease)}};
  return {{"compare", json::array({compare})},
          {"success", json::array({{{"request_delete_range", DeleteBody(key)}}})}};
}

json GrantBody(int64_t ttl_seconds) { return {{"TTL", Str(ttl_seconds)}}; }

json LeaseIdBody(int64_t lease) { return {{"ID", Str(lease)}}; }

json AuthenticateBody(const std::string& name, const std::string& password) {
  return {{"name", name}, {"password", password}};
}

std::string ReadInt64(const json& object, const char* field, int64_t* out) {
  *out = 0;
  auto it = object.find(field);
  if (it == object.end()) return "";
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX})
      return std::string("\"") + field + "\" is out of range";
    *out = it->get<int64_t>();
    return "";
  }
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return "";
    *out = 0;
    return std::string("\"") + field + "\" is not a 64-bit integer: '" + s.substr(0, 40) + "'";
  }
  return std::string("\"") + field + "\" is not an integer";
}

std::string ReadKvs(const json& answer, std::vector<EtcdKv>* kvs) {
  kvs->clear();
  if (!answer.is_object()) return "the answer is not a JSON object";
  auto it = answer.find("kvs");
  if (it == answer.end()) return "";
  if (!it->is_array()) return "\"kvs\" is not an array";
  for (const json& j : *it) {
    EtcdKv kv;
    if (std::string e = ReadKv(j, &kv); !e.empty()) return e;
    kvs->push_back(std::move(kv));
  }
  return "";
}

std::string ReadMore(const json& answer, bool* more) {
  *more = false;
  if (!answer.is_object()) return "the answer is not a JSON object";
  auto it = answer.find("more");
  if (it == answer.end()) return "";
  if (!it->is_boolean()) return "\"more\" is not a boolean";
  *more = it->get<bool>();
  return "";
}

std::string ReadTxn(const json& answer, bool* succeeded, std::vector<EtcdKv>* kvs) {
  *succeeded = false;
  kvs->clear();
  if (!answer.is_object()) return "the answer is not a JSON object";
  if (!answer.contains("header")) return "no \"header\" (not an etcd answer?)";
  if (auto it = answer.find("succeeded"); it != answer.end()) {
    if (!it->is_boolean()) return "\"succeeded\" is not a boolean";
    *succeeded = it->get<bool>();
  }
  auto it = answer.find("responses");
  if (it == answer.end()) return "";
  if (!it->is_array()) return "\"responses\" is not an array";
  for (const json& r : *it) {
    if (!r.is_object()) return "a responses[] entry is not an object";
    if (auto range = r.find("response_range"); range != r.end()) return ReadKvs(*range, kvs);
  }
  return "";
}

std::string ReadGrant(const json& answer, int64_t* id) {
  if (!answer.is_object()) return "the answer is not a JSON object";
  if (std::string e = ReadInt64(answer, "ID", id); !e.empty()) return e;
  if (*id == 0) return "no lease \"ID\"";
  int64_t ttl = 0;
  return ReadInt64(answer, "TTL", &ttl);
}

std::string ReadKeepAlive(const json& message, int64_t* ttl) {
  *ttl = 0;
  if (!message.is_object()) return "the answer is not a JSON object";
  auto it = message.find("result");
  if (it == message.end() || !it->is_object()) return "no \"result\" object";
  if (std::string e = ReadInt64(*it, "TTL", ttl); !e.empty()) return e;
  if (*ttl < 0) return "a negative \"TTL\"";
  return "";
}

std::string ReadHeaderRevision(const json& answer, int64_t* revision) {
  *revision = 0;
  if (!answer.is_object()) return "the answer is not a JSON object";
  auto it = answer.find("header");
  if (it == answer.end()) return "";
  if (!it->is_object()) return "\"header\" is not an object";
  if (std::string e = ReadInt64(*it, "revision", revision); !e.empty()) return "header: " + e;
  if (*revision < 0) return "a negative header revision";
  return "";
}

std::string ReadWatchMessage(const json& message, size_t max_value_bytes, WatchMessage* out) {
  *out = WatchMessage();
  if (!message.is_object()) return "the message is not a JSON object";
  auto it = message.find("result");
  if (it == message.end() || !it->is_object()) return "no \"result\" object";
  const json& r = *it;
  for (auto [field, flag] :
       {std::pair{"created", &out->created}, std::pair{"canceled", &out->canceled}}) {
    auto f = r.find(field);
    if (f == r.end()) continue;
    if (!f->is_boolean()) return std::string("\"") + field + "\" is not a boolean";
    *flag = f->get<bool>();
  }
  if (std::string e = ReadInt64(r, "compact_revision", &out->compact_revision); !e.empty())
    return e;
  if (auto f = r.find("cancel_reason"); f != r.end() && f->is_string())
    out->cancel_reason = f->get<std::string>().substr(0, 200);
  if (std::string e = ReadHeaderRevision(r, &out->revision); !e.empty()) return e;
  auto events = r.find("events");
  if (events == r.end()) return "";
  if (!events->is_array()) return "\"events\" is not an array";
  for (const json& ev : *events) {
    if (!ev.is_object()) return "an events[] entry is not an object";
    EtcdWatchResult::Event event;
    auto type = ev.find("type");
    if (type != ev.end()) {
      if (!type->is_string()) return "an event's \"type\" is not a string";
      const std::string& t = type->get_ref<const std::string&>();
      if (t == "DELETE")
        event.deleted = true;
      else if (t != "PUT")
        return "an event's \"type\" is '" + t.substr(0, 20) + "', neither PUT nor DELETE";
    }
    auto kv = ev.find("kv");
    if (kv == ev.end()) return "an event has no \"kv\"";
    if (std::string e = ReadKv(*kv, &event.kv); !e.empty()) return "events[]." + e;
    if (max_value_bytes > 0 && event.kv.value.size() > max_value_bytes) {
      event.kv.value.clear();
      event.kv.too_large = true;
    }
    out->events.push_back(std::move(event));
  }
  return "";
}

std::string ReadToken(const json& answer, std::string* token) {
  token->clear();
  if (!answer.is_object()) return "the answer is not a JSON object";
  auto it = answer.find("token");
  if (it == answer.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    return "no \"token\" string";
  *token = it->get<std::string>();
  return "";
}

bool ReadError(const json& answer, EtcdError* error) {
  if (!answer.is_object()) return false;
  auto it = answer.find("error");
  if (it == answer.end()) return false;
  const json& where = it->is_object() ? *it : answer;
  auto code = where.find(it->is_object() ? "grpc_code" : "code");
  error->grpc_code = code != where.end() && code->is_number_integer() ? code->get<int>() : 0;
  auto message = where.find("message");
  if (message != where.end() && message->is_string()) {
    error->message = message->get<std::string>();
  } else if (it->is_string()) {
    error->message = it->get<std::string>();
  } else {
    error->message = "(no message)";
  }
  return true;
}

}  // namespace berth::etcd_wire

// A saved observation's units read straight from the scanner's calls, without a document per
// unit (core/json_read.h: JsonItemReader). It reads what `berth observe -o json` writes: the
// known keys once each, with their own types. Anything else (an unknown or repeated key, a
// number out of range, a nested value) makes the unit "odd": its caller reads that item again
// as a document, the careful way, which words the error exactly as before.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/json_scan.h"
#include "core/observed.h"

namespace berth {

class ObservedUnitReader {
 public:
  /// Begins a unit (its object's StartObject was seen).
  void Begin();
  /// The calls inside the unit's object, in order; false once the unit is odd (what follows
  /// may be ignored).
  void Key(std::string_view k);
  void String(std::string_view s);
  void Null();
  void Boolean(bool b);
  void Signed(int64_t v);
  void Unsigned(uint64_t v);
  void Odd() { odd_ = true; }  // a float, or an object inside the unit
  void StartArray();
  void EndArray();
  /// Whether it read the unit itself; when not, read the item as a document instead.
  bool odd() const { return odd_; }
  /// The unit read; `has_note`: whether it said its content_note (what ReadUnit derives, the
  /// lineage and the default note, is the caller's to add).
  ObservedUnit Take(bool* has_note);

 private:
  ObservedUnit u_;
  std::bitset<32> seen_;
  int field_ = -1;  // the key whose value comes next
  bool in_list_ = false;
  bool note_set_ = false;
  bool odd_ = false;
};

}  // namespace berth

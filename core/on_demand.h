// A member made on first write: for the big parts of a record that most records leave unset
// (each engine's own options: a service of one engine does not carry the other engines'),
// at the size of a pointer until then. 10,000 services carried 870 bytes of options each, of
// one engine at most.
#pragma once

#include <memory>

namespace berth {

/// Holds a T, made when first written through a non-const access; read before that, it is a
/// default T. Copies are deep: a value, not a shared thing.
template <class T>
class OnDemand {
 public:
  OnDemand() = default;
  OnDemand(const OnDemand& other) : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  OnDemand(OnDemand&&) noexcept = default;
  OnDemand& operator=(const OnDemand& other) {
    if (this != &other) p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  OnDemand& operator=(OnDemand&&) noexcept = default;

  const T& operator*() const { return p_ ? *p_ : Unset(); }
  const T* operator->() const { return &**this; }
  T& operator*() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }
  T* operator->() { return &**this; }
  /// Whether it was ever written (or read through a non-const access).
  bool made() const { return p_ != nullptr; }

 private:
  static const T& Unset() {
    static const T unset{};
    return unset;
  }
  std::unique_ptr<T> p_;
};

}  // namespace berth

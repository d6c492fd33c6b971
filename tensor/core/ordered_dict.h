// OrderedDict: a map that keeps insertion order, as libtorch's
// torch::OrderedDict. Named parameters, buffers and state dicts are ordered
// (registration order, then depth first), so that they print, save and
// iterate the way PyTorch's do.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensor/core/errors.h"

namespace tandem {

template <typename Key, typename Value>
class OrderedDict {
 public:
  struct Item {
    Key first;
    Value second;
    const Key& key() const { return first; }
    Value& value() { return second; }
    const Value& value() const { return second; }
  };

  OrderedDict() = default;
  // `key_description` names the keys in errors ("parameter", "buffer", "key").
  explicit OrderedDict(std::string key_description) : key_description_(std::move(key_description)) {}
  OrderedDict(std::initializer_list<Item> items) {
    for (const auto& item : items) insert(item.first, item.second);
  }

  // Adds a new key; a key that is already there is an error, as in libtorch.
  Value& insert(const Key& key, Value value) {
    TANDEM_CHECK(index_.find(key) == index_.end(), KeyError, key_description_, " '", key, "' already defined");
    index_.emplace(key, items_.size());
    items_.push_back(Item{key, std::move(value)});
    return items_.back().second;
  }
  // Adds the key or replaces its value, keeping its place.
  Value& insert_or_assign(const Key& key, Value value) {
    if (auto it = index_.find(key); it != index_.end()) {
      items_[it->second].second = std::move(value);
      return items_[it->second].second;
    }
    return insert(key, std::move(value));
  }
  void update(const OrderedDict& other) {
    for (const auto& item : other) insert_or_assign(item.first, item.second);
  }
  // Removes a key (linear in the size), keeping the order of the rest.
  void erase(const Key& key) {
    auto it = index_.find(key);
    TANDEM_CHECK(it != index_.end(), KeyError, key_description_, " '", key, "' is not defined");
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  }

  Value& operator[](const Key& key) { return items_[checked_index(key)].second; }
  const Value& operator[](const Key& key) const { return items_[checked_index(key)].second; }
  Value& at(const Key& key) { return (*this)[key]; }
  const Value& at(const Key& key) const { return (*this)[key]; }
  Item& operator[](size_t i) { return items_.at(i); }
  const Item& operator[](size_t i) const { return items_.at(i); }
  Value* find(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const Value* find(const Key& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  bool contains(const Key& key) const { return index_.find(key) != index_.end(); }

  size_t size() const { return items_.size(); }
  bool is_empty() const { return items_.empty(); }
  bool empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    index_.clear();
  }

  std::vector<Key> keys() const {
    std::vector<Key> out;
    out.reserve(items_.size());
    for (const auto& item : items_) out.push_back(item.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    out.reserve(items_.size());
    for (const auto& item : items_) out.push_back(item.second);
    return out;
  }
  const std::vector<Item>& items() const { return items_; }

  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  size_t checked_index(const Key& key) const {
    auto it = index_.find(key);
    TANDEM_CHECK(it != index_.end(), KeyError, key_description_, " '", key, "' is not defined");
    return it->second;
  }

  std::string key_description_ = "key";
  std::vector<Item> items_;
  std::unordered_map<Key, size_t> index_;
};

}  // namespace tandem

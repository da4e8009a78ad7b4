// Buddy allocator with the policy of cluster/dataplane/buddy.py (the tested Python fallback):
// smallest order that fits, lowest address within it, split keeping the lower half, merge on free
// while the buddy is free. A plain C ABI so Python loads it with ctypes.
#include <cstdint>
#include <set>
#include <unordered_map>
#include <vector>

namespace {

struct Buddy {
    uint64_t min_block;
    int max_order;
    std::vector<std::set<uint64_t>> free_lists;  // per order, ordered by address
    std::unordered_map<uint64_t, int> used;      // offset -> order
};

int order_for(const Buddy* b, uint64_t nbytes) {
    uint64_t blocks = nbytes == 0 ? 1 : (nbytes + b->min_block - 1) / b->min_block;
    int order = 0;
    while ((uint64_t(1) << order) < blocks) ++order;
    return order;
}

}  // namespace

extern "C" {

void* bd_create(uint64_t size, uint64_t min_block) {
    if (min_block == 0 || (min_block & (min_block - 1)) || size < min_block) return nullptr;
    auto* b = new Buddy{min_block, 0, {}, {}};
    uint64_t blocks = size / min_block;
    while ((blocks >> (b->max_order + 1)) != 0) ++b->max_order;
    b->free_lists.resize(b->max_order + 1);
    b->free_lists[b->max_order].insert(0);
    return b;
}

void bd_destroy(void* h) { delete static_cast<Buddy*>(h); }

uint64_t bd_capacity(void* h) {
    auto* b = static_cast<Buddy*>(h);
    return b->min_block << b->max_order;
}

int64_t bd_alloc(void* h, uint64_t nbytes) {
    auto* b = static_cast<Buddy*>(h);
    int want = order_for(b, nbytes);
    if (want > b->max_order) return -1;
    for (int order = want; order <= b->max_order; ++order) {
        auto& fl = b->free_lists[order];
        if (fl.empty()) continue;
        uint64_t off = *fl.begin();
        fl.erase(fl.begin());
        while (order > want) {
            --order;
            b->free_lists[order].insert(off + (b->min_block << order));
        }
        b->used[off] = want;
        return int64_t(off);
    }
    return -1;
}

int bd_free(void* h, uint64_t offset) {
    auto* b = static_cast<Buddy*>(h);
    auto it = b->used.find(offset);
    if (it == b->used.end()) return -1;
    int order = it->second;
    b->used.erase(it);
    while (order < b->max_order) {
        uint64_t buddy = offset ^ (b->min_block << order);
        auto& fl = b->free_lists[order];
        auto bit = fl.find(buddy);
        if (bit == fl.end()) break;
        fl.erase(bit);
        if (buddy < offset) offset = buddy;
        ++order;
    }
    b->free_lists[order].insert(offset);
    return 0;
}

int64_t bd_size_of(void* h, uint64_t offset) {
    auto* b = static_cast<Buddy*>(h);
    auto it = b->used.find(offset);
    return it == b->used.end() ? -1 : int64_t(b->min_block << it->second);
}

uint64_t bd_free_bytes(void* h) {
    auto* b = static_cast<Buddy*>(h);
    uint64_t total = 0;
    for (int o = 0; o <= b->max_order; ++o) total += b->free_lists[o].size() * (b->min_block << o);
    return total;
}

uint64_t bd_largest_free(void* h) {
    auto* b = static_cast<Buddy*>(h);
    for (int o = b->max_order; o >= 0; --o)
        if (!b->free_lists[o].empty()) return b->min_block << o;
    return 0;
}

}  // extern "C"

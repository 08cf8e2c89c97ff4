// hnswlib (Debian libhnswlib-dev, header-only C++) behind a C interface, for
// bench/bench_index.c only: the baseline graph index next to mmrag's FAISS HNSW.
#include <hnswlib/hnswlib.h>

#include <cstdint>
#include <exception>

struct hnsw_shim {
    hnswlib::InnerProductSpace space;
    hnswlib::HierarchicalNSW<float> *h;
    hnsw_shim(int dim, size_t max, size_t m, size_t efc) : space(dim), h(nullptr) {
        h = new hnswlib::HierarchicalNSW<float>(&space, max, m, efc);
    }
    ~hnsw_shim() { delete h; }
};

extern "C" {
hnsw_shim *hnsw_shim_create(int dim, size_t max_elements, int m, int ef_construction) {
    try {
        return new hnsw_shim(dim, max_elements, (size_t)m, (size_t)ef_construction);
    } catch (const std::exception &) {
        return nullptr;
    }
}
void hnsw_shim_free(hnsw_shim *s) { delete s; }
int hnsw_shim_add(hnsw_shim *s, const float *v, int64_t label) {
    try {
        s->h->addPoint(v, (hnswlib::labeltype)label);
        return 0;
    } catch (const std::exception &) {
        return -1;
    }
}
void hnsw_shim_set_ef(hnsw_shim *s, int ef) { s->h->setEf((size_t)ef); }
// top-k labels best first; returns the count
int hnsw_shim_search(hnsw_shim *s, const float *q, int k, int64_t *labels, float *sims) {
    try {
        auto pq = s->h->searchKnn(q, (size_t)k);
        int n = (int)pq.size();
        for (int i = n - 1; i >= 0; i--) {  // the queue pops worst first
            labels[i] = (int64_t)pq.top().second;
            sims[i] = 1.0f - pq.top().first;  // hnswlib IP distance = 1 - dot
            pq.pop();
        }
        return n;
    } catch (const std::exception &) {
        return -1;
    }
}
}
